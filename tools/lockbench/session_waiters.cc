#include "tools/lockbench/session_waiters.h"

#include <algorithm>
#include <deque>
#include <optional>
#include <utility>

#include "absl/strings/str_cat.h"
#include "grpcpp/client_context.h"
#include "grpcpp/support/client_callback.h"
#include "tools/lockbench/session.h"

namespace lockd::bench {

// Waiter k of a stream acquires as op k+1 and releases as op kRelease|(k+1).
constexpr uint64_t kRelease = uint64_t{1} << 40;

// One stream and its waiters. Writes go out one at a time from `queue_`.
// Thread-safe: gRPC runs its reactions on its threads; state under mu_.
class WaiterStream final : public grpc::ClientBidiReactor<v1::SessionRequest, v1::SessionResponse> {
 public:
  WaiterStream(SessionWaiters* parent, int first, int count)
      : parent_(parent), first_(first), count_(count), remaining_(count) {}

  void Begin(v1::LockService::Stub* stub, const std::string& owner) {
    const SessionWaiters::Options& o = parent_->options_;
    stub->async()->Session(&ctx_, this);
    v1::SessionRequest open;
    SetOpen(o.ns, owner, o.lease, &open);
    Enqueue(std::move(open));
    for (int k = 0; k < count_; ++k) {
      v1::SessionRequest a;
      SetAcquire(static_cast<uint64_t>(k) + 1, LockOf(k), o.wait, &a);
      Enqueue(std::move(a));
    }
    StartRead(&resp_);
    StartCall();
  }

  void Cancel() { ctx_.TryCancel(); }

  void OnWriteDone(bool ok) override {
    const v1::SessionRequest* next = nullptr;
    bool close = false;
    {
      absl::MutexLock l(&mu_);
      queue_.pop_front();
      if (ok && !queue_.empty()) {
        next = &queue_.front();
      } else {
        writing_ = false;
        close = ok && close_wanted_ && !closed_;
        closed_ = closed_ || close;
      }
    }
    if (next != nullptr) StartWrite(next);
    if (close) StartWritesDone();
  }

  void OnReadDone(bool ok) override {
    if (!ok) return;  // OnDone follows
    if (resp_.has_result()) OnResult(resp_.result());
    StartRead(&resp_);
  }

  void OnDone(const grpc::Status& s) override {
    int left = 0;
    {
      absl::MutexLock l(&mu_);
      left = remaining_;
      remaining_ = 0;
    }
    absl::Status why = StreamStatus(s);
    if (why.ok()) why = absl::UnavailableError("Session: ended with waiters outstanding");
    for (int i = 0; i < left; ++i) parent_->callbacks_.finished(why);
    parent_->StreamDone();
  }

 private:
  const std::string& LockOf(int k) const {
    const std::vector<std::string>& locks = parent_->options_.locks;
    return locks[static_cast<size_t>(first_ + k) % locks.size()];
  }

  void OnResult(const v1::SessionResult& r) {
    const bool release = (r.op_id() & kRelease) != 0;
    const int k = static_cast<int>((r.op_id() & (kRelease - 1)) - 1);
    absl::Status status;
    if (r.status().code() != 0) {
      status = absl::Status(
          static_cast<absl::StatusCode>(r.status().code()),
          absl::StrCat(release ? "Session Release: " : "Session Acquire: ", r.status().message()));
    }
    if (!release && status.ok() && r.acquire().acquired()) {
      parent_->callbacks_.granted();
      v1::SessionRequest rel;
      SetRelease(kRelease | (static_cast<uint64_t>(k) + 1), LockOf(k), &rel);
      Enqueue(std::move(rel));
      return;
    }
    if (!release && status.ok()) status = absl::DeadlineExceededError("waiter not granted");
    parent_->callbacks_.finished(status);
    bool last = false;
    {
      absl::MutexLock l(&mu_);
      last = --remaining_ == 0;
      close_wanted_ = close_wanted_ || last;
    }
    if (last) Enqueue(std::nullopt);
  }

  // Queues `req` (nullopt: the half-close, once the queue is empty) and
  // starts writing if no write is outstanding.
  void Enqueue(std::optional<v1::SessionRequest> req) {
    const v1::SessionRequest* next = nullptr;
    bool close = false;
    {
      absl::MutexLock l(&mu_);
      if (req.has_value()) queue_.push_back(*std::move(req));
      if (writing_) return;
      if (!queue_.empty()) {
        writing_ = true;
        next = &queue_.front();
      } else if (close_wanted_ && !closed_) {
        closed_ = close = true;
      }
    }
    if (next != nullptr) StartWrite(next);
    if (close) StartWritesDone();
  }

  SessionWaiters* const parent_;
  const int first_;  // global index of waiter 0 of this stream
  const int count_;  // waiters on this stream
  grpc::ClientContext ctx_;
  v1::SessionResponse resp_;  // one Read outstanding at a time
  absl::Mutex mu_;
  std::deque<v1::SessionRequest> queue_ ABSL_GUARDED_BY(mu_);  // front: being written
  bool writing_ ABSL_GUARDED_BY(mu_) = false;
  bool close_wanted_ ABSL_GUARDED_BY(mu_) = false;
  bool closed_ ABSL_GUARDED_BY(mu_) = false;
  int remaining_ ABSL_GUARDED_BY(mu_);  // waiters not finished
};

SessionWaiters::SessionWaiters(Options options, Callbacks callbacks)
    : options_(std::move(options)), callbacks_(std::move(callbacks)) {}

SessionWaiters::~SessionWaiters() {
  Cancel();
  absl::MutexLock l(&mu_);
  mu_.Await(absl::Condition(this, &SessionWaiters::AllStreamsDone));
}

void SessionWaiters::Start(const std::vector<v1::LockService::Stub*>& stubs,
                           const std::function<std::string(int)>& owner) {
  const int per = std::max(1, options_.per_session);
  for (int first = 0, s = 0; first < options_.waiters; first += per, ++s) {
    streams_.push_back(
        std::make_unique<WaiterStream>(this, first, std::min(per, options_.waiters - first)));
  }
  for (size_t s = 0; s < streams_.size(); ++s) {
    streams_[s]->Begin(stubs[s % stubs.size()], owner(static_cast<int>(s)));
  }
}

void SessionWaiters::Cancel() {
  for (auto& s : streams_) s->Cancel();
}

void SessionWaiters::StreamDone() {
  absl::MutexLock l(&mu_);
  ++streams_done_;
}

}  // namespace lockd::bench
