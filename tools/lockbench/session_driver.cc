// RunSessionsOnEventLoops (driver.h): each client's Session stream on a
// CompletionQueue. A stream keeps one Read outstanding and one write (an op,
// or the final WritesDone) at a time; the tags say which completed.

#include <algorithm>
#include <atomic>
#include <deque>
#include <thread>
#include <utility>

#include "absl/synchronization/blocking_counter.h"
#include "absl/synchronization/mutex.h"
#include "absl/synchronization/notification.h"
#include "grpcpp/completion_queue.h"
#include "tools/lockbench/driver.h"
#include "tools/lockbench/session.h"
#include "tools/lockbench/stats.h"

namespace lockd::bench {
namespace {

enum class Event { kStart, kRead, kWrite, kWritesDone, kFinish };

struct SessionClient;
struct Tag {
  SessionClient* client;
  Event event;
};

// One client's stream. Used by one event loop thread only.
struct SessionClient {
  ClientLogic* logic = nullptr;
  std::unique_ptr<v1::LockService::Stub> stub;
  grpc::ClientContext ctx;
  std::unique_ptr<grpc::ClientAsyncReaderWriter<v1::SessionRequest, v1::SessionResponse>> stream;
  Tag start{this, Event::kStart}, read{this, Event::kRead}, write{this, Event::kWrite},
      writes_done{this, Event::kWritesDone}, finish{this, Event::kFinish};
  // Written in order, one at a time: the front is in flight while `writing`.
  // The next op can be queued before the previous op's write completion is
  // seen, so this holds at most two.
  std::deque<v1::SessionRequest> pending;
  bool started = false;
  bool writing = false;
  bool close_queued = false;  // WritesDone once `pending` is empty
  bool opened = false;
  bool finished = false;
  Op::Kind in_flight = Op::Kind::kDone;
  uint64_t op_id = 0;
  v1::SessionResponse resp;
  grpc::Status final_status;
  absl::Status error;  // the stream's own failure (not an op's)
};

// The clients of one event loop and their CompletionQueue.
class Loop {
 public:
  void Add(SessionClient* c, const std::string& ns, absl::Duration lease) {
    clients_.push_back(c);
    c->stream = c->stub->PrepareAsyncSession(&c->ctx, &cq_);
    c->pending.emplace_back();
    SetOpen(ns, c->logic->owner(), lease, &c->pending.back());
    c->stream->StartCall(&c->start);
  }

  // Runs until every stream is open or has ended.
  void OpenAll() {
    while (opened_ + finished_ < clients_.size()) Step();
  }

  // Starts every logic (or, if `abort`, closes every stream), then runs
  // until every stream has ended.
  void Run(bool abort) {
    for (SessionClient* c : clients_) {
      if (c->finished) continue;
      Issue(*c, abort ? Op{} : c->logic->First());
    }
    while (finished_ < clients_.size()) Step();
    cq_.Shutdown();
    void* tag = nullptr;
    bool ok = false;
    while (cq_.Next(&tag, &ok)) {
    }
  }

 private:
  void Step() {
    void* tag = nullptr;
    bool ok = false;
    if (!cq_.Next(&tag, &ok)) return;
    Tag* t = static_cast<Tag*>(tag);
    SessionClient& c = *t->client;
    switch (t->event) {
      case Event::kStart:
        if (!ok) return Finish(c);
        c.started = true;
        c.stream->Read(&c.resp, &c.read);
        return TryWrite(c);
      case Event::kWrite:
        c.writing = false;
        c.pending.pop_front();
        if (ok) TryWrite(c);
        return;  // if !ok the stream broke: the outstanding Read fails too
      case Event::kWritesDone:
        c.writing = false;
        return;
      case Event::kRead:
        if (!ok) return Finish(c);
        OnRead(c);
        return;
      case Event::kFinish:
        OnFinish(c);
        return;
    }
  }

  void OnRead(SessionClient& c) {
    if (!c.opened) {
      if (absl::Status s = CheckOpened(c.resp); !s.ok()) {
        c.error = std::move(s);
        c.ctx.TryCancel();  // the Read below fails, then Finish
      } else {
        c.opened = true;
        ++opened_;
      }
      c.stream->Read(&c.resp, &c.read);
      return;
    }
    OpResult r;
    absl::StatusOr<AcquireOutcome> o = ResultOf(c.resp, c.op_id, c.in_flight == Op::Kind::kAcquire);
    if (!o.ok()) {
      r.status = o.status();
    } else {
      r.acquired = o->acquired;
      r.fencing_token = o->fencing_token;
    }
    c.stream->Read(&c.resp, &c.read);
    if (c.in_flight == Op::Kind::kDone) {  // an answer to no op: a broken stream
      if (c.error.ok())
        c.error = r.status.ok() ? absl::InternalError("Session: stray result") : r.status;
      c.ctx.TryCancel();
      return;
    }
    c.in_flight = Op::Kind::kDone;
    Issue(c, c.logic->Next(r));
  }

  void Issue(SessionClient& c, const Op& op) {
    if (op.kind == Op::Kind::kDone) {
      c.close_queued = true;
    } else {
      c.in_flight = op.kind;
      c.pending.emplace_back();
      if (op.kind == Op::Kind::kAcquire) {
        SetAcquire(++c.op_id, *op.name, op.wait, &c.pending.back());
      } else {
        SetRelease(++c.op_id, *op.name, &c.pending.back());
      }
    }
    TryWrite(c);
  }

  void TryWrite(SessionClient& c) {
    if (!c.started || c.writing || c.finished) return;
    if (!c.pending.empty()) {
      c.writing = true;
      c.stream->Write(c.pending.front(), &c.write);
    } else if (c.close_queued) {
      c.close_queued = false;
      c.writing = true;
      c.stream->WritesDone(&c.writes_done);
    }
  }

  void Finish(SessionClient& c) { c.stream->Finish(&c.final_status, &c.finish); }

  // The stream has ended: an op still in flight failed with it, and so does
  // every op its logic asks for after that.
  void OnFinish(SessionClient& c) {
    c.finished = true;
    ++finished_;
    absl::Status s = StreamStatus(c.final_status);
    if (!c.opened && s.ok())
      s = absl::UnavailableError("Session: the stream ended before `opened`");
    if (c.in_flight != Op::Kind::kDone || !c.pending.empty()) {
      if (s.ok()) s = absl::UnavailableError("Session: the server ended the stream early");
      OpResult failed;
      failed.status = s;
      for (int i = 0; i < 8 && c.in_flight != Op::Kind::kDone; ++i) {
        Op next = c.logic->Next(failed);
        c.in_flight = next.kind;
      }
    }
    if (c.error.ok()) c.error = s;
  }

  grpc::CompletionQueue cq_;
  std::vector<SessionClient*> clients_;
  size_t opened_ = 0;
  size_t finished_ = 0;
};

}  // namespace

absl::Status RunSessionsOnEventLoops(const std::vector<std::shared_ptr<grpc::Channel>>& channels,
                                     const std::string& ns, const std::vector<ClientLogic*>& logics,
                                     absl::Duration lease, int threads, const StartFn& start) {
  const size_t n = logics.size();
  const size_t loops = std::max<size_t>(1, std::min<size_t>(n, static_cast<size_t>(threads)));
  std::vector<SessionClient> clients(n);
  for (size_t i = 0; i < n; ++i) {
    clients[i].logic = logics[i];
    clients[i].stub = v1::LockService::NewStub(channels[i]);
  }
  absl::BlockingCounter opened(static_cast<int>(loops));
  absl::Notification go;
  std::atomic<bool> abort{false};
  std::vector<std::thread> workers;
  for (size_t t = 0; t < loops; ++t) {
    workers.emplace_back([&, t] {
      Loop loop;
      for (size_t i = t; i < n; i += loops) loop.Add(&clients[i], ns, lease);
      loop.OpenAll();
      opened.DecrementCount();
      go.WaitForNotification();
      loop.Run(abort.load());
    });
  }
  opened.Wait();
  for (const SessionClient& c : clients) {
    if (!c.opened) abort = true;
  }
  if (!abort) start(NowNanos());
  go.Notify();
  for (std::thread& w : workers) w.join();
  for (const SessionClient& c : clients) {
    if (!c.error.ok()) return c.error;
  }
  return absl::OkStatus();
}

}  // namespace lockd::bench
