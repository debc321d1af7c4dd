#include "service/acquire_all.h"

#include <algorithm>
#include <atomic>
#include <numeric>
#include <optional>
#include <utility>

#include "absl/container/flat_hash_set.h"
#include "absl/strings/string_view.h"
#include "absl/time/clock.h"
#include "service/status_mapping.h"

namespace lockd {
namespace {

// One AcquireAll in progress. Exactly one callback of the chain owns it at a
// time (Next hands it to the lock's Acquire, whose answer hands it back).
class Run {
 public:
  Run(Backend* backend, AcquireAllParams params, std::shared_ptr<CancelSignal> cancel,
      AcquireAllDeliver deliver, AcquireAllDone done)
      : backend_(backend),
        params_(std::move(params)),
        cancel_(std::move(cancel)),
        deliver_(std::move(deliver)),
        done_(std::move(done)),
        wait_end_(absl::Now() + params_.wait),
        order_(params_.locks.size()),
        held_(params_.locks.size()) {
    if (params_.request_id.empty()) params_.request_id = NewRequestId();
    std::iota(order_.begin(), order_.end(), 0);
    std::sort(order_.begin(), order_.end(),
              [&](size_t a, size_t b) { return params_.locks[a].key < params_.locks[b].key; });
  }

  // Takes the next lock in order, or answers once every lock is held.
  static void Next(std::unique_ptr<Run> run) {
    if (run->next_ == run->order_.size()) {
      Held(std::move(run));
      return;
    }
    if (run->cancel_ != nullptr && run->cancel_->cancelled()) {
      Fail(std::move(run), grpc::Status(grpc::StatusCode::CANCELLED, "acquire_all cancelled"));
      return;
    }
    const size_t i = run->order_[run->next_];
    const AcquireAllParams& all = run->params_;
    AcquireParams p;
    p.key = all.locks[i].key;
    p.owner = all.owner;
    p.ttl = all.ttl;
    p.wait = std::max(absl::ZeroDuration(), run->wait_end_ - absl::Now());
    p.request_id = all.request_id;
    p.mode = all.locks[i].kind.mode;
    p.limit = all.locks[i].kind.limit;
    p.permits = all.locks[i].kind.permits;
    Backend* backend = run->backend_;
    std::shared_ptr<CancelSignal> cancel = run->cancel_;
    AcquireCall::Start(backend, std::move(p), std::move(cancel),
                       [run = std::move(run), i](const AcquireCall& call,
                                                 absl::StatusOr<AcquireResult> r) mutable {
                         Answered(std::move(run), i, call, std::move(r));
                       });
  }

 private:
  static void Answered(std::unique_ptr<Run> run, size_t i, const AcquireCall& call,
                       absl::StatusOr<AcquireResult> r) {
    if (!r.ok()) {
      Fail(std::move(run), BackendToGrpcStatus(r.status()));
      return;
    }
    if (!r->acquired) {
      v1::AcquireAllResponse resp;
      resp.set_acquired(false);
      resp.set_owner(run->params_.owner);
      ToLockInfo(r->current, run->backend_->name(), resp.mutable_blocked_on());
      GiveBackThenAnswer(std::move(run), grpc::Status::OK, std::move(resp));
      return;
    }
    run->held_[i] = AcquiredLock{call, *std::move(r)};
    ++run->next_;
    Next(std::move(run));
  }

  // Every lock is held: delivered, or all given back.
  static void Held(std::unique_ptr<Run> run) {
    std::vector<AcquiredLock> held;
    held.reserve(run->held_.size());
    for (std::optional<AcquiredLock>& h : run->held_) held.push_back(*std::move(h));
    run->held_.clear();
    const AcquireCall::Delivery delivery = std::move(run->deliver_)(held);
    if (delivery != AcquireCall::Delivery::kDeliver) {
      run->held_.assign(held.begin(), held.end());
      Fail(std::move(run),
           delivery == AcquireCall::Delivery::kCancelled
               ? grpc::Status(grpc::StatusCode::CANCELLED,
                              "acquire_all cancelled; every grant was released")
               : grpc::Status(grpc::StatusCode::DEADLINE_EXCEEDED,
                              "acquire_all granted too close to the call's deadline for the "
                              "reply to arrive in time; every grant was released"));
      return;
    }
    v1::AcquireAllResponse resp;
    resp.set_acquired(true);
    resp.set_owner(run->params_.owner);
    for (const AcquiredLock& h : held) {
      // Answer fills a delivered grant's response; it cannot fail.
      (void)h.call.Answer(h.grant, AcquireCall::Delivery::kDeliver, resp.add_locks());
    }
    std::move(run->done_)(grpc::Status::OK, std::move(resp), std::move(held));
  }

  static void Fail(std::unique_ptr<Run> run, grpc::Status status) {
    v1::AcquireAllResponse resp;
    resp.set_owner(run->params_.owner);
    GiveBackThenAnswer(std::move(run), std::move(status), std::move(resp));
  }

  static void GiveBackThenAnswer(std::unique_ptr<Run> run, grpc::Status status,
                                 v1::AcquireAllResponse resp) {
    std::vector<AcquiredLock> held;
    for (std::optional<AcquiredLock>& h : run->held_) {
      if (h.has_value()) held.push_back(*std::move(h));
    }
    AcquireAllDone done = std::move(run->done_);
    run.reset();
    GiveBackAll(held, [done = std::move(done), status = std::move(status),
                       resp = std::move(resp)]() mutable {
      std::move(done)(std::move(status), std::move(resp), {});
    });
  }

  Backend* const backend_;
  AcquireAllParams params_;
  const std::shared_ptr<CancelSignal> cancel_;
  AcquireAllDeliver deliver_;
  AcquireAllDone done_;
  const absl::Time wait_end_;
  std::vector<size_t> order_;                      // request indices, by key
  size_t next_ = 0;                                // position in order_ of the lock to take next
  std::vector<std::optional<AcquiredLock>> held_;  // by request index
};

}  // namespace

void StartAcquireAll(Backend* backend, AcquireAllParams params,
                     std::shared_ptr<CancelSignal> cancel, AcquireAllDeliver deliver,
                     AcquireAllDone done) {
  Run::Next(std::make_unique<Run>(backend, std::move(params), std::move(cancel), std::move(deliver),
                                  std::move(done)));
}

absl::Status AuthorizeNamespaces(const AcquireAllParams& params,
                                 absl::FunctionRef<absl::Status(const LockKey& key)> authorize) {
  absl::flat_hash_set<absl::string_view> done;
  for (const AcquireAllParams::Lock& lock : params.locks) {
    if (!done.insert(lock.key.ns).second) continue;
    if (absl::Status s = authorize(lock.key); !s.ok()) return s;
  }
  return absl::OkStatus();
}

void GiveBackAll(const std::vector<AcquiredLock>& held, absl::AnyInvocable<void() &&> then) {
  if (held.empty()) {
    if (then) std::move(then)();
    return;
  }
  struct Pending {
    std::atomic<size_t> left;
    absl::AnyInvocable<void() &&> then;
  };
  auto pending = std::make_shared<Pending>();
  pending->left.store(held.size());
  pending->then = std::move(then);
  for (const AcquiredLock& h : held) {
    h.call.GiveBack(h.grant.fencing_token, [pending] {
      if (pending->left.fetch_sub(1) == 1 && pending->then) std::move(pending->then)();
    });
  }
}

}  // namespace lockd
