// Input validation for every RPC (docs/api.md "Names", "Owner", "Lease",
// "Waiting", "Idempotency"). Each function turns a request into backend
// parameters, or returns kInvalidArgument whose message starts with the
// field's name and states the rule. Nothing is written when validation fails.

#ifndef LOCKD_SERVICE_VALIDATION_H_
#define LOCKD_SERVICE_VALIDATION_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "backends/backend.h"
#include "lockd/v1/lock.pb.h"
#include "service/config.h"

namespace lockd {

inline constexpr absl::string_view kDefaultNamespace = "default";
inline constexpr uint32_t kDefaultPageSize = 100;
inline constexpr uint32_t kMaxPageSize = 1000;

// True if `s` is valid UTF-8 (no overlong forms, surrogates or code points
// above U+10FFFF) and holds no control character (U+0000-U+001F,
// U+007F-U+009F).
bool IsCleanUtf8(absl::string_view s);

// A lock's kind as an acquire asks it: limit 0 is a lock (mode exclusive or
// shared, permits 0); otherwise a semaphore (mode exclusive, permits
// 1..limit, 0 asked means 1). See
// docs/api.md "Shared locks, semaphores and all-or-nothing acquires".
inline constexpr uint32_t kMaxSemaphoreLimit = 10000;
struct LockKind {
  LockMode mode = LockMode::kExclusive;
  uint32_t limit = 0;
  uint32_t permits = 0;
};
// `field_prefix` is put before the field names in messages (e.g.
// "locks[2].").
absl::StatusOr<LockKind> CheckKind(v1::LockMode mode, uint32_t limit, uint32_t permits,
                                   absl::string_view field_prefix = "");

// AcquireParams::owner is left empty when the request's owner is empty; the
// service generates one.
//
// The && overloads (of Acquire and Release) move the request's strings into
// the result instead of copying them, for a caller that owns the request
// (the session reactor); `req` is then left valid but unspecified. Same
// checks, same errors.
absl::StatusOr<AcquireParams> ToAcquireParams(v1::AcquireRequest&& req, const LeaseBounds& lease);
absl::StatusOr<AcquireParams> ToAcquireParams(const v1::AcquireRequest& req,
                                              const LeaseBounds& lease);
// An AcquireAll (docs/api.md "AcquireAll"): 1-64 locks, no (namespace,
// name) twice (the message names the second one, "locks[3]: ..."), each
// lock's fields named "locks[i].name" etc.; owner, lease_ttl, wait_timeout
// and request_id as for an Acquire.
inline constexpr int kMaxAcquireAllLocks = 64;
struct AcquireAllParams {
  struct Lock {
    LockKey key;
    LockKind kind;
  };
  std::vector<Lock> locks;  // in request order
  std::string owner;        // empty: the service generates one
  absl::Duration ttl;
  absl::Duration wait = absl::ZeroDuration();
  std::string request_id;  // empty, or at most 128 bytes
};
absl::StatusOr<AcquireAllParams> ToAcquireAllParams(const v1::AcquireAllRequest& req,
                                                    const LeaseBounds& lease);
absl::StatusOr<ReleaseParams> ToReleaseParams(const v1::ReleaseRequest& req);
absl::StatusOr<ReleaseParams> ToReleaseParams(v1::ReleaseRequest&& req);
absl::StatusOr<RenewParams> ToRenewParams(const v1::RenewRequest& req, const LeaseBounds& lease);
absl::StatusOr<LockKey> ToLockKey(const v1::DescribeRequest& req);
absl::StatusOr<ListParams> ToListParams(const v1::ListRequest& req);
// `reason` is required (1-256 bytes); it goes to the audit log, not the
// backend.
absl::StatusOr<ForceReleaseParams> ToForceReleaseParams(const v1::ForceReleaseRequest& req);

// A Session's `open`. Messages start with "open." and the field.
struct SessionOpenParams {
  std::string ns;     // empty: requests without a namespace use "default"
  std::string owner;  // empty: the service generates one
  absl::Duration ttl;
  bool keep_on_disconnect = false;
  struct Resume {
    LockKey key;
    uint64_t fencing_token = 0;
  };
  std::vector<Resume> resume;  // REQUIRES-checked: only with an owner
};
absl::StatusOr<SessionOpenParams> ToSessionOpenParams(const v1::SessionOpen& open,
                                                      const LeaseBounds& lease);

}  // namespace lockd

#endif  // LOCKD_SERVICE_VALIDATION_H_
