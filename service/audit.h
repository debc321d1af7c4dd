// The audit log: one line per ForceRelease and per authorization denial, on
// stderr with the other log lines (log.format text or json), at level
// warning so that it survives log_level: warning. Stable field names:
//
//   audit=force_release identity namespace name reason fencing_token
//         result (released | not_held | token_mismatch | error)
//         previous_owner previous_token [error]
//   audit=denied identity permission namespace name code
//         (UNAUTHENTICATED | PERMISSION_DENIED) detail
//
// Values are the caller's data, escaped; never a token or key. Thread-safe.

#ifndef LOCKD_SERVICE_AUDIT_H_
#define LOCKD_SERVICE_AUDIT_H_

#include <cstdint>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"

namespace lockd {

struct ForceReleaseAudit {
  absl::string_view identity;
  absl::string_view ns;
  absl::string_view name;
  absl::string_view reason;
  uint64_t fencing_token = 0;  // as requested; 0: any
  bool released = false;
  absl::string_view previous_owner;
  uint64_t previous_token = 0;
};

// `status` is the call's outcome (OK, a token mismatch, or another error).
void AuditForceRelease(const ForceReleaseAudit& a, const absl::Status& status);

void AuditDenial(absl::string_view identity, absl::string_view permission, absl::string_view ns,
                 absl::string_view name, absl::StatusCode code, absl::string_view detail);

}  // namespace lockd

#endif  // LOCKD_SERVICE_AUDIT_H_
