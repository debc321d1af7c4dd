// The writing side of one Session stream (the rules are in session.h,
// "Writing"): responses go through a queue with one gRPC write outstanding,
// so no thread ever waits for the client.
//
// States (one enum; every transition happens under mu_):
//
//   kIdle    ──Send──▶ kWriting ──WriteDone(true), queue empty──▶ kIdle
//   kWriting ──WriteDone(true), queue not empty──▶ kWriting (the next write)
//   kWriting ──WriteDone(false)──▶ kFailed (the queue is dropped)
//   kIdle, kFailed ──CloseIfIdle──▶ kClosed
//
// In kFailed and kClosed every Send is dropped: the stream is broken, or
// the reactor is about to call Finish (no write may start after that).
//
// Thread-safe: guarded by mu_. Lock order: the reactor's mutex, then mu_
// (SessionReactor calls CloseIfIdle under its own). gRPC's StartWrite is
// never called with mu_ held.

#ifndef LOCKD_SERVICE_SESSION_WRITER_H_
#define LOCKD_SERVICE_SESSION_WRITER_H_

#include <deque>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "lockd/v1/lock.grpc.pb.h"

namespace lockd {

class SessionWriter {
 public:
  using Stream = grpc::ServerBidiReactor<v1::SessionRequest, v1::SessionResponse>;

  // Writes go to `stream`, which must outlive the writer and route its
  // OnWriteDone to WriteDone.
  explicit SessionWriter(Stream* stream) : stream_(stream) {}
  SessionWriter(const SessionWriter&) = delete;
  SessionWriter& operator=(const SessionWriter&) = delete;

  // Queues `resp`, and writes it at once when no write is in flight.
  void Send(v1::SessionResponse resp) ABSL_LOCKS_EXCLUDED(mu_);

  // The stream's OnWriteDone(ok): starts the next write, if any. True when
  // no write is in flight afterwards (the reactor may then finish).
  bool WriteDone(bool ok) ABSL_LOCKS_EXCLUDED(mu_);

  // True, and no write starts any more, when no write is in flight; false
  // while one is (WriteDone tells when it ends).
  bool CloseIfIdle() ABSL_LOCKS_EXCLUDED(mu_);

 private:
  enum class State { kIdle, kWriting, kFailed, kClosed };

  Stream* const stream_;
  absl::Mutex mu_;
  State state_ ABSL_GUARDED_BY(mu_) = State::kIdle;
  std::deque<v1::SessionResponse> outbox_ ABSL_GUARDED_BY(mu_);
  // The write in flight; gRPC reads it until WriteDone, so it changes only
  // in kWriting's transitions.
  v1::SessionResponse writing_now_ ABSL_GUARDED_BY(mu_);
};

}  // namespace lockd

#endif  // LOCKD_SERVICE_SESSION_WRITER_H_
