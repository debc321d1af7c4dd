#include "clients/cpp/src/acquire_path.h"

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"
#include "clients/cpp/src/client_core.h"
#include "clients/cpp/src/errors.h"

namespace lockd::client_internal {

absl::StatusOr<AcquireCall> NewAcquireCall(const ClientCore& core, std::vector<LockTarget> locks,
                                           AcquireOptions options, bool all) {
  if (options.ttl < absl::ZeroDuration()) {
    return absl::InvalidArgumentError("AcquireOptions.ttl must not be negative");
  }
  if (options.wait < absl::ZeroDuration()) {
    return absl::InvalidArgumentError("AcquireOptions.wait must not be negative");
  }
  if (options.timeout < absl::ZeroDuration()) {
    return absl::InvalidArgumentError("AcquireOptions.timeout must not be negative");
  }
  const ClientOptions& co = core.options();
  const SteadyTime start = SteadyClock::now();
  AcquireCall call;
  for (LockTarget& lock : locks) {
    if (lock.ns.empty()) lock.ns = core.Namespace(options.ns);
  }
  call.locks = std::move(locks);
  call.all = all;
  call.owner = options.owner.empty() ? co.owner : options.owner;
  call.ttl = options.ttl;
  call.wait = options.wait;
  call.timeout =
      options.timeout > absl::ZeroDuration() ? options.timeout : options.wait + co.rpc_timeout;
  call.wait_end = start + ToSteady(options.wait);
  call.deadline = start + ToSteady(call.timeout);
  call.auto_renew = options.auto_renew;
  call.on_lost = std::move(options.on_lost);
  call.cancel = std::move(options.cancel);
  return call;
}

absl::StatusOr<AcquireCall> NewAcquireCall(const ClientCore& core, absl::string_view name,
                                           AcquireOptions options) {
  LockTarget lock;
  lock.name = std::string(name);
  return NewAcquireCall(core, {std::move(lock)}, std::move(options));
}

std::string DescribeCall(const AcquireCall& call) {
  if (call.locks.size() == 1 && !call.all) {
    return DescribeLock(call.locks.front().ns, call.locks.front().name);
  }
  std::string out = "locks ";
  for (const LockTarget& lock : call.locks) {
    absl::StrAppend(&out, &lock == &call.locks.front() ? "" : ", ",
                    DescribeLock(lock.ns, lock.name));
  }
  return out;
}

namespace {

// The kind fields of `lock` into an AcquireRequest or a LockSpec.
template <typename Message>
void SetLock(const LockTarget& lock, Message* m) {
  m->set_namespace_(lock.ns);
  m->set_name(lock.name);
  m->set_mode(ToProto(lock.mode));
  m->set_limit(lock.limit);
  m->set_permits(lock.permits);
}

}  // namespace

void FillRequest(const AcquireCall& call, v1::AcquireRequest* req) {
  SetLock(call.locks.front(), req);
  req->set_owner(call.owner);
}

void FillRequest(const AcquireCall& call, v1::AcquireAllRequest* req) {
  req->set_owner(call.owner);
  for (const LockTarget& lock : call.locks) SetLock(lock, req->add_locks());
}

absl::StatusOr<std::vector<v1::AcquireResponse>> GrantedLocks(const AcquireCall& call,
                                                              const v1::AcquireResponse* one,
                                                              const v1::AcquireAllResponse* all) {
  if (one != nullptr) {
    if (!one->acquired()) {
      return NotAcquiredError(DescribeCall(call), call.wait,
                              one->has_current() ? &one->current() : nullptr);
    }
    return std::vector<v1::AcquireResponse>{*one};
  }
  if (!all->acquired()) {
    return NotAcquiredError(DescribeCall(call), call.wait,
                            all->has_blocked_on() ? &all->blocked_on() : nullptr);
  }
  if (static_cast<size_t>(all->locks_size()) != call.locks.size()) {
    return absl::InternalError(absl::StrCat("lockd acquire of ", DescribeCall(call), ": granted ",
                                            all->locks_size(), " locks instead of ",
                                            call.locks.size()));
  }
  return std::vector<v1::AcquireResponse>(all->locks().begin(), all->locks().end());
}

std::vector<AttemptHold> AttemptHolds(const AcquireCall& call,
                                      const std::vector<v1::AcquireResponse>& granted) {
  std::vector<AttemptHold> holds;
  for (size_t i = 0; i < call.locks.size(); ++i) {
    holds.push_back({call.locks[i].ns, call.locks[i].name,
                     i < granted.size() ? granted[i].fencing_token() : 0});
  }
  return holds;
}

LeaseState::Params LeaseParams(const LockTarget& lock, const std::string& owner) {
  LeaseState::Params p;
  p.ns = lock.ns;
  p.name = lock.name;
  p.owner = owner;
  p.mode = lock.mode;
  p.limit = lock.limit;
  p.permits = lock.limit > 0 ? std::max<uint32_t>(lock.permits, 1) : 0;
  return p;
}

AcquirePath ChooseAcquirePath(const ClientCore& core, const AcquireCall& call) {
  const ClientOptions& options = core.options();
  if (!options.use_sessions || call.owner != options.owner || !call.auto_renew) {
    return AcquirePath::kUnary;
  }
  return core.session().Accepts(call.ttl) ? AcquirePath::kSession : AcquirePath::kUnary;
}

}  // namespace lockd::client_internal
