// A synchronous test client for LockService.Session (docs/api.md
// "Sessions"): one bidi stream, a reader thread that files every
// SessionResponse (the `opened`, results by op_id, `lost` in arrival order;
// the items of a response batch one by one),
// and blocking helpers that wait for them with a timeout.
//
//   SessionClient s(stub);
//   std::optional<v1::SessionOpened> opened = s.Open(Opening{.owner = "alice"});
//   s.Acquire(1, "job");
//   std::optional<v1::SessionResult> r = s.WaitResult(1, absl::Seconds(30));
//   grpc::Status end = s.HalfCloseAndFinish();
//
// Thread-safe: every method may be called from any thread (writes are
// serialised, the received responses are guarded by a mutex); the tests use
// one thread per client.

#ifndef LOCKD_TESTS_CONFORMANCE_SESSION_CLIENT_H_
#define LOCKD_TESTS_CONFORMANCE_SESSION_CLIENT_H_

#include <cstdint>
#include <deque>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "grpcpp/client_context.h"
#include "grpcpp/support/status.h"
#include "grpcpp/support/sync_stream.h"
#include "lockd/v1/lock.grpc.pb.h"

namespace lockd::testing {

// What SessionClient::Open sends (an absent lease_ttl when `lease` is zero).
struct Opening {
  std::string owner;
  absl::Duration lease = absl::ZeroDuration();
  bool keep_on_disconnect = false;
  std::vector<v1::LockRef> resume;
  std::string ns;
};

// Requests, to Send alone or put in a Batch (wait_timeout absent when
// `wait` is zero).
v1::SessionRequest AcquireOp(uint64_t op_id, const std::string& name,
                             absl::Duration wait = absl::ZeroDuration(),
                             const std::string& owner = "", const std::string& ns = "");
v1::SessionRequest ReleaseOp(uint64_t op_id, const std::string& name, const std::string& owner = "",
                             const std::string& ns = "");
v1::SessionRequest CancelOp(uint64_t op_id);
// A `batch` of `ops` (docs/api.md "Batches on a Session").
v1::SessionRequest Batch(std::vector<v1::SessionRequest> ops);

class SessionClient {
 public:
  // Starts the stream on `stub` (which must outlive this) and its reader;
  // sends nothing. The call's deadline is `deadline` from now, so that a test
  // that goes wrong ends instead of hanging.
  explicit SessionClient(v1::LockService::Stub* stub, absl::Duration deadline = absl::Minutes(3));
  // Breaks the stream if it was not finished, then joins the reader.
  ~SessionClient();

  SessionClient(const SessionClient&) = delete;
  SessionClient& operator=(const SessionClient&) = delete;

  // Writes one request; false when the stream is already closed for writes.
  bool Send(const v1::SessionRequest& req);
  // Writes `open`.
  bool SendOpen(const Opening& o);
  // Writes `open` and waits up to `timeout` for `opened`; nullopt if the
  // stream ended (or a response other than `opened` came) first.
  std::optional<v1::SessionOpened> Open(const Opening& o,
                                        absl::Duration timeout = absl::Seconds(30));
  // Writes an acquire (wait_timeout absent when `wait` is zero).
  bool Acquire(uint64_t op_id, const std::string& name, absl::Duration wait = absl::ZeroDuration(),
               const std::string& owner = "", const std::string& ns = "");
  bool Release(uint64_t op_id, const std::string& name, const std::string& owner = "",
               const std::string& ns = "");
  bool Cancel(uint64_t op_id);

  // The `opened` received, waiting up to `timeout`; nullopt if none came.
  std::optional<v1::SessionOpened> WaitOpened(absl::Duration timeout);
  // True when the first response received was `opened` (false before any).
  bool OpenedCameFirst();
  // The result of `op_id`, waiting up to `timeout`; nullopt if none came
  // (timeout or end of stream). A result is returned once.
  std::optional<v1::SessionResult> WaitResult(uint64_t op_id,
                                              absl::Duration timeout = absl::Seconds(30));
  // True when the result of `op_id` has come and was not taken yet.
  bool HasResult(uint64_t op_id);
  // The next `lost` not taken yet, waiting up to `timeout`.
  std::optional<v1::LockLost> WaitLost(absl::Duration timeout);
  // Number of `lost` received so far (taken or not).
  int LostCount();
  // Number of results received so far (taken or not).
  int ResultCount();
  // Number of response batches received so far (their items are filed as
  // if each had come alone).
  int ResponseBatches();

  // True once the server ended the stream (the reader saw its end).
  bool Ended();
  // Waits up to `timeout` for the server to end the stream, then returns its
  // status; DEADLINE_EXCEEDED from the helper itself if it did not end.
  grpc::Status WaitEnd(absl::Duration timeout = absl::Seconds(30));
  // Half-closes (WritesDone) and returns the stream's final status.
  grpc::Status HalfCloseAndFinish(absl::Duration timeout = absl::Seconds(30));
  // Breaks the stream abruptly (ClientContext::TryCancel), like a crashed
  // client or a lost connection.
  void Break();

 private:
  void ReadLoop();
  void File(const v1::SessionResponse& resp) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  // Constant after construction.
  grpc::ClientContext ctx_;
  std::unique_ptr<grpc::ClientReaderWriter<v1::SessionRequest, v1::SessionResponse>> stream_;
  std::thread reader_;

  absl::Mutex write_mu_;
  bool writes_done_ ABSL_GUARDED_BY(write_mu_) = false;

  absl::Mutex mu_;
  std::optional<v1::SessionOpened> opened_ ABSL_GUARDED_BY(mu_);
  int responses_ ABSL_GUARDED_BY(mu_) = 0;
  bool opened_first_ ABSL_GUARDED_BY(mu_) = false;
  std::map<uint64_t, v1::SessionResult> results_ ABSL_GUARDED_BY(mu_);
  std::deque<v1::LockLost> lost_ ABSL_GUARDED_BY(mu_);
  int lost_count_ ABSL_GUARDED_BY(mu_) = 0;
  int result_count_ ABSL_GUARDED_BY(mu_) = 0;
  int response_batches_ ABSL_GUARDED_BY(mu_) = 0;
  bool ended_ ABSL_GUARDED_BY(mu_) = false;
  std::optional<grpc::Status> final_ ABSL_GUARDED_BY(mu_);
};

}  // namespace lockd::testing

#endif  // LOCKD_TESTS_CONFORMANCE_SESSION_CLIENT_H_
