// Test-only: a Session stream whose server side is the test, for a
// MockLockServiceStub's SessionRaw (session_abandon_test.cc,
// session_batch_test.cc, acquire_path_test.cc), and the fixture of a
// Client whose sessions are such streams. Not installed.

#ifndef LOCKD_CLIENTS_CPP_SRC_SCRIPTED_SESSION_STREAM_H_
#define LOCKD_CLIENTS_CPP_SRC_SCRIPTED_SESSION_STREAM_H_

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <deque>
#include <mutex>
#include <optional>
#include <thread>
#include <vector>

#include "absl/time/time.h"
#include "clients/cpp/src/client_test_fixture.h"
#include "grpcpp/support/sync_stream.h"
#include "lockd/v1/lock.pb.h"
#include "protos/proto_duration.h"

namespace lockd {

// Write() records what the client sends, Read() returns what the test
// pushes, and the stream ends when the client half-closes. HoldWrites()
// keeps each later write (but `open`) in flight until ReleaseWrites(), so
// that a test can queue ops behind it.
//
// Thread-safe: state behind mu_ (a std::mutex for the condition waits).
class ScriptedStream
    : public grpc::ClientReaderWriterInterface<v1::SessionRequest, v1::SessionResponse> {
 public:
  void Push(v1::SessionResponse resp) {
    std::lock_guard<std::mutex> l(mu_);
    replies_.push_back(std::move(resp));
    cv_.notify_all();
  }

  // Waits up to `timeout` for a written op (a request written alone, or an
  // op of a written batch) that `pred` accepts; the last one written.
  template <typename Pred>
  std::optional<v1::SessionRequest> AwaitWrite(Pred pred, absl::Duration timeout) {
    std::unique_lock<std::mutex> l(mu_);
    std::optional<v1::SessionRequest> found;
    cv_.wait_for(l, absl::ToChronoNanoseconds(timeout), [&] {
      for (const v1::SessionRequest& w : written_) {
        if (!w.has_batch() && pred(w)) found = w;
        for (const v1::SessionRequest& op : w.batch().ops()) {
          if (pred(op)) found = op;
        }
      }
      return found.has_value();
    });
    return found;
  }

  // Every message written so far, as written (batches as batches).
  std::vector<v1::SessionRequest> Written() {
    std::lock_guard<std::mutex> l(mu_);
    return written_;
  }

  void HoldWrites() {
    std::lock_guard<std::mutex> l(mu_);
    hold_ = true;
  }
  void ReleaseWrites() {
    std::lock_guard<std::mutex> l(mu_);
    hold_ = false;
    cv_.notify_all();
  }
  // Waits up to `timeout` until a write is held in flight.
  bool AwaitHeldWrite(absl::Duration timeout) {
    std::unique_lock<std::mutex> l(mu_);
    return cv_.wait_for(l, absl::ToChronoNanoseconds(timeout), [&] { return held_ > 0; });
  }

  void WaitForInitialMetadata() override {}
  bool NextMessageSize(uint32_t* sz) override {
    *sz = 1 << 20;
    return true;
  }
  bool Read(v1::SessionResponse* resp) override {
    std::unique_lock<std::mutex> l(mu_);
    cv_.wait(l, [&] { return !replies_.empty() || ended_; });
    if (replies_.empty()) return false;
    *resp = std::move(replies_.front());
    replies_.pop_front();
    return true;
  }
  bool Write(const v1::SessionRequest& req, grpc::WriteOptions) override {
    std::unique_lock<std::mutex> l(mu_);
    written_.push_back(req);
    cv_.notify_all();
    if (hold_ && !req.has_open()) {
      ++held_;
      cv_.notify_all();
      cv_.wait(l, [&] { return !hold_; });
      --held_;
    }
    return !ended_;
  }
  bool WritesDone() override {
    std::lock_guard<std::mutex> l(mu_);
    ended_ = true;
    cv_.notify_all();
    return true;
  }
  grpc::Status Finish() override { return grpc::Status::OK; }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<v1::SessionResponse> replies_;
  std::vector<v1::SessionRequest> written_;
  bool ended_ = false;
  bool hold_ = false;
  int held_ = 0;  // writes held in flight
};

// The grant of `acquire` (a SessionRequest with an acquire) as lockd sends
// it: OK, acquired, with `token`, `hold_count` and a 30 s lease.
inline v1::SessionResponse GrantOf(const v1::SessionRequest& acquire, uint64_t token,
                                   uint32_t hold_count) {
  v1::SessionResponse grant;
  v1::SessionResult* r = grant.mutable_result();
  r->set_op_id(acquire.acquire().op_id());
  r->mutable_status();
  r->mutable_acquire()->set_acquired(true);
  r->mutable_acquire()->set_fencing_token(token);
  r->mutable_acquire()->set_hold_count(hold_count);
  SetProtoDuration(absl::Seconds(30), r->mutable_acquire()->mutable_lease_ttl());
  return grant;
}

// A Client with sessions on, each Session a ScriptedStream that the
// "server" (the test) has already opened with a 30 s lease.
class ScriptedSessionTest : public ClientTest {
 protected:
  ScriptedSessionTest() {
    options_.use_sessions = true;
    options_.release_timeout = absl::Milliseconds(200);  // bounds the wait for a cancel's answer
    // The client deletes the stream it gets when the call ends.
    ON_CALL(*stub_, SessionRaw(::testing::_))
        .WillByDefault(::testing::Invoke([this](grpc::ClientContext*) {
          auto* stream = new ScriptedStream;
          v1::SessionResponse opened;
          SetProtoDuration(absl::Seconds(30), opened.mutable_opened()->mutable_lease_ttl());
          stream->Push(opened);
          stream_ = stream;
          return stream;
        }));
  }

  // The stream, once the client opened it (null if it did not within 10 s).
  ScriptedStream* AwaitStream() {
    for (auto end = std::chrono::steady_clock::now() + std::chrono::seconds(10);
         stream_.load() == nullptr && std::chrono::steady_clock::now() < end;) {
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
    return stream_.load();
  }

  // Written by the session thread, read by the test's.
  std::atomic<ScriptedStream*> stream_{nullptr};
};

}  // namespace lockd

#endif  // LOCKD_CLIENTS_CPP_SRC_SCRIPTED_SESSION_STREAM_H_
