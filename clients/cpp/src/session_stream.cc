#include "clients/cpp/src/session_stream.h"

#include <algorithm>
#include <optional>
#include <utility>

#include "absl/strings/str_cat.h"
#include "clients/cpp/src/batching_writer.h"
#include "clients/cpp/src/cancellation.h"
#include "clients/cpp/src/errors.h"
#include "google/rpc/status.pb.h"
#include "protos/proto_duration.h"

namespace lockd::client_internal {
namespace {

// Validity of a hold while its stream is up: the server renews it.
constexpr SteadyTime kKeptByServer = SteadyTime::max();

grpc::Status ToGrpc(const google::rpc::Status& s) {
  if (s.code() == 0) return grpc::Status::OK;
  return grpc::Status(static_cast<grpc::StatusCode>(s.code()), s.message(), s.SerializeAsString());
}

bool SameHold(const LeaseState& lease, absl::string_view ns, absl::string_view name,
              uint64_t token) {
  return lease.ns == ns && lease.name == name && lease.fencing_token == token;
}

}  // namespace

struct SessionStream::Op {
  uint64_t id = 0;
  v1::SessionRequest req;  // with op_id set
  // Acquires: the lease each lock's grant becomes (one per lock of an
  // acquire_all).
  std::vector<LeaseState::Params> grants;
  bool sent = false;  // written (or being written) on an open stream
  bool cancelled = false;
  bool done = false;
  // Wait()'s, on mu_: notified when the op is done and on a cancel, so that
  // a result wakes its own caller only, not every caller waiting.
  std::condition_variable cv;
  // A sent acquire its caller stopped waiting for: a grant that still comes
  // is given back by HandleResult (the caller's own undo may have reached
  // the server before the grant).
  bool abandoned = false;
  // When done: the server's answer, or else `error` (outcome unknown iff sent).
  std::optional<v1::SessionResult> result;
  std::vector<std::shared_ptr<LeaseState>> leases;  // a grant's, already in holds_
  grpc::Status error;
};

struct SessionStream::Stream {
  grpc::ClientContext ctx;
  // Every request goes out through `writer`, which batches what queues
  // while a write is in flight and calls Write one write at a time.
  BatchingWriter writer{[this](const v1::SessionRequest& msg) { return Write(msg); }};
  // write_mu keeps writes off a stream being finished.
  std::mutex write_mu;
  std::unique_ptr<grpc::ClientReaderWriterInterface<v1::SessionRequest, v1::SessionResponse>> rw;
  bool closed = false;  // under write_mu

  bool Write(const v1::SessionRequest& msg) {
    std::lock_guard<std::mutex> l(write_mu);
    return !closed && rw != nullptr && rw->Write(msg);
  }
  void Close(bool half_close) {
    std::lock_guard<std::mutex> l(write_mu);
    if (closed) return;
    closed = true;
    if (half_close && rw != nullptr) rw->WritesDone();
  }
};

SessionStream::SessionStream(std::shared_ptr<Stub> stub,
                             std::shared_ptr<grpc::ChannelInterface> channel, ClientOptions options)
    : stub_(std::move(stub)), channel_(std::move(channel)), options_(std::move(options)) {}

SessionStream::~SessionStream() {
  // Only reachable joinable if Shutdown() was skipped; never terminate().
  if (thread_.joinable()) thread_.detach();
}

bool SessionStream::Accepts(absl::Duration ttl) {
  std::lock_guard<std::mutex> l(mu_);
  auto safe = [&](absl::Duration lease) {
    return SessionSafe(lease, Drift(lease, options_), HangBound(options_));
  };
  if (unsupported_ || !safe(ttl)) return false;
  if (!ttl_fixed_) {
    ttl_ = options_.session_ttl > absl::ZeroDuration() ? options_.session_ttl : ttl;
    ttl_fixed_ = true;
  }
  if (!safe(ttl_) || !safe(granted_ttl_)) return false;
  return ttl == absl::ZeroDuration() || ttl == ttl_ ||
         (granted_ttl_ > absl::ZeroDuration() && ttl == granted_ttl_);
}

bool SessionStream::OnSessionThread() const {
  std::lock_guard<std::mutex> l(mu_);
  return started_ && std::this_thread::get_id() == thread_id_;
}

std::shared_ptr<SessionStream::Op> SessionStream::Submit(v1::SessionRequest req,
                                                         std::vector<LeaseState::Params> grants) {
  auto op = std::make_shared<Op>();
  std::shared_ptr<Stream> s;
  uint64_t ticket = 0;  // for s's writer
  {
    std::lock_guard<std::mutex> l(mu_);
    op->id = next_op_id_++;
    if (req.has_acquire()) {
      req.mutable_acquire()->set_op_id(op->id);
    } else if (req.has_acquire_all()) {
      req.mutable_acquire_all()->set_op_id(op->id);
    } else {
      req.mutable_release()->set_op_id(op->id);
    }
    op->req = std::move(req);
    op->grants = std::move(grants);
    if (stop_ || unsupported_) {
      op->done = true;
      op->error = stop_ ? grpc::Status(grpc::StatusCode::UNAVAILABLE, "the client is shutting down")
                        : grpc::Status(grpc::StatusCode::UNIMPLEMENTED, "no Session stream");
      return op;
    }
    ops_[op->id] = op;
    if (!started_) {
      started_ = true;
      // The thread owns a reference so that a detached thread (see
      // Shutdown) never outlives this object.
      thread_ = std::thread([self = shared_from_this()] { self->Run(); });
      thread_id_ = thread_.get_id();
    }
    if (open_) {
      // Queued under mu_, so that ops leave in op_id order.
      s = stream_;
      op->sent = true;
      ticket = s->writer.Queue(op->req);
    }
  }
  if (s == nullptr) {
    // Only Run waits for a new op (to open a stream); with one open, waking
    // every waiting caller would be wasted.
    cv_.notify_all();
  } else {
    s->writer.Flush(ticket);  // a failed write shows as the stream's end
  }
  return op;
}

bool SessionStream::Wait(Op& op, SteadyTime until, const CancellationToken* cancel) {
  std::unique_lock<std::mutex> l(mu_);
  op.cv.wait_until(l, until, [&] { return op.done || (cancel != nullptr && cancel->cancelled()); });
  return op.done;
}

void SessionStream::Cancel(const std::shared_ptr<Op>& op) {
  v1::SessionRequest cancel;
  cancel.mutable_cancel()->set_op_id(op->id);
  std::shared_ptr<Stream> s;
  uint64_t ticket = 0;
  {
    std::lock_guard<std::mutex> l(mu_);
    if (op->done) return;
    op->cancelled = true;
    if (!op->sent) {
      ops_.erase(op->id);
      op->done = true;
      op->error = grpc::Status(grpc::StatusCode::DEADLINE_EXCEEDED, "never sent");
      return;
    }
    if (open_) {
      s = stream_;
      ticket = s->writer.Queue(std::move(cancel));
    }
  }
  if (s != nullptr) s->writer.Flush(ticket);
}

void SessionStream::Abandon(Op& op) {
  std::lock_guard<std::mutex> l(mu_);
  if (op.done) return;
  if (op.sent && (op.req.has_acquire() || op.req.has_acquire_all())) {
    op.abandoned = true;
  } else {
    ops_.erase(op.id);
  }
}

void SessionStream::Forget(const LeaseState* lease) {
  std::shared_ptr<LeaseState> dropped;  // released after the lock
  std::lock_guard<std::mutex> l(mu_);
  auto it = std::find_if(holds_.begin(), holds_.end(),
                         [&](const std::shared_ptr<LeaseState>& h) { return h.get() == lease; });
  if (it == holds_.end()) return;
  dropped = std::move(*it);
  holds_.erase(it);
}

absl::StatusOr<std::vector<std::shared_ptr<LeaseState>>> SessionStream::Acquire(
    const AcquireCall& call) {
  const std::string& owner = options_.owner;
  const std::string what = DescribeCall(call);
  v1::SessionRequest proto;
  // The call's request, whichever it is (the other is null).
  v1::AcquireRequest* one = nullptr;
  v1::AcquireAllRequest* all = nullptr;
  if (call.all) {
    all = proto.mutable_acquire_all()->mutable_request();
    FillRequest(call, all);
  } else {
    one = proto.mutable_acquire()->mutable_request();
    FillRequest(call, one);
  }
  std::string* request_id = call.all ? all->mutable_request_id() : one->mutable_request_id();
  *request_id = RandomHex(16);
  std::vector<LeaseState::Params> grants;
  for (const LockTarget& lock : call.locks) {
    grants.push_back(LeaseParams(lock, owner));
    grants.back().on_lost = call.on_lost;
  }
  // `granted`: the attempt's grant, when one was seen (its undo then gives
  // back only those holds).
  auto fail = [&](absl::Status s, const std::string& unresolved,
                  const std::vector<v1::AcquireResponse>& granted = {}) {
    return FailAcquire(*stub_, channel_.get(), options_, AttemptHolds(call, granted), owner,
                       unresolved, std::move(s));
  };
  auto not_in_time = [&] {
    if (call.cancel.cancelled()) return CancelledError(what);
    return absl::DeadlineExceededError(
        absl::StrCat("lockd acquire of ", what, ": not acquired within the call's timeout"));
  };
  std::string unresolved;  // an attempt that may have left a hold
  // Wakes Wait() on a cancel (cancellation.h's lock order: the token's
  // mutex, then mu_).
  CancelScope wake(call.cancel, [this] {
    std::lock_guard<std::mutex> l(mu_);
    for (const auto& [id, op] : ops_) op->cv.notify_all();
  });
  while (true) {
    if (call.cancel.cancelled()) return fail(CancelledError(what), unresolved);
    SteadyTime now = SteadyClock::now();
    if (call.wait_end > now) {
      SetProtoDuration(FromSteady(call.wait_end - now),
                       call.all ? all->mutable_wait_timeout() : one->mutable_wait_timeout());
    } else if (call.all) {
      all->clear_wait_timeout();
    } else {
      one->clear_wait_timeout();
    }
    std::shared_ptr<Op> op = Submit(proto, grants);
    if (!Wait(*op, call.deadline, &call.cancel)) {
      Cancel(op);
      if (!Wait(*op, SteadyClock::now() + ToSteady(UndoTimeout(options_)))) Abandon(*op);
    }
    if (op->result.has_value()) {
      const v1::SessionResult& r = *op->result;
      if (r.status().code() != 0) {
        grpc::Status gs = ToGrpc(r.status());
        if (gs.error_code() == grpc::StatusCode::CANCELLED && op->cancelled) {
          return fail(not_in_time(), unresolved);
        }
        return fail(FromGrpcOn("acquire", what, gs), unresolved);
      }
      absl::StatusOr<std::vector<v1::AcquireResponse>> granted =
          GrantedLocks(call, r.has_acquire() ? &r.acquire() : nullptr,
                       r.has_acquire() ? nullptr : &r.acquire_all());
      if (!granted.ok()) return fail(granted.status(), unresolved);
      if (op->cancelled) {  // granted as the cancel went out: give it back
        for (const auto& lease : op->leases) {
          Forget(lease.get());
          lease->End(SteadyClock::now());
        }
        return fail(not_in_time(), *request_id, *granted);
      }
      return op->leases;
    }
    if (!op->done) {  // no answer even to the cancel
      return fail(absl::UnavailableError(
                      absl::StrCat("lockd acquire of ", what, ": no answer on the session stream")),
                  *request_id);
    }
    if (!op->sent) {
      if (op->error.error_code() == grpc::StatusCode::UNIMPLEMENTED) {
        return absl::UnimplementedError("lockd has no Session stream");
      }
      if (!op->cancelled) return fail(FromGrpcOn("acquire (session open)", what, op->error), "");
      std::string why;
      {
        std::lock_guard<std::mutex> l(mu_);
        why = last_error_;
      }
      return fail(absl::UnavailableError(absl::StrCat("lockd acquire of ", what,
                                                      ": no session stream to lockd in time",
                                                      why.empty() ? "" : ": ", why)),
                  unresolved);
    }
    // Sent, and the stream broke before the answer: outcome unknown.
    unresolved = *request_id;
    if (op->cancelled || SteadyClock::now() >= call.deadline) {
      return fail(absl::UnavailableError(
                      absl::StrCat("lockd acquire of ", what, ": ", op->error.error_message())),
                  unresolved);
    }
    if (UndoAttempt(*stub_, channel_.get(), options_, AttemptHolds(call), owner, unresolved,
                    std::min(SteadyClock::now() + ToSteady(UndoTimeout(options_)), call.deadline))
            .ok()) {
      unresolved.clear();
      *request_id = RandomHex(16);
    }
  }
}

absl::StatusOr<ReleaseOutcome> SessionStream::Release(const LeaseState& lease,
                                                      SteadyTime deadline) {
  Forget(&lease);
  v1::SessionRequest proto;
  v1::ReleaseRequest* req = proto.mutable_release()->mutable_request();
  req->set_namespace_(lease.ns);
  req->set_name(lease.name);
  req->set_request_id(RandomHex(16));
  req->set_fencing_token(lease.fencing_token);  // never a later hold of the owner
  bool open;
  {
    std::lock_guard<std::mutex> l(mu_);
    open = open_ && !stop_;
  }
  // The hold is the owner's: without a stream (or from the session thread,
  // which must keep reading) the unary Release gives it up as well.
  if (open && !OnSessionThread()) {
    std::shared_ptr<Op> op = Submit(proto, {});
    if (!Wait(*op, deadline)) {
      Abandon(*op);
      if (op->sent) {
        return absl::DeadlineExceededError(
            absl::StrCat("lockd release of ", DescribeLock(lease.ns, lease.name),
                         ": no answer on the session stream in time"));
      }
    }
    if (op->result.has_value()) {
      const v1::SessionResult& r = *op->result;
      if (r.status().code() != 0)
        return FromGrpc("release", lease.ns, lease.name, ToGrpc(r.status()));
      return ReleaseOutcome{r.release().released(), r.release().hold_count()};
    }
    // The stream broke: repeat with the same request_id, which the server
    // answers with the first result if it had been applied.
  }
  return ReleaseHold(*stub_, channel_.get(), options_, lease.ns, lease.name, lease.owner,
                     lease.fencing_token, deadline, req->request_id());
}

void SessionStream::Shutdown() {
  std::shared_ptr<Stream> s;
  {
    std::lock_guard<std::mutex> l(mu_);
    stop_ = true;
    if (!started_) return;
    s = stream_;
  }
  cv_.notify_all();
  // Half-close: the server releases what is left and ends the stream OK.
  if (s != nullptr) s->Close(/*half_close=*/true);
  if (!thread_.joinable()) return;
  if (thread_.get_id() == std::this_thread::get_id()) {
    thread_.detach();
    return;
  }
  {
    std::unique_lock<std::mutex> l(mu_);
    cv_.wait_until(l, SteadyClock::now() + ToSteady(options_.release_timeout),
                   [&] { return exited_; });
    s = exited_ ? nullptr : stream_;
  }
  if (s != nullptr) s->ctx.TryCancel();
  thread_.join();
}

void SessionStream::Run() {
  const absl::Duration initial = std::max(options_.initial_backoff, absl::Milliseconds(1));
  absl::Duration backoff = initial;
  std::unique_lock<std::mutex> l(mu_);
  while (!stop_) {
    if (ops_.empty() && holds_.empty()) {
      cv_.wait(l);
      continue;
    }
    l.unlock();
    const bool opened = RunStream();
    l.lock();
    if (opened) backoff = initial;
    if (stop_ || unsupported_ || (ops_.empty() && holds_.empty())) continue;
    Backoff(l, SteadyClock::now() + ToSteady(Jittered(backoff)));
    backoff = NextBackoff(options_, backoff);
  }
  exited_ = true;
  cv_.notify_all();
}

void SessionStream::Backoff(std::unique_lock<std::mutex>& l, SteadyTime until) {
  while (!stop_) {
    SteadyTime now = SteadyClock::now();
    SteadyTime wake = std::min(until, now + std::chrono::milliseconds(100));
    std::vector<std::shared_ptr<LeaseState>> expired;
    for (auto it = holds_.begin(); it != holds_.end();) {
      SteadyTime valid_until = (*it)->valid_until();
      if (now >= valid_until) {
        expired.push_back(std::move(*it));
        it = holds_.erase(it);
      } else {
        wake = std::min(wake, valid_until);
        ++it;
      }
    }
    if (!expired.empty()) {
      l.unlock();
      for (const auto& lease : expired) lease->CheckExpiry(SteadyClock::now());
      expired.clear();
      l.lock();
      continue;
    }
    if (now >= until) return;
    if (channel_ != nullptr && channel_->GetState(/*try_to_connect=*/true) != GRPC_CHANNEL_READY) {
      l.unlock();
      PauseWatchingChannel(channel_.get(), wake);
      l.lock();
      if (SteadyClock::now() < wake) cv_.wait_until(l, wake);  // READY early: keep the pause
    } else {
      cv_.wait_until(l, wake);
    }
  }
}

bool SessionStream::RunStream() {
  auto s = std::make_shared<Stream>();
  v1::SessionRequest open;
  v1::SessionOpen* o = open.mutable_open();
  {
    std::lock_guard<std::mutex> l(mu_);
    if (stop_) return false;
    o->set_owner(options_.owner);
    // Opening needs `lock` on open.namespace (lockd's "default" when empty):
    // the client's default namespace is the one its identity may lock.
    o->set_namespace_(options_.default_namespace);
    if (ttl_fixed_ && ttl_ > absl::ZeroDuration()) SetProtoDuration(ttl_, o->mutable_lease_ttl());
    o->set_keep_on_disconnect(options_.keep_on_disconnect);
    for (const auto& h : holds_) {
      if (!h->active() || !h->lost_status().ok()) continue;
      bool listed = false;
      for (const v1::LockRef& r : o->resume()) {
        listed = listed || SameHold(*h, r.namespace_(), r.name(), r.fencing_token());
      }
      if (listed) continue;  // reentrant holds share one entry
      v1::LockRef* r = o->add_resume();
      r->set_namespace_(h->ns);
      r->set_name(h->name);
      r->set_fencing_token(h->fencing_token);
    }
    stream_ = s;
    open_ = false;
  }
  {
    std::lock_guard<std::mutex> l(s->write_mu);
    if (!s->closed) s->rw = stub_->Session(&s->ctx);
  }
  if (s->rw == nullptr) {
    OnStreamEnd(s, grpc::Status(grpc::StatusCode::UNIMPLEMENTED, "the stub has no Session stream"),
                false);
    return false;
  }
  s->writer.Send(std::move(open));
  v1::SessionResponse resp;
  bool opened = false;
  if (s->rw->Read(&resp)) {
    if (resp.has_opened()) {
      opened = true;
      OnOpened(s, resp.opened());
      while (s->rw->Read(&resp)) {
        // A response batch's items are handled one by one, as if each had
        // come alone.
        if (resp.has_batch()) {
          for (const v1::SessionResponse& item : resp.batch().items()) HandleResponse(s, item);
        } else {
          HandleResponse(s, resp);
        }
      }
    } else {
      s->ctx.TryCancel();  // not the protocol
      while (s->rw->Read(&resp)) {
      }
    }
  }
  s->Close(/*half_close=*/false);
  OnStreamEnd(s, s->rw->Finish(), opened);
  return opened;
}

void SessionStream::OnOpened(const std::shared_ptr<Stream>& s, const v1::SessionOpened& opened) {
  std::vector<std::shared_ptr<LeaseState>> not_resumed;
  uint64_t ticket = 0;  // the last op's
  {
    std::lock_guard<std::mutex> l(mu_);
    granted_ttl_ = FromProtoDuration(opened.lease_ttl());
    open_ = true;
    last_error_.clear();
    for (auto it = holds_.begin(); it != holds_.end();) {
      bool resumed = false;
      for (const v1::LockInfo& info : opened.resumed()) {
        resumed = resumed || SameHold(**it, info.namespace_(), info.name(), info.fencing_token());
      }
      if (resumed) {
        (*it)->SetValidUntil(kKeptByServer);
        ++it;
      } else {
        not_resumed.push_back(std::move(*it));
        it = holds_.erase(it);
      }
    }
    // The ops that waited for the stream, in op_id order (ops_ is a hash
    // map), queued under mu_ before any later op: they leave in batches.
    std::vector<Op*> waiting;
    for (auto& [id, op] : ops_) {
      if (!op->sent) waiting.push_back(op.get());
    }
    std::sort(waiting.begin(), waiting.end(),
              [](const Op* a, const Op* b) { return a->id < b->id; });
    for (Op* op : waiting) {
      op->sent = true;
      ticket = std::max(ticket, s->writer.Queue(op->req));
    }
  }
  for (const auto& lease : not_resumed) {
    lease->MarkLost(LockLostError(
        "SESSION_NOT_RESUMED",
        absl::StrCat("lease of ", DescribeLock(lease->ns, lease->name),
                     " lost: after the session stream broke, the new session did not get it "
                     "back (the hold had ended or changed hands)")));
  }
  s->writer.Flush(ticket);
}

void SessionStream::HandleResponse(const std::shared_ptr<Stream>& s,
                                   const v1::SessionResponse& resp) {
  if (resp.has_result()) {
    HandleResult(s, resp.result());
  } else if (resp.has_lost()) {
    HandleLost(resp.lost());
  }
}

void SessionStream::HandleResult(const std::shared_ptr<Stream>& s,
                                 const v1::SessionResult& result) {
  const bool granted = result.status().code() == 0 &&
                       ((result.has_acquire() && result.acquire().acquired()) ||
                        (result.has_acquire_all() && result.acquire_all().acquired()));
  // One response per lock of a grant.
  std::vector<const v1::AcquireResponse*> responses;
  if (granted && result.has_acquire()) responses.push_back(&result.acquire());
  if (granted && result.has_acquire_all()) {
    for (const v1::AcquireResponse& a : result.acquire_all().locks()) responses.push_back(&a);
  }
  std::unique_lock<std::mutex> l(mu_);
  auto it = ops_.find(result.op_id());
  if (it == ops_.end()) return;
  std::shared_ptr<Op> op = std::move(it->second);
  ops_.erase(it);
  if (op->abandoned) {
    if (!granted || responses.size() != op->grants.size()) return;
    // docs/api.md acquire_request_id: gives back exactly this grant (its token),
    // and is a no-op if the caller's undo already did. Its result is ignored.
    const std::string& request_id = op->req.has_acquire()
                                        ? op->req.acquire().request().request_id()
                                        : op->req.acquire_all().request().request_id();
    uint64_t ticket = 0;  // the last undo's
    for (size_t i = 0; i < responses.size(); ++i) {
      v1::SessionRequest undo;
      undo.mutable_release()->set_op_id(next_op_id_++);
      v1::ReleaseRequest* r = undo.mutable_release()->mutable_request();
      r->set_namespace_(op->grants[i].ns);
      r->set_name(op->grants[i].name);
      r->set_acquire_request_id(request_id);
      r->set_fencing_token(responses[i]->fencing_token());
      ticket = std::max(ticket, s->writer.Queue(std::move(undo)));
    }
    l.unlock();
    s->writer.Flush(ticket);
    return;
  }
  if (granted && responses.size() == op->grants.size()) {
    // Registered here, under mu_, so that a stream break right after this
    // result resumes them.
    for (size_t i = 0; i < responses.size(); ++i) {
      const v1::AcquireResponse& a = *responses[i];
      LeaseState::Params p = op->grants[i];
      p.fencing_token = a.fencing_token();
      p.hold_count = a.hold_count();
      p.ttl = a.has_lease_ttl() ? FromProtoDuration(a.lease_ttl()) : granted_ttl_;
      p.drift = Drift(p.ttl, options_);
      p.auto_renew = true;
      p.session = true;
      p.valid_until = kKeptByServer;
      op->leases.push_back(std::make_shared<LeaseState>(std::move(p)));
      holds_.push_back(op->leases.back());
    }
  }
  op->result = result;
  op->done = true;
  // Notified under mu_: measured faster with many waiting callers (64
  // threads on one Client) than after unlocking, when the woken caller
  // contends with this thread for mu_ before its next result.
  op->cv.notify_all();
}

void SessionStream::HandleLost(const v1::LockLost& lost) {
  std::vector<std::shared_ptr<LeaseState>> gone;
  {
    std::lock_guard<std::mutex> l(mu_);
    for (auto it = holds_.begin(); it != holds_.end();) {
      if (SameHold(**it, lost.namespace_(), lost.name(), lost.fencing_token())) {
        gone.push_back(std::move(*it));
        it = holds_.erase(it);
      } else {
        ++it;
      }
    }
  }
  const std::string reason = lost.reason().empty() ? "LOCK_NOT_HELD" : lost.reason();
  for (const auto& lease : gone) {
    lease->MarkLost(LockLostError(
        reason, absl::StrCat("lease of ", DescribeLock(lease->ns, lease->name),
                             " lost: the server reports the hold gone (", reason, ")")));
  }
}

void SessionStream::OnStreamEnd(const std::shared_ptr<Stream>& s, const grpc::Status& status,
                                bool opened) {
  std::vector<std::shared_ptr<LeaseState>> rejected;
  {
    std::lock_guard<std::mutex> l(mu_);
    if (stream_ == s) stream_.reset();
    open_ = false;
    last_error_ = status.ok() ? "the session stream ended" : status.error_message();
    // An open the server refused outright (not a transport failure) fails
    // the operations waiting for it, and the holds it could not resume.
    const bool refused = !opened && !status.ok() && !OutcomeUnknown(status);
    if (refused && status.error_code() == grpc::StatusCode::UNIMPLEMENTED) unsupported_ = true;
    if (refused && status.error_code() == grpc::StatusCode::INVALID_ARGUMENT) {
      ttl_fixed_ = false;  // e.g. open.lease_ttl out of bounds: the next Acquire picks again
      granted_ttl_ = absl::ZeroDuration();
    }
    for (auto it = ops_.begin(); it != ops_.end();) {
      Op& op = *it->second;
      if (op.sent || refused) {
        op.done = true;
        op.cv.notify_all();
        op.error = op.sent ? grpc::Status(grpc::StatusCode::UNAVAILABLE,
                                          absl::StrCat("the session stream broke before the "
                                                       "answer: ",
                                                       last_error_))
                           : status;
        ops_.erase(it++);
      } else {
        ++it;
      }
    }
    if (refused) {
      rejected.swap(holds_);
    } else {
      const SteadyTime noticed = SteadyClock::now();
      const absl::Duration hang_bound = HangBound(options_);
      for (const auto& h : holds_) {
        if (h->valid_until() == kKeptByServer) {
          h->SetValidUntil(SessionBreakValidUntil(noticed, hang_bound, h->ttl, h->drift));
        }
      }
    }
  }
  cv_.notify_all();
  for (const auto& lease : rejected) {
    lease->MarkLost(LockLostError(
        "SESSION_REFUSED",
        absl::StrCat("lease of ", DescribeLock(lease->ns, lease->name),
                     " lost: lockd refused to reopen the session: ", status.error_message())));
  }
}

}  // namespace lockd::client_internal
