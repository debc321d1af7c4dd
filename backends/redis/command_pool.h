// The Redis client under the redis backend, part two: a pool of pipelining
// command connections. Replies are read by threads owned here, so that no
// caller ever waits for Redis to answer (a caller only writes its command to
// a socket).
//
// Internal to backends/redis; the backend's contract is redis_backend.h.

#ifndef LOCKD_BACKENDS_REDIS_COMMAND_POOL_H_
#define LOCKD_BACKENDS_REDIS_COMMAND_POOL_H_

#include <atomic>
#include <cstdint>
#include <deque>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/functional/any_invocable.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "backends/redis/redis_client.h"

namespace lockd::redis {

using ReplyCallback = absl::AnyInvocable<void(absl::StatusOr<ReplyPtr>) &&>;

struct Command;

// Takes the commands a Redis Cluster node redirected (see Command::redirect).
class RedirectHandler {
 public:
  virtual ~RedirectHandler() = default;
  // `reply` is the -MOVED, -ASK or -TRYAGAIN error reply (IsClusterRedirect)
  // to `cmd`, which therefore did not run. The handler owns `cmd` now: its
  // done must still run exactly once. Called on a pool thread, no lock held.
  virtual void OnRedirect(Command cmd, ReplyPtr reply) = 0;
};

// One command for the pool.
struct Command {
  // When set, the command is `EVALSHA sha num_keys args...` (args are the
  // keys, then the arguments); otherwise `args` is the whole command.
  const Script* script = nullptr;
  int num_keys = 0;
  std::vector<std::string> args;
  // Names the operation and lock in error messages (see RedisError).
  std::string context;
  // Called exactly once, on a pool thread, with the reply or the error
  // (error replies arrive as a status, never as a reply).
  ReplyCallback done;
  // Cluster mode only. The slot whose node must run the command; -1: the
  // slot of args[0] (the first key, for a script).
  int slot = -1;
  // When set, a redirection reply goes to it instead of to done.
  RedirectHandler* redirect = nullptr;
  // How many times the command was moved (-MOVED) so far, and when it was
  // first redirected (any kind; InfiniteFuture() if never).
  int redirects = 0;
  absl::Time first_redirect = absl::InfiniteFuture();
};

// A fixed number of connections. A command is written to a connection's
// socket on the caller's thread (round-robin over the connections that are
// up), so that sending it wakes no other thread; commands written while
// earlier replies are outstanding pipeline on the connection. Each connection
// has one thread that reads its replies, in order, and delivers them. A
// connection that fails, or stays silent for command_timeout while a reply is
// awaited, is dropped: the commands awaiting replies on it fail with
// kUnavailable, and its thread reconnects with capped exponential backoff
// (re-loading the scripts). Commands never wait for a connection: while none
// is up, Submit fails at once.
//
// While a CoalescingScope (backends/common/coalescing_scope.h) is open on
// the calling thread, commands are held back in it instead (up to
// kMaxHeldBack) and written, when it closes, in ONE write on one connection
// (a pipeline): a session batch's acquires and releases cost one write, not
// one each. Commands of concurrent callers without a scope still go one write
// each (their sends pipeline on the connections, but do not share a write).
//
// Thread-safe: each connection's socket writes and queue of awaited replies
// are guarded by its own mutex, the counters by the pool's; a connection's
// hiredis context is touched only by its thread.
class CommandPool {
 public:
  // Starts `size` connection threads; each connects on its own. `scripts`
  // must have their sha set and outlive the pool.
  CommandPool(ConnectionOptions options, std::vector<Script*> scripts, int size,
              absl::Duration backoff_min, absl::Duration backoff_max);
  // Stop()s.
  ~CommandPool();
  CommandPool(const CommandPool&) = delete;
  CommandPool& operator=(const CommandPool&) = delete;

  // Commands held back in one CoalescingScope at most; the next is written
  // at once.
  static constexpr size_t kMaxHeldBack = 1000;

  // Writes `cmd` to a connection, or holds it back in the calling thread's
  // CoalescingScope. OK: cmd was moved from and cmd.done will run exactly
  // once on a pool thread (or, when the held-back write fails, on the thread
  // closing the scope, with the error). Otherwise `cmd` is untouched and the
  // caller must finish it: kUnavailable when no connection is up or the
  // write failed before anything was sent (with the last connection error),
  // ShuttingDownError() after Stop(). Never runs a callback inline; blocks
  // only for the socket write (at most command_timeout, when the server
  // stops reading).
  absl::Status Submit(Command& cmd);
  // Writes `cmd` and, right behind it in the same write, `then`, on one
  // connection, so that both run in that order. Same contract as Submit for
  // both (on failure neither was sent).
  absl::Status Submit(Command& cmd, Command& then);
  // Writes every command of `cmds`, in order, in one write on one
  // connection (a pipeline). Same contract as Submit for all of them (on
  // failure none was sent and none was moved from).
  absl::Status SubmitAll(std::vector<Command>& cmds);

  // Makes every connection drop at once and reconnect (used when the
  // subscriber saw the server go away, so that connections to a dead server
  // are not used again); commands awaiting replies on them fail with
  // kUnavailable.
  void ResetConnections();

  // Number of connections that are up.
  int connected() const;
  // Why the last connection attempt or command failed (OK if none did).
  absl::Status last_error() const;
  // Blocks until every connection is up (true) or `timeout` passes.
  bool WaitAllConnected(absl::Duration timeout) const;

  // Refuses new commands, lets those awaiting replies finish (at most
  // command_timeout), and joins the threads. Idempotent.
  void Stop();

 private:
  // A command written to a connection whose reply has not been read yet.
  struct Sent {
    Command cmd;
    absl::Time deadline;  // the connection is dropped if no reply came by then
    bool eval = false;    // resent as EVAL after NOSCRIPT
  };
  struct Connection {
    absl::Mutex mu;
    int fd ABSL_GUARDED_BY(mu) = -1;  // the socket while up; -1 while down
    // No new command may be written: the connection is being dropped.
    bool closed ABSL_GUARDED_BY(mu) = true;
    std::deque<Sent> awaiting ABSL_GUARDED_BY(mu);  // in the order written
  };

  class HeldBack;
  // Writes cmds[0..n) in one write (see SubmitAll), or holds them back in
  // the calling thread's CoalescingScope. REQUIRES: n > 0.
  absl::Status Write(Command* const* cmds, size_t n);
  // Writes cmds[0..n) in one write now.
  absl::Status WriteNow(Command* const* cmds, size_t n);
  void Run(size_t index);
  // Reads and delivers the replies on `ctx` until the connection must be
  // dropped (returns why) or the pool stops with nothing awaited (OK).
  absl::Status Serve(Connection& conn, redisContext* ctx);
  void ConnectionLost(const absl::Status& why);
  bool AllConnectedOrStopped() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  const ConnectionOptions options_;
  const std::vector<Script*> scripts_;
  const absl::Duration backoff_min_;
  const absl::Duration backoff_max_;
  std::atomic<size_t> next_address_{0};
  std::atomic<size_t> next_connection_{0};
  std::atomic<bool> stopping_{false};
  int stop_fd_ = -1;  // an eventfd, readable once Stop() was called
  std::vector<std::unique_ptr<Connection>> connections_;

  mutable absl::Mutex mu_;
  absl::CondVar state_cv_;  // backoff waits and WaitAllConnected
  bool stop_ ABSL_GUARDED_BY(mu_) = false;
  int connected_ ABSL_GUARDED_BY(mu_) = 0;
  bool outage_logged_ ABSL_GUARDED_BY(mu_) = false;
  absl::Status last_error_ ABSL_GUARDED_BY(mu_);
  std::vector<std::thread> threads_;  // started last
};

}  // namespace lockd::redis

#endif  // LOCKD_BACKENDS_REDIS_COMMAND_POOL_H_
