#include "tools/lockbench/driver.h"

#include <algorithm>
#include <chrono>
#include <thread>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/notification.h"
#include "grpcpp/alarm.h"
#include "grpcpp/completion_queue.h"
#include "lockd/v1/lock.grpc.pb.h"
#include "protos/proto_duration.h"
#include "tools/lockbench/stats.h"

namespace lockd::bench {
namespace {

// Slack on top of the wait so that a late answer from a loaded server is
// still an answer, not a DEADLINE_EXCEEDED.
constexpr auto kRpcSlack = std::chrono::seconds(30);

OpResult Execute(Locker& locker, const Op& op, const std::string& owner, absl::Duration lease) {
  OpResult r;
  if (op.kind == Op::Kind::kAcquire) {
    absl::StatusOr<AcquireOutcome> a = locker.Acquire(*op.name, owner, lease, op.wait);
    if (!a.ok()) {
      r.status = a.status();
    } else {
      r.acquired = a->acquired;
      r.fencing_token = a->fencing_token;
    }
  } else {
    r.status = locker.Release(*op.name, owner);
  }
  return r;
}

// One client on an event loop: its channel's stub and the call (or pause)
// in flight.
struct AsyncClient {
  ClientLogic* logic = nullptr;
  std::unique_ptr<v1::LockService::Stub> stub;
  std::unique_ptr<grpc::ClientContext> ctx;
  Op::Kind in_flight = Op::Kind::kDone;
  v1::AcquireRequest acquire;
  v1::AcquireResponse acquire_resp;
  std::unique_ptr<grpc::ClientAsyncResponseReader<v1::AcquireResponse>> acquire_call;
  v1::ReleaseRequest release;
  v1::ReleaseResponse release_resp;
  std::unique_ptr<grpc::ClientAsyncResponseReader<v1::ReleaseResponse>> release_call;
  v1::AcquireAllRequest acquire_all;
  v1::AcquireAllResponse acquire_all_resp;
  std::unique_ptr<grpc::ClientAsyncResponseReader<v1::AcquireAllResponse>> acquire_all_call;
  grpc::Alarm pause;
  grpc::Status status;
};

v1::LockMode ModeOf(const Op& op) {
  return op.shared ? v1::LOCK_MODE_SHARED : v1::LOCK_MODE_EXCLUSIVE;
}

const char* CallName(Op::Kind kind) {
  switch (kind) {
    case Op::Kind::kAcquire:
      return "Acquire";
    case Op::Kind::kAcquireAll:
      return "AcquireAll";
    case Op::Kind::kRelease:
      return "Release";
    case Op::Kind::kPause:
      return "pause";
    case Op::Kind::kDone:
      break;
  }
  return "none";
}

// Starts `op` for `c` on `cq`; false if the logic is done.
bool Issue(AsyncClient& c, const Op& op, grpc::CompletionQueue* cq) {
  if (op.kind == Op::Kind::kDone) return false;
  c.in_flight = op.kind;
  if (op.kind == Op::Kind::kPause) {
    c.status = grpc::Status::OK;
    c.pause.Set(cq, std::chrono::system_clock::now() + absl::ToChronoNanoseconds(op.wait), &c);
    return true;
  }
  c.ctx = std::make_unique<grpc::ClientContext>();
  if (op.kind == Op::Kind::kAcquire) {
    c.ctx->set_deadline(std::chrono::system_clock::now() + absl::ToChronoNanoseconds(op.wait) +
                        kRpcSlack);
    c.acquire.set_name(*op.name);
    if (op.wait > absl::ZeroDuration()) {
      SetProtoDuration(op.wait, c.acquire.mutable_wait_timeout());
    } else {
      c.acquire.clear_wait_timeout();
    }
    // Defaults (an exclusive lock) are not sent: the exclusive scenarios'
    // requests are the bytes they always were.
    c.acquire.set_mode(ModeOf(op));
    c.acquire.set_limit(op.limit);
    c.acquire.set_permits(op.permits);
    c.acquire_call = c.stub->AsyncAcquire(c.ctx.get(), c.acquire, cq);
    c.acquire_call->Finish(&c.acquire_resp, &c.status, &c);
  } else if (op.kind == Op::Kind::kAcquireAll) {
    c.ctx->set_deadline(std::chrono::system_clock::now() + absl::ToChronoNanoseconds(op.wait) +
                        kRpcSlack);
    c.acquire_all.clear_locks();
    for (const std::string& name : *op.names) {
      v1::LockSpec* spec = c.acquire_all.add_locks();
      spec->set_namespace_(c.acquire.namespace_());
      spec->set_name(name);
      spec->set_mode(ModeOf(op));
      spec->set_limit(op.limit);
      spec->set_permits(op.permits);
    }
    if (op.wait > absl::ZeroDuration()) {
      SetProtoDuration(op.wait, c.acquire_all.mutable_wait_timeout());
    } else {
      c.acquire_all.clear_wait_timeout();
    }
    c.acquire_all_call = c.stub->AsyncAcquireAll(c.ctx.get(), c.acquire_all, cq);
    c.acquire_all_call->Finish(&c.acquire_all_resp, &c.status, &c);
  } else {
    c.ctx->set_deadline(std::chrono::system_clock::now() + kRpcSlack);
    c.release.set_name(*op.name);
    c.release_call = c.stub->AsyncRelease(c.ctx.get(), c.release, cq);
    c.release_call->Finish(&c.release_resp, &c.status, &c);
  }
  return true;
}

OpResult ResultOf(const AsyncClient& c) {
  OpResult r;
  if (!c.status.ok()) {
    r.status = absl::Status(static_cast<absl::StatusCode>(c.status.error_code()),
                            absl::StrCat(CallName(c.in_flight), ": ", c.status.error_message()));
  } else if (c.in_flight == Op::Kind::kAcquire) {
    r.acquired = c.acquire_resp.acquired();
    r.fencing_token = c.acquire_resp.fencing_token();
  } else if (c.in_flight == Op::Kind::kAcquireAll) {
    r.acquired = c.acquire_all_resp.acquired();
  }
  return r;
}

}  // namespace

absl::Status RunOnThreads(const std::vector<std::unique_ptr<Locker>>& lockers,
                          const std::vector<ClientLogic*>& logics, absl::Duration lease,
                          const StartFn& start) {
  absl::Notification go;
  std::vector<std::thread> threads;
  std::vector<absl::Status> closed(logics.size());
  for (size_t i = 0; i < logics.size(); ++i) {
    threads.emplace_back([&, i] {
      ClientLogic& logic = *logics[i];
      go.WaitForNotification();
      for (Op op = logic.First(); op.kind != Op::Kind::kDone;) {
        op = logic.Next(Execute(*lockers[i], op, logic.owner(), lease));
      }
      closed[i] = lockers[i]->Close();
    });
  }
  start(NowNanos());
  go.Notify();
  for (std::thread& t : threads) t.join();
  for (absl::Status& s : closed) {
    if (!s.ok()) return s;
  }
  return absl::OkStatus();
}

void RunOnEventLoops(const std::vector<std::shared_ptr<grpc::Channel>>& channels,
                     const std::string& ns, const std::vector<ClientLogic*>& logics,
                     absl::Duration lease, int threads, const StartFn& start) {
  const size_t n = logics.size();
  const size_t loops = std::max<size_t>(1, std::min<size_t>(n, static_cast<size_t>(threads)));
  std::vector<AsyncClient> clients(n);
  for (size_t i = 0; i < n; ++i) {
    AsyncClient& c = clients[i];
    c.logic = logics[i];
    c.stub = v1::LockService::NewStub(channels[i]);
    c.acquire.set_namespace_(ns);
    c.acquire.set_owner(c.logic->owner());
    SetProtoDuration(lease, c.acquire.mutable_lease_ttl());
    c.release.set_namespace_(ns);
    c.release.set_owner(c.logic->owner());
    c.acquire_all.set_owner(c.logic->owner());
    SetProtoDuration(lease, c.acquire_all.mutable_lease_ttl());
  }
  absl::Notification go;
  std::vector<std::thread> workers;
  for (size_t t = 0; t < loops; ++t) {
    workers.emplace_back([&, t] {
      grpc::CompletionQueue cq;
      size_t active = 0;
      go.WaitForNotification();
      for (size_t i = t; i < n; i += loops) {
        if (Issue(clients[i], clients[i].logic->First(), &cq)) ++active;
      }
      void* tag = nullptr;
      bool ok = false;
      while (active > 0 && cq.Next(&tag, &ok)) {
        AsyncClient& c = *static_cast<AsyncClient*>(tag);
        if (!Issue(c, c.logic->Next(ResultOf(c)), &cq)) --active;
      }
      cq.Shutdown();
      while (cq.Next(&tag, &ok)) {
      }
    });
  }
  start(NowNanos());
  go.Notify();
  for (std::thread& w : workers) w.join();
}

}  // namespace lockd::bench
