#include "service/audit.h"

#include <string>

#include "absl/strings/str_cat.h"
#include "backends/backend.h"
#include "util/log.h"

namespace lockd {

void AuditForceRelease(const ForceReleaseAudit& a, const absl::Status& status) {
  std::string token = absl::StrCat(a.fencing_token);
  std::string previous_token = absl::StrCat(a.previous_token);
  const char* result = "error";
  if (status.ok()) {
    result = a.released ? "released" : "not_held";
  } else if (IsFencingTokenMismatch(status)) {
    result = "token_mismatch";
  }
  LogFields(LogLevel::kWarning, "audit",
            {{"audit", "force_release"},
             {"identity", a.identity},
             {"namespace", a.ns},
             {"name", a.name},
             {"reason", a.reason},
             {"fencing_token", token},
             {"result", result},
             {"previous_owner", a.previous_owner},
             {"previous_token", previous_token},
             {"error", status.ok() ? absl::string_view() : status.message()}});
}

void AuditDenial(absl::string_view identity, absl::string_view permission, absl::string_view ns,
                 absl::string_view name, absl::StatusCode code, absl::string_view detail) {
  LogFields(LogLevel::kWarning, "audit",
            {{"audit", "denied"},
             {"identity", identity},
             {"permission", permission},
             {"namespace", ns},
             {"name", name},
             {"code",
              code == absl::StatusCode::kUnauthenticated ? "UNAUTHENTICATED" : "PERMISSION_DENIED"},
             {"detail", detail}});
}

}  // namespace lockd
