#include "clients/cpp/src/rpc.h"

#include <algorithm>
#include <thread>

#include "absl/random/random.h"
#include "absl/strings/cord.h"
#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "clients/cpp/src/errors.h"
#include "protos/proto_duration.h"

namespace lockd::client_internal {
namespace {

// Sends `req` (the same request each time) until an answer other than
// UNAVAILABLE or `deadline`; errors name the call `what`.
absl::StatusOr<ReleaseOutcome> SendRelease(Stub& stub, grpc::ChannelInterface* channel,
                                           const ClientOptions& options,
                                           const v1::ReleaseRequest& req, SteadyTime deadline,
                                           absl::string_view what) {
  v1::ReleaseResponse resp;
  grpc::Status status = CallWithRetry(options, channel, deadline, [&](grpc::ClientContext* ctx) {
    resp.Clear();
    return stub.Release(ctx, req, &resp);
  });
  if (!status.ok()) return FromGrpc(what, req.namespace_(), req.name(), status);
  return ReleaseOutcome{resp.released(), resp.hold_count()};
}

}  // namespace

std::string RandomHex(int bytes) {
  thread_local absl::BitGen gen;
  std::string raw;
  raw.reserve(static_cast<size_t>(bytes));
  while (raw.size() < static_cast<size_t>(bytes)) {
    uint64_t r = absl::Uniform<uint64_t>(gen);
    for (int i = 0; i < 8 && raw.size() < static_cast<size_t>(bytes); ++i, r >>= 8) {
      raw.push_back(static_cast<char>(r & 0xff));
    }
  }
  return absl::BytesToHexString(raw);
}

void SetDeadline(grpc::ClientContext* ctx, SteadyTime deadline) {
  // gRPC takes system_clock deadlines and turns them back into a relative
  // timeout on its own monotonic clock, so only the remaining time matters.
  ctx->set_deadline(std::chrono::system_clock::now() +
                    std::chrono::duration_cast<std::chrono::system_clock::duration>(
                        deadline - SteadyClock::now()));
}

void PauseWatchingChannel(grpc::ChannelInterface* channel, SteadyTime until,
                          const CancellationToken* cancel) {
  // A cancel is noticed between slices: neither a sleep nor a wait for a
  // state change can be woken by it.
  constexpr auto kSlice = std::chrono::milliseconds(20);
  while (SteadyClock::now() < until) {
    if (cancel != nullptr && cancel->cancelled()) return;
    SteadyTime end = cancel != nullptr ? std::min(until, SteadyClock::now() + kSlice) : until;
    if (channel == nullptr) {
      std::this_thread::sleep_for(end - SteadyClock::now());
      continue;
    }
    grpc_connectivity_state state = channel->GetState(/*try_to_connect=*/true);
    if (state == GRPC_CHANNEL_READY) return;
    auto left =
        std::chrono::duration_cast<std::chrono::system_clock::duration>(end - SteadyClock::now());
    if (!channel->WaitForStateChange(state, std::chrono::system_clock::now() + left) &&
        cancel == nullptr) {
      return;
    }
  }
}

absl::Duration Jittered(absl::Duration backoff) {
  thread_local absl::BitGen gen;
  int64_t half = absl::ToInt64Nanoseconds(backoff / 2);
  return absl::Nanoseconds(half + absl::Uniform<int64_t>(gen, 0, half + 1));
}

absl::Duration NextBackoff(const ClientOptions& options, absl::Duration backoff) {
  return std::min(backoff * 2, std::max(options.max_backoff, backoff));
}

grpc::Status CallWithRetry(const ClientOptions& options, grpc::ChannelInterface* channel,
                           SteadyTime deadline,
                           absl::FunctionRef<grpc::Status(grpc::ClientContext*)> attempt) {
  absl::Duration backoff = std::max(options.initial_backoff, absl::Milliseconds(1));
  while (true) {
    grpc::ClientContext ctx;
    SetDeadline(&ctx, deadline);
    grpc::Status status = attempt(&ctx);
    if (status.error_code() != grpc::StatusCode::UNAVAILABLE) return status;
    absl::Duration sleep = Jittered(backoff);
    if (SteadyClock::now() + ToSteady(sleep) >= deadline) return status;
    PauseWatchingChannel(channel, SteadyClock::now() + ToSteady(sleep));
    backoff = NextBackoff(options, backoff);
  }
}

absl::StatusOr<SteadyTime> RenewLease(Stub& stub, LeaseState& lease, SteadyTime deadline) {
  v1::RenewRequest req;
  req.set_namespace_(lease.ns);
  req.set_name(lease.name);
  req.set_owner(lease.owner);
  req.set_fencing_token(lease.fencing_token);
  SetProtoDuration(lease.ttl, req.mutable_lease_ttl());
  v1::RenewResponse resp;
  grpc::ClientContext ctx;
  SetDeadline(&ctx, deadline);
  SteadyTime send_time = SteadyClock::now();
  grpc::Status status = stub.Renew(&ctx, req, &resp);
  SteadyTime reply_time = SteadyClock::now();
  if (!status.ok()) {
    absl::Status s = FromGrpc("renew", lease.ns, lease.name, status);
    if (IsLockLost(s)) {
      lease.MarkLost(s);
      return lease.lost_status();
    }
    return s;
  }
  absl::Duration granted = resp.has_lease_ttl() ? FromProtoDuration(resp.lease_ttl()) : lease.ttl;
  absl::Status lost = lease.OnRenewed(send_time, reply_time, granted, resp.fencing_token());
  if (!lost.ok()) return lost;
  return send_time;
}

absl::StatusOr<ReleaseOutcome> ReleaseHold(Stub& stub, grpc::ChannelInterface* channel,
                                           const ClientOptions& options, absl::string_view ns,
                                           absl::string_view name, absl::string_view owner,
                                           uint64_t fencing_token, SteadyTime deadline,
                                           std::string request_id) {
  v1::ReleaseRequest req;
  req.set_namespace_(std::string(ns));
  req.set_name(std::string(name));
  req.set_owner(std::string(owner));
  req.set_fencing_token(fencing_token);
  req.set_request_id(request_id.empty() ? RandomHex(16) : std::move(request_id));
  return SendRelease(stub, channel, options, req, deadline, "release");
}

bool OutcomeUnknown(const grpc::Status& status) {
  switch (status.error_code()) {
    case grpc::StatusCode::DEADLINE_EXCEEDED:
    case grpc::StatusCode::CANCELLED:
    case grpc::StatusCode::UNAVAILABLE:
    case grpc::StatusCode::UNKNOWN:
    case grpc::StatusCode::INTERNAL:
    case grpc::StatusCode::ABORTED:
    case grpc::StatusCode::DATA_LOSS:
      return true;
    default:
      return false;
  }
}

absl::Duration UndoTimeout(const ClientOptions& options) {
  return std::min(options.rpc_timeout, options.release_timeout);
}

absl::StatusOr<ReleaseOutcome> UndoAcquire(Stub& stub, grpc::ChannelInterface* channel,
                                           const ClientOptions& options, absl::string_view ns,
                                           absl::string_view name, absl::string_view owner,
                                           absl::string_view acquire_request_id,
                                           SteadyTime deadline, uint64_t fencing_token) {
  v1::ReleaseRequest req;
  req.set_namespace_(std::string(ns));
  req.set_name(std::string(name));
  req.set_owner(std::string(owner));
  req.set_acquire_request_id(std::string(acquire_request_id));
  req.set_fencing_token(fencing_token);
  return SendRelease(stub, channel, options, req, deadline, "undo of the acquire");
}

bool UndoConfirmed(const absl::StatusOr<ReleaseOutcome>& undo) {
  // The contract never answers an undo with LOCK_NOT_HELD; a server that did
  // (one older than acquire_request_id) says the owner holds nothing there.
  return undo.ok() || IsLockLost(undo.status());
}

absl::Status UndoAttempt(Stub& stub, grpc::ChannelInterface* channel, const ClientOptions& options,
                         const std::vector<AttemptHold>& holds, absl::string_view owner,
                         absl::string_view request_id, SteadyTime deadline) {
  absl::Status first;
  for (const AttemptHold& h : holds) {
    absl::StatusOr<ReleaseOutcome> undo = UndoAcquire(stub, channel, options, h.ns, h.name, owner,
                                                      request_id, deadline, h.fencing_token);
    if (!UndoConfirmed(undo) && first.ok()) first = undo.status();
  }
  return first;
}

grpc::Status AcquireWithUndo(Stub& stub, grpc::ChannelInterface* channel,
                             const ClientOptions& options, SteadyTime deadline,
                             std::string* request_id, const std::vector<AttemptHold>& holds,
                             absl::string_view owner, const CancellationToken& cancel,
                             absl::FunctionRef<grpc::Status(grpc::ClientContext*)> attempt,
                             std::string* unresolved) {
  unresolved->clear();
  absl::Duration backoff = std::max(options.initial_backoff, absl::Milliseconds(1));
  while (true) {
    grpc::ClientContext ctx;
    SetDeadline(&ctx, deadline);
    grpc::Status status = attempt(&ctx);
    if (!OutcomeUnknown(status)) return status;
    *unresolved = *request_id;
    if (status.error_code() != grpc::StatusCode::UNAVAILABLE) return status;
    const SteadyTime resume = SteadyClock::now() + ToSteady(Jittered(backoff));
    if (resume >= deadline) return status;
    if (UndoAttempt(stub, channel, options, holds, owner, *unresolved,
                    std::min(SteadyClock::now() + ToSteady(UndoTimeout(options)), deadline))
            .ok()) {
      unresolved->clear();
      *request_id = RandomHex(16);
    }
    if (SteadyClock::now() >= deadline) return status;
    PauseWatchingChannel(channel, resume, &cancel);
    backoff = NextBackoff(options, backoff);
  }
}

absl::Status FailAcquire(Stub& stub, grpc::ChannelInterface* channel, const ClientOptions& options,
                         const std::vector<AttemptHold>& holds, absl::string_view owner,
                         const std::string& unresolved, absl::Status s) {
  if (unresolved.empty()) return s;
  absl::Status undo = UndoAttempt(stub, channel, options, holds, owner, unresolved,
                                  SteadyClock::now() + ToSteady(UndoTimeout(options)));
  if (undo.ok()) return s;
  absl::Status out(
      s.code(),
      absl::StrCat(s.message(), "; the undo of this acquire (owner \"", owner,
                   "\", acquire request id ", unresolved, ") was not confirmed: ", undo.message(),
                   "; a hold it may have left ends with its lease unless undone"));
  s.ForEachPayload(
      [&](absl::string_view url, const absl::Cord& value) { out.SetPayload(url, value); });
  out.SetPayload(kUnconfirmedAcquirePayload, absl::Cord(unresolved));
  return out;
}

absl::Status NotAcquiredError(absl::string_view what, absl::Duration wait,
                              const v1::LockInfo* current) {
  std::string holder;
  if (current != nullptr && current->held()) {
    // Several locks: say which one was held.
    const std::string lock = DescribeLock(current->namespace_(), current->name());
    holder = absl::StrCat("; ", what == lock ? "" : lock + " ", "held by owner \"",
                          current->owner(), "\" (fencing token ", current->fencing_token(), ")");
  }
  absl::Status s = absl::DeadlineExceededError(absl::StrCat(
      "lockd acquire of ", what, ": not acquired",
      wait > absl::ZeroDuration() ? absl::StrCat(" within ", absl::FormatDuration(wait))
                                  : std::string(" (no wait)"),
      holder));
  if (current != nullptr) {
    s.SetPayload(kHolderPayload, absl::Cord(current->SerializeAsString()));
  }
  return s;
}

}  // namespace lockd::client_internal
