// A minimal HTTP/2 client for the conformance suite: it sends gRPC unary
// requests on streams it can reset (RST_STREAM) at a chosen moment, and it
// records, frame by frame, whether the server sent anything on each stream,
// including frames that arrive after the reset (which a gRPC client drops
// silently). That is how a test tells "the server never answered this call"
// from "the server answered and the client discarded it".
//
// Not a general HTTP/2 client: no HPACK decoding (responses are only
// recorded, not parsed), literal request headers, connection-level flow
// control only. Thread-safe: one reader thread; Send/Reset from any thread.

#ifndef LOCKD_TESTS_CONFORMANCE_RAW_H2_H_
#define LOCKD_TESTS_CONFORMANCE_RAW_H2_H_

#include <cstdint>
#include <string>
#include <thread>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_set.h"
#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"

namespace lockd::testing {

class RawH2Client {
 public:
  RawH2Client() = default;
  ~RawH2Client();  // closes the connection, joins the reader
  RawH2Client(const RawH2Client&) = delete;
  RawH2Client& operator=(const RawH2Client&) = delete;

  // Connects to "host:port" (IPv4 loopback) and sends the HTTP/2 preface.
  absl::Status Connect(const std::string& address);

  // Sends one gRPC unary call (HEADERS + DATA with END_STREAM) of `message`
  // (a serialized protobuf) to `path`, e.g. "/lockd.v1.LockService/Acquire".
  // Returns the stream id.
  uint32_t SendUnary(const std::string& path, const std::string& message);

  // Resets the stream with CANCEL, as a client does when it cancels a call
  // or its deadline passes.
  void Reset(uint32_t stream);

  // True once the server sent HEADERS or DATA on `stream`.
  bool Answered(uint32_t stream) const;

 private:
  void WriteFrame(uint8_t type, uint8_t flags, uint32_t stream, const std::string& payload);
  void ReadLoop();

  int fd_ = -1;
  std::string authority_;
  std::thread reader_;
  absl::Mutex write_mu_;
  uint32_t next_stream_ ABSL_GUARDED_BY(write_mu_) = 1;
  mutable absl::Mutex mu_;
  absl::flat_hash_set<uint32_t> answered_ ABSL_GUARDED_BY(mu_);
};

}  // namespace lockd::testing

#endif  // LOCKD_TESTS_CONFORMANCE_RAW_H2_H_
