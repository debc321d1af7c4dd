#include "tools/lockbench/session_holders.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include "grpcpp/client_context.h"
#include "grpcpp/support/client_callback.h"
#include "tools/lockbench/session.h"
#include "tools/lockbench/stats.h"

namespace lockd::bench {

// The acquire's op id (a stream sends no other op).
constexpr uint64_t kAcquireOp = 1;

// One stream: writes `open`, then the acquire, then (once Close() asks) the
// half-close; reads until the stream ends.
// Thread-safe: gRPC runs its reactions on its threads; state under mu_.
class HolderStream final : public grpc::ClientBidiReactor<v1::SessionRequest, v1::SessionResponse> {
 public:
  HolderStream(SessionHolders* parent, int index) : parent_(parent), index_(index) {}

  void Begin(v1::LockService::Stub* stub, const std::string& owner, const std::string& lock) {
    const SessionHolders::Options& o = parent_->options_;
    SetOpen(o.ns, owner, o.lease, &open_);
    SetAcquire(kAcquireOp, lock, absl::ZeroDuration(), &acquire_);
    started_ns_ = NowNanos();
    stub->async()->Session(&ctx_, this);
    StartWrite(&open_);
    StartRead(&resp_);
    StartCall();
  }

  void Cancel() { ctx_.TryCancel(); }

  // Half-closes once the writes are done (at once if they are).
  void Close() {
    bool close = false;
    {
      absl::MutexLock l(&mu_);
      close_wanted_ = true;
      close = writes_left_ == 0 && !closed_;
      closed_ = closed_ || close;
    }
    if (close) StartWritesDone();
  }

  void OnWriteDone(bool ok) override {
    bool acquire = false, close = false;
    {
      absl::MutexLock l(&mu_);
      --writes_left_;
      if (!ok) return;  // the stream is broken: OnDone follows
      acquire = writes_left_ == 1;
      close = writes_left_ == 0 && close_wanted_ && !closed_;
      closed_ = closed_ || close;
    }
    if (acquire) StartWrite(&acquire_);
    if (close) StartWritesDone();
  }

  void OnReadDone(bool ok) override {
    if (!ok) return;  // OnDone follows
    if (resp_.has_result() && resp_.result().op_id() == kAcquireOp) {
      const v1::SessionResult& r = resp_.result();
      absl::Status s;
      if (r.status().code() != 0) {
        s = absl::Status(static_cast<absl::StatusCode>(r.status().code()),
                         absl::StrCat("Session Acquire: ", r.status().message()));
      } else if (!r.acquire().acquired()) {
        s = absl::AlreadyExistsError("Session Acquire: the lock is held by another owner");
      }
      parent_->callbacks_.acquired(index_, s, NowNanos() - started_ns_);
    } else if (resp_.has_lost()) {
      parent_->callbacks_.lost(index_, resp_.lost());
    }
    StartRead(&resp_);
  }

  void OnDone(const grpc::Status& s) override {
    parent_->callbacks_.ended(index_, StreamStatus(s));
    parent_->StreamDone();
  }

 private:
  SessionHolders* const parent_;
  const int index_;
  grpc::ClientContext ctx_;
  v1::SessionRequest open_;
  v1::SessionRequest acquire_;
  v1::SessionResponse resp_;  // one Read outstanding at a time
  int64_t started_ns_ = 0;
  absl::Mutex mu_;
  int writes_left_ ABSL_GUARDED_BY(mu_) = 2;  // open, acquire
  bool close_wanted_ ABSL_GUARDED_BY(mu_) = false;
  bool closed_ ABSL_GUARDED_BY(mu_) = false;
};

SessionHolders::SessionHolders(Options options, Callbacks callbacks)
    : options_(std::move(options)), callbacks_(std::move(callbacks)) {}

SessionHolders::~SessionHolders() {
  Cancel();
  absl::MutexLock l(&mu_);
  mu_.Await(absl::Condition(this, &SessionHolders::AllStreamsDone));
}

void SessionHolders::Start(const std::vector<v1::LockService::Stub*>& stubs,
                           const std::function<std::string(int)>& owner,
                           const std::function<std::string(int)>& lock) {
  for (int s = 0; s < options_.sessions; ++s) {
    streams_.push_back(std::make_unique<HolderStream>(this, s));
  }
  for (size_t s = 0; s < streams_.size(); ++s) {
    const int i = static_cast<int>(s);
    streams_[s]->Begin(stubs[s % stubs.size()], owner(i), lock(i));
  }
}

void SessionHolders::Close() {
  for (auto& s : streams_) s->Close();
}

void SessionHolders::Cancel() {
  for (auto& s : streams_) s->Cancel();
}

bool SessionHolders::AwaitEnded(absl::Duration timeout) {
  absl::MutexLock l(&mu_);
  return mu_.AwaitWithTimeout(absl::Condition(this, &SessionHolders::AllStreamsDone), timeout);
}

void SessionHolders::StreamDone() {
  absl::MutexLock l(&mu_);
  ++streams_done_;
}

}  // namespace lockd::bench
