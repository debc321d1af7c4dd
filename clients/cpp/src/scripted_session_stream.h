// Test-only: a Session stream whose server side is the test, for a
// MockLockServiceStub's SessionRaw (session_abandon_test.cc,
// acquire_path_test.cc). Not installed.

#ifndef LOCKD_CLIENTS_CPP_SRC_SCRIPTED_SESSION_STREAM_H_
#define LOCKD_CLIENTS_CPP_SRC_SCRIPTED_SESSION_STREAM_H_

#include <condition_variable>
#include <deque>
#include <mutex>
#include <optional>
#include <vector>

#include "absl/time/time.h"
#include "grpcpp/support/sync_stream.h"
#include "lockd/v1/lock.pb.h"
#include "protos/proto_duration.h"

namespace lockd {

// Write() records what the client sends, Read() returns what the test
// pushes, and the stream ends when the client half-closes.
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

  // Waits up to `timeout` for a written request that `pred` accepts.
  template <typename Pred>
  std::optional<v1::SessionRequest> AwaitWrite(Pred pred, absl::Duration timeout) {
    std::unique_lock<std::mutex> l(mu_);
    std::optional<v1::SessionRequest> found;
    cv_.wait_for(l, absl::ToChronoNanoseconds(timeout), [&] {
      for (const v1::SessionRequest& w : written_) {
        if (pred(w)) found = w;
      }
      return found.has_value();
    });
    return found;
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
    std::lock_guard<std::mutex> l(mu_);
    written_.push_back(req);
    cv_.notify_all();
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

}  // namespace lockd

#endif  // LOCKD_CLIENTS_CPP_SRC_SCRIPTED_SESSION_STREAM_H_
