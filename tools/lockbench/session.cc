#include "tools/lockbench/session.h"

#include "absl/strings/str_cat.h"
#include "protos/proto_duration.h"

namespace lockd::bench {

void SetOpen(const std::string& ns, const std::string& owner, absl::Duration lease,
             v1::SessionRequest* req) {
  v1::SessionOpen* open = req->mutable_open();
  open->set_namespace_(ns);
  open->set_owner(owner);
  SetProtoDuration(lease, open->mutable_lease_ttl());
}

void SetAcquire(uint64_t op_id, const std::string& name, absl::Duration wait,
                v1::SessionRequest* req) {
  v1::SessionAcquire* a = req->mutable_acquire();
  a->set_op_id(op_id);
  v1::AcquireRequest* r = a->mutable_request();
  r->set_name(name);
  if (wait > absl::ZeroDuration()) {
    SetProtoDuration(wait, r->mutable_wait_timeout());
  } else {
    r->clear_wait_timeout();
  }
}

void SetRelease(uint64_t op_id, const std::string& name, v1::SessionRequest* req) {
  v1::SessionRelease* r = req->mutable_release();
  r->set_op_id(op_id);
  r->mutable_request()->set_name(name);
}

absl::Status CheckOpened(const v1::SessionResponse& resp) {
  if (resp.has_opened()) return absl::OkStatus();
  return absl::InternalError(
      absl::StrCat("Session: expected `opened` first, got: ", resp.ShortDebugString()));
}

absl::StatusOr<AcquireOutcome> ResultOf(const v1::SessionResponse& resp, uint64_t op_id,
                                        bool acquire) {
  if (resp.has_lost()) {
    return absl::AbortedError(absl::StrCat("Session: hold lost: ", resp.lost().ShortDebugString()));
  }
  if (!resp.has_result()) {
    return absl::InternalError(
        absl::StrCat("Session: expected a result, got: ", resp.ShortDebugString()));
  }
  const v1::SessionResult& r = resp.result();
  if (r.op_id() != op_id) {
    return absl::InternalError(
        absl::StrCat("Session: result for op ", r.op_id(), " while op ", op_id, " is in flight"));
  }
  if (r.status().code() != 0) {
    return absl::Status(
        static_cast<absl::StatusCode>(r.status().code()),
        absl::StrCat(acquire ? "Session Acquire: " : "Session Release: ", r.status().message()));
  }
  if (!acquire) return AcquireOutcome{};
  return AcquireOutcome{r.acquire().acquired(), r.acquire().fencing_token()};
}

absl::Status StreamStatus(const grpc::Status& s) {
  if (s.ok()) return absl::OkStatus();
  return absl::Status(static_cast<absl::StatusCode>(s.error_code()),
                      absl::StrCat("Session: ", s.error_message()));
}

}  // namespace lockd::bench
