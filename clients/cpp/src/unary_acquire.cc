#include "clients/cpp/src/unary_acquire.h"

#include <algorithm>
#include <string>
#include <utility>

#include "absl/strings/str_cat.h"
#include "clients/cpp/src/cancellation.h"
#include "clients/cpp/src/client_core.h"
#include "clients/cpp/src/errors.h"
#include "clients/cpp/src/rpc.h"
#include "protos/proto_duration.h"

namespace lockd::client_internal {
namespace {

// A unary grant: its validity and its first renewal, both from a send time.
struct Grant {
  uint64_t fencing_token = 0;
  absl::Duration ttl;
  SteadyTime valid_until;
  SteadyTime renew_at;
};

// Step 3 of unary_acquire.h: renews `grant` if a third of its ttl has passed
// (auto_renew) or its validity ran out, moving its validity and first renewal
// to the renewal's send time. OK: the grant may be used. Otherwise the error
// the Acquire reports (a grant that is no longer valid was given back).
absl::Status RenewAfterWait(const ClientCore& core, const AcquireCall& call, const LockTarget& lock,
                            Grant& grant) {
  const ClientOptions& co = core.options();
  const std::string& ns = lock.ns;
  const std::string& name = lock.name;
  SteadyTime now = SteadyClock::now();
  if (!(call.auto_renew && now >= grant.renew_at) && now < grant.valid_until) {
    return absl::OkStatus();
  }
  v1::RenewRequest rreq;
  rreq.set_namespace_(ns);
  rreq.set_name(name);
  rreq.set_owner(call.owner);
  rreq.set_fencing_token(grant.fencing_token);
  SetProtoDuration(grant.ttl, rreq.mutable_lease_ttl());
  v1::RenewResponse rresp;
  grpc::ClientContext ctx;
  SteadyTime rdeadline =
      std::max(call.deadline, now + ToSteady(std::min(co.rpc_timeout, grant.ttl / 3)));
  SetDeadline(&ctx, rdeadline);
  SteadyTime rsend = SteadyClock::now();
  grpc::Status rs = core.stub().Renew(&ctx, rreq, &rresp);
  absl::Status renewed = FromGrpc("renew", ns, name, rs);
  if (renewed.ok() && rresp.fencing_token() != grant.fencing_token) {
    renewed = LockLostError(
        "FENCING_TOKEN_CHANGED",
        absl::StrCat("lockd acquire of ", DescribeLock(ns, name),
                     ": the grant was lost before it could be renewed (fencing token ",
                     rresp.fencing_token(), " instead of ", grant.fencing_token, ")"));
  }
  if (renewed.ok()) {
    absl::Duration granted =
        rresp.has_lease_ttl() ? FromProtoDuration(rresp.lease_ttl()) : grant.ttl;
    grant.valid_until = UnaryValidUntil(rsend, granted, Drift(granted, co));
    grant.renew_at = rsend + ToSteady(grant.ttl / 3);
    return absl::OkStatus();
  }
  if (IsLockLost(renewed)) {
    return LockLostError("LOCK_NOT_HELD",
                         absl::StrCat("lockd acquire of ", DescribeLock(ns, name),
                                      ": granted, but the lease ended before the reply could "
                                      "be used: ",
                                      renewed.message()));
  }
  if (SteadyClock::now() < grant.valid_until) return absl::OkStatus();
  // Granted but unconfirmable: give the hold back rather than hand out a
  // lease that is already invalid.
  ReleaseHold(core.stub(), core.channel(), co, ns, name, call.owner, grant.fencing_token,
              SteadyClock::now() + ToSteady(co.release_timeout))
      .IgnoreError();
  return absl::UnavailableError(absl::StrCat(
      "lockd acquire of ", DescribeLock(ns, name),
      ": granted after waiting, but the lease could not be renewed: ", renewed.message()));
}

}  // namespace

absl::StatusOr<std::vector<std::shared_ptr<LeaseState>>> UnaryAcquire(const ClientCore& core,
                                                                      AcquireCall call) {
  const ClientOptions& co = core.options();
  const std::string what = DescribeCall(call);
  v1::AcquireRequest one;
  v1::AcquireAllRequest all;
  v1::AcquireResponse one_resp;
  v1::AcquireAllResponse all_resp;
  if (call.all) {
    FillRequest(call, &all);
  } else {
    FillRequest(call, &one);
  }
  if (call.ttl > absl::ZeroDuration()) {
    SetProtoDuration(call.ttl, call.all ? all.mutable_lease_ttl() : one.mutable_lease_ttl());
  }
  std::string request_id = RandomHex(16);
  SteadyTime send_time;
  std::string unresolved;  // an attempt that may have left a hold
  grpc::Status gs = AcquireWithUndo(
      core.stub(), core.channel(), co, call.deadline, &request_id, AttemptHolds(call), call.owner,
      call.cancel,
      [&](grpc::ClientContext* ctx) {
        // A cancel cuts the RPC short; lockd gives back a grant it could
        // not deliver, and the undo (FailAcquire) one it did.
        if (call.cancel.cancelled()) return grpc::Status(grpc::StatusCode::CANCELLED, "cancelled");
        CancelScope cancel(call.cancel, [ctx] { ctx->TryCancel(); });
        // A retry waits only for what is left of the caller's wait.
        SteadyTime now = SteadyClock::now();
        if (call.wait_end <= now) {
          one.clear_wait_timeout();
          all.clear_wait_timeout();
        } else {
          SetProtoDuration(FromSteady(call.wait_end - now),
                           call.all ? all.mutable_wait_timeout() : one.mutable_wait_timeout());
        }
        send_time = now;
        if (call.all) {
          all.set_request_id(request_id);
          all_resp.Clear();
          return core.stub().AcquireAll(ctx, all, &all_resp);
        }
        one.set_request_id(request_id);
        one_resp.Clear();
        return core.stub().Acquire(ctx, one, &one_resp);
      },
      &unresolved);
  // Every failure is reported through this: no hold of an attempt whose
  // outcome is unknown may outlive it. The undo runs past the caller's
  // deadline (it may have passed already), bounded by UndoTimeout.
  auto fail = [&](absl::Status s) {
    return FailAcquire(core.stub(), core.channel(), co, AttemptHolds(call), call.owner, unresolved,
                       std::move(s));
  };
  if (!gs.ok()) {
    if (gs.error_code() == grpc::StatusCode::DEADLINE_EXCEEDED && call.deadline > call.wait_end) {
      // The server would have answered when the wait ended; it did not.
      return fail(absl::UnavailableError(
          absl::StrCat("lockd acquire of ", what, ": no reply within ",
                       absl::FormatDuration(call.timeout), " (", gs.error_message(), ")")));
    }
    return fail(FromGrpcOn("acquire", what, gs));
  }
  absl::StatusOr<std::vector<v1::AcquireResponse>> granted =
      GrantedLocks(call, call.all ? nullptr : &one_resp, call.all ? &all_resp : nullptr);
  if (!granted.ok()) return fail(granted.status());

  // Each lock is a grant of its own from here on; when one cannot be used,
  // every other one is given back (all or nothing).
  std::vector<Grant> grants;
  auto give_back = [&](size_t failed) {
    for (size_t i = 0; i < granted->size(); ++i) {
      if (i == failed) continue;  // RenewAfterWait gave it back, or it is gone
      ReleaseHold(core.stub(), core.channel(), co, call.locks[i].ns, call.locks[i].name, call.owner,
                  (*granted)[i].fencing_token(), SteadyClock::now() + ToSteady(co.release_timeout))
          .IgnoreError();
    }
  };
  for (size_t i = 0; i < granted->size(); ++i) {
    const v1::AcquireResponse& resp = (*granted)[i];
    const LockTarget& lock = call.locks[i];
    Grant grant;
    grant.fencing_token = resp.fencing_token();
    grant.ttl = resp.has_lease_ttl() ? FromProtoDuration(resp.lease_ttl()) : call.ttl;
    if (grant.ttl <= absl::ZeroDuration()) {
      give_back(granted->size());
      return absl::InternalError(absl::StrCat("lockd acquire of ", DescribeLock(lock.ns, lock.name),
                                              ": the server granted the lock without a lease_ttl"));
    }
    grant.valid_until = UnaryValidUntil(send_time, grant.ttl, Drift(grant.ttl, co));
    grant.renew_at = send_time + ToSteady(grant.ttl / 3);
    absl::Status usable = RenewAfterWait(core, call, lock, grant);
    if (!usable.ok()) {
      give_back(i);
      return usable;
    }
    grants.push_back(grant);
  }

  std::vector<std::shared_ptr<LeaseState>> leases;
  for (size_t i = 0; i < grants.size(); ++i) {
    LeaseState::Params p = LeaseParams(call.locks[i], call.owner);
    p.fencing_token = grants[i].fencing_token;
    p.hold_count = (*granted)[i].hold_count();
    p.ttl = grants[i].ttl;
    p.drift = Drift(grants[i].ttl, co);
    p.auto_renew = call.auto_renew;
    p.valid_until = grants[i].valid_until;
    p.on_lost = call.on_lost;
    auto state = std::make_shared<LeaseState>(std::move(p));
    core.watchdog().Add(state, grants[i].renew_at);
    leases.push_back(std::move(state));
  }
  return leases;
}

}  // namespace lockd::client_internal
