// Internal: the one Session stream of a Client (docs/api.md "Sessions"),
// over which its holds are taken, renewed by the server and released.
//
// Lifecycle: opened lazily by the first Acquire, with open.owner = the
// Client's owner, open.lease_ttl = the session's lease (see Accepts) and
// open.keep_on_disconnect = ClientOptions::keep_on_disconnect. One thread
// (started then) reads the stream: it matches each `result` to its op by
// op_id and marks leases lost on `lost`. When the stream breaks it
// reconnects with capped, jittered backoff while the session has holds or
// operations, and opens a new session of the same owner with `resume` = every
// hold still held; holds the server does not list in `opened.resumed` are
// lost. While no stream is up, a hold stays valid until its session_break
// bound (lease_validity.h SessionBreakValidUntil: 2/3 of its lease minus the
// drift after the server was last known alive, K = HangBound(options) before
// the break was noticed), then is lost. With no holds and no operations, a
// broken stream is not reopened until the next Acquire.
//
// Writes (docs/api.md "Batches on a Session"): every thread of the Client
// shares the stream. An op issued while no write is in flight is written at
// once, alone, by the thread that issued it; the ops issued while a write is
// in flight leave together, in the order issued, as ONE SessionBatch when it
// completes (at most 1,000 ops and about 1 MiB, the rest in the writes
// after), written by the first of their threads to get the writer's turn;
// each thread writes only until its own op has left (batching_writer.h has
// the rules). Nothing waits on a timer. The reader handles each item of a
// response batch as if it had come alone (a `result` by its op_id, a
// `lost`).
//
// An acquire is one `acquire` op, or one `acquire_all` op for a call of
// several locks (AcquireCall::all); a grant of the latter becomes one hold
// per lock, each resumed, lost and released on its own, and an uncertain
// one is undone on every lock.
//
// Operations in flight when the stream breaks have an unknown outcome: an
// Acquire undoes its attempt with the unary Release{acquire_request_id} and
// retries (rpc.h AcquireWithUndo's rules); a Release is repeated as a unary
// Release with the same request_id. Operations issued while no stream is up
// wait for the next one (an Acquire up to its deadline); a Release then goes
// unary at once (the hold belongs to the owner, not to the stream).
//
// Thread-safe: mutable state behind mu_, a std::mutex for steady-clock
// condition waits (see watchdog.h for why), so no ABSL_GUARDED_BY. Lock
// order: mu_, then a stream's writer (ops are queued under mu_, so they leave
// in the order issued); writes happen with mu_ not held. Lost callbacks run
// on the session thread (or the caller's) with no lock held.

#ifndef LOCKD_CLIENTS_CPP_SRC_SESSION_STREAM_H_
#define LOCKD_CLIENTS_CPP_SRC_SESSION_STREAM_H_

#include <condition_variable>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/statusor.h"
#include "clients/cpp/src/acquire_path.h"
#include "clients/cpp/src/lease_state.h"
#include "clients/cpp/src/rpc.h"
#include "lockd/client.h"

namespace lockd::client_internal {

class SessionStream : public std::enable_shared_from_this<SessionStream> {
 public:
  // `options.owner` must be set. `channel` may be null (unknown).
  SessionStream(std::shared_ptr<Stub> stub, std::shared_ptr<grpc::ChannelInterface> channel,
                ClientOptions options);
  // REQUIRES: Shutdown() was called, or the session was never used.
  ~SessionStream();
  SessionStream(const SessionStream&) = delete;
  SessionStream& operator=(const SessionStream&) = delete;

  // Whether an Acquire asking for lease `ttl` (zero: any) can hold over this
  // session. The session's lease is ClientOptions::session_ttl, else the ttl
  // of the first Acquire asked (zero: the server's default); a ttl equal to
  // it (or to the lease the server granted) is accepted. False after the
  // server said it has no Session RPC (UNIMPLEMENTED), and for a lease too
  // short to outlast a hang (SessionSafe). Rows of ChooseAcquirePath's table.
  bool Accepts(absl::Duration ttl);

  // One hold of each lock of `call` (in call.locks order; call.all: one
  // acquire_all op) over the session, for the session's owner (the
  // Client's: ChooseAcquirePath picked this path). Errors as Client::Acquire
  // (undone attempts, UnconfirmedAcquireRequestId), plus kUnimplemented when
  // the server (or stub) has no Session RPC: nothing was sent, use the unary
  // path. A Cancel() of call.cancel ends the wait as the call's deadline
  // does (SessionCancel, a late grant given back), at once.
  absl::StatusOr<std::vector<std::shared_ptr<LeaseState>>> Acquire(const AcquireCall& call);

  // Gives up one hold of `lease` (which stops being tracked), waiting up to
  // `deadline`. Errors as ReleaseHold.
  absl::StatusOr<ReleaseOutcome> Release(const LeaseState& lease, SteadyTime deadline);

  // Stops tracking `lease` (not resumed, no lost) without releasing it.
  void Forget(const LeaseState* lease);

  // Half-closes the stream (the server releases every hold left) and waits
  // up to release_timeout for its end, then cancels it; stops the thread
  // (detached when called on it). Idempotent.
  void Shutdown();

 private:
  struct Op;
  struct Stream;

  void Run();
  // Runs one stream until it ends. Returns true if the server opened it.
  bool RunStream();
  // `opened` arrived on `s`: resumed holds are kept by the server again, the
  // others lost; queued operations are sent.
  void OnOpened(const std::shared_ptr<Stream>& s, const v1::SessionOpened& opened);
  // One `result` or `lost` read from `s` (alone or as an item of a
  // response batch).
  void HandleResponse(const std::shared_ptr<Stream>& s, const v1::SessionResponse& resp);
  // A result read from `s`; a grant to an abandoned acquire is given back
  // over `s`.
  void HandleResult(const std::shared_ptr<Stream>& s, const v1::SessionResult& result);
  void HandleLost(const v1::LockLost& lost);
  // After the stream `s` ended with `status` (whether it had opened).
  void OnStreamEnd(const std::shared_ptr<Stream>& s, const grpc::Status& status, bool opened);
  // Waits out a reconnect backoff, noticing held leases whose validity ends.
  void Backoff(std::unique_lock<std::mutex>& l, SteadyTime until);

  // Registers `req` (an op_id is set) and sends it if a stream is up.
  // `grants`: for an acquire, the lease each lock's grant becomes.
  std::shared_ptr<Op> Submit(v1::SessionRequest req, std::vector<LeaseState::Params> grants);
  // Waits until `op` is done, `until`, or `cancel` (if given) is
  // cancelled; returns whether it is done.
  bool Wait(Op& op, SteadyTime until, const CancellationToken* cancel = nullptr);
  // Cancels a waiting acquire (drops it if it was never sent).
  void Cancel(const std::shared_ptr<Op>& op);
  // The caller stops waiting for `op`: a late result is ignored, except
  // that a late grant of a sent acquire is given back.
  void Abandon(Op& op);
  // True if the calling thread is the session thread.
  bool OnSessionThread() const;

  const std::shared_ptr<Stub> stub_;
  const std::shared_ptr<grpc::ChannelInterface> channel_;
  const ClientOptions options_;

  mutable std::mutex mu_;
  std::condition_variable cv_;
  bool started_ = false;
  bool stop_ = false;
  bool exited_ = false;
  bool unsupported_ = false;
  std::thread thread_;  // set once, under mu_
  std::thread::id thread_id_;
  // The session's lease: fixed by the first Accepts (unfixed again when the
  // server rejects it); granted_ttl_ once a stream opened.
  bool ttl_fixed_ = false;
  absl::Duration ttl_;
  absl::Duration granted_ttl_;
  std::shared_ptr<Stream> stream_;  // the stream being opened or open
  bool open_ = false;               // stream_ got `opened`
  std::string last_error_;          // why the last stream ended or failed to open
  uint64_t next_op_id_ = 1;
  absl::flat_hash_map<uint64_t, std::shared_ptr<Op>> ops_;
  std::vector<std::shared_ptr<LeaseState>> holds_;
};

}  // namespace lockd::client_internal

#endif  // LOCKD_CLIENTS_CPP_SRC_SESSION_STREAM_H_
