// The Redis client under the redis backend: connection set-up (AUTH, SELECT,
// script loading), a pool of pipelining command connections, and one pub/sub
// subscriber connection. Built on hiredis 0.14's synchronous API, driven by
// threads owned here, so that no caller ever blocks on Redis.
//
// Internal to backends/redis; the backend's contract is redis_backend.h.

#ifndef LOCKD_BACKENDS_REDIS_REDIS_CLIENT_H_
#define LOCKD_BACKENDS_REDIS_REDIS_CLIENT_H_

#include <hiredis/hiredis.h>

#include <atomic>
#include <cstdint>
#include <deque>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/functional/any_invocable.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"

namespace lockd::redis {

struct ReplyDeleter {
  void operator()(redisReply* r) const { freeReplyObject(r); }
};
using ReplyPtr = std::unique_ptr<redisReply, ReplyDeleter>;

struct ContextDeleter {
  void operator()(redisContext* c) const { redisFree(c); }
};
using ContextPtr = std::unique_ptr<redisContext, ContextDeleter>;

// The one translation of hiredis failures into absl::Status. `context` names
// the operation and the lock (e.g. `acquire lock "a" in namespace "b"`).
//  - reply == nullptr: the connection failed (I/O error, EOF, timeout):
//    kUnavailable, with hiredis' reason from `c` (which may be null).
//  - an error reply: kUnavailable for server states that a retry can outlive
//    (LOADING, BUSY, READONLY, MASTERDOWN, TRYAGAIN, CLUSTERDOWN, MOVED, ASK,
//    NOAUTH, WRONGPASS, OOM, NOREPLICAS, EXECABORT); kInternal otherwise (a
//    script bug, an unexpected key type).
//  - any other reply: kInternal ("unexpected reply").
// Messages never contain secrets (hiredis and Redis do not echo passwords).
absl::Status RedisError(absl::string_view context, const redisContext* c, const redisReply* reply);

// True for error replies after which the connection should be dropped and
// re-established (it points at a replica or a loading server).
bool IsConnectionError(const redisReply* reply);

struct Endpoint {
  std::string host;
  int port = 0;
};

// Parses "host:port[,host:port...]" ("[v6addr]:port" allowed). Errors are
// kInvalidArgument naming redis.addresses.
absl::StatusOr<std::vector<Endpoint>> ParseAddresses(absl::string_view text);

struct ConnectionOptions {
  std::vector<Endpoint> addresses;  // tried in order; the first that works is used
  std::string username;             // ACL user; empty: AUTH with the password only
  std::string password;             // secret; empty: no AUTH
  int db = 0;
  absl::Duration connect_timeout = absl::Seconds(1);
  absl::Duration command_timeout = absl::Seconds(1);
};

// A Lua script run by EVALSHA, with EVAL as the fallback on NOSCRIPT.
// Immutable once its sha is set (before any pool uses it).
struct Script {
  std::string name;  // for messages
  std::string body;
  std::string sha;  // filled by Connect(..., scripts)
};

// Opens one ready connection: connects (connect_timeout), sets the command
// timeout and TCP keepalive, AUTHs, SELECTs the db, PINGs, and SCRIPT LOADs
// `scripts` (filling in an empty Script::sha; an existing one must match).
// Tries options.addresses in order starting at `*next_address` and leaves
// there the index of the address it used. Blocks for up to
// connect_timeout + 4 * command_timeout per address.
// Errors: kUnauthenticated ("authentication failed") if the server refuses
// the credentials or requires some; kUnavailable if no address can be
// reached; kInternal for unexpected replies.
absl::StatusOr<ContextPtr> Connect(const ConnectionOptions& options,
                                   const std::vector<Script*>& scripts, size_t* next_address);

using ReplyCallback = absl::AnyInvocable<void(absl::StatusOr<ReplyPtr>) &&>;

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
};

// A fixed number of connections, each owned by one worker thread. Workers
// take every queued command (up to a batch limit) at once and pipeline them:
// one write, then the replies in order. A connection that fails is dropped;
// its worker reconnects with capped exponential backoff (re-loading the
// scripts). Commands never wait for a connection: while no connection is up,
// Submit fails at once.
//
// Thread-safe: the queue and counters are guarded by one mutex; each
// connection is touched only by its worker.
class CommandPool {
 public:
  // Starts `size` workers; each connects on its own thread. `scripts` must
  // have their sha set and outlive the pool.
  CommandPool(ConnectionOptions options, std::vector<Script*> scripts, int size,
              absl::Duration backoff_min, absl::Duration backoff_max);
  // Stop()s.
  ~CommandPool();
  CommandPool(const CommandPool&) = delete;
  CommandPool& operator=(const CommandPool&) = delete;

  // Queues `cmd`. OK: cmd was moved from and cmd.done will run exactly once
  // on a worker thread. Otherwise `cmd` is untouched and the caller must
  // finish it: kUnavailable when no connection is up (with the last
  // connection error), ShuttingDownError() after Stop(). Never blocks, never
  // runs a callback inline.
  absl::Status Submit(Command& cmd);
  // Queues `cmd` and, right behind it, `then`, so that both usually go out
  // in one write on one connection and run in that order. Same contract as
  // Submit for both (on failure neither was queued).
  absl::Status Submit(Command& cmd, Command& then);

  // Makes every worker drop its connection after its current batch and
  // reconnect at once (used when the subscriber saw the server go away, so
  // that idle connections to a dead server are not used again).
  void ResetConnections();

  // Number of workers with a working connection.
  int connected() const;
  // Why the last connection attempt or command failed (OK if none did).
  absl::Status last_error() const;
  // Blocks until every worker is connected (true) or `timeout` passes.
  bool WaitAllConnected(absl::Duration timeout) const;

  // Fails queued commands with ShuttingDownError(), lets in-flight batches
  // finish (at most command_timeout), and joins the workers. Idempotent.
  void Stop();

 private:
  void Run(size_t index);
  // Sends `batch` on `c` and delivers every reply. Returns non-OK if the
  // connection must be dropped.
  absl::Status Execute(redisContext* c, std::vector<Command>& batch);
  void ConnectionLost(const absl::Status& why);
  bool AllConnectedOrStopped() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  const ConnectionOptions options_;
  const std::vector<Script*> scripts_;
  const absl::Duration backoff_min_;
  const absl::Duration backoff_max_;
  std::atomic<size_t> next_address_{0};

  mutable absl::Mutex mu_;
  absl::CondVar work_cv_;   // idle connected workers wait here for commands
  absl::CondVar state_cv_;  // backoff waits and WaitAllConnected
  bool stop_ ABSL_GUARDED_BY(mu_) = false;
  uint64_t reset_gen_ ABSL_GUARDED_BY(mu_) = 0;
  int connected_ ABSL_GUARDED_BY(mu_) = 0;
  bool outage_logged_ ABSL_GUARDED_BY(mu_) = false;
  absl::Status last_error_ ABSL_GUARDED_BY(mu_);
  std::deque<Command> queue_ ABSL_GUARDED_BY(mu_);
  std::vector<std::thread> threads_;  // started last
};

// One connection in subscribe mode, driven by one thread with poll(2), for
// release notifications. Callers declare which channels they want; the
// subscriber keeps them subscribed across reconnects and reports when each
// subscription is in force.
//
// Thread-safe: the channel table is guarded by one mutex; the connection is
// touched only by the thread. Listener calls are made on that thread with no
// lock held.
class Subscriber {
 public:
  class Listener {
   public:
    virtual ~Listener() = default;
    // `channel` is now subscribed (after Subscribe(), and again after every
    // reconnect): any message published to it from now on will be delivered.
    virtual void OnSubscribed(const std::string& channel) = 0;
    // `message` was published to `channel`, which is wanted and subscribed.
    virtual void OnMessage(const std::string& channel, absl::string_view message) = 0;
    // The connection is gone: no subscription is in force until the next
    // OnSubscribed for it.
    virtual void OnConnectionLost(const absl::Status& why) = 0;
  };

  // `listener` must outlive the subscriber. Call Start() to connect.
  Subscriber(ConnectionOptions options, Listener* listener, absl::Duration backoff_min,
             absl::Duration backoff_max, absl::Duration ping_interval);
  ~Subscriber();
  Subscriber(const Subscriber&) = delete;
  Subscriber& operator=(const Subscriber&) = delete;

  // Starts the thread, which connects (and reconnects) on its own.
  absl::Status Start();

  // Wants `channel` (idempotent). OnSubscribed follows once it is in force.
  void Subscribe(const std::string& channel);
  // No longer wants `channel` (idempotent); no OnSubscribed/OnMessage for it
  // is made after this returns, unless it is wanted again.
  void Unsubscribe(const std::string& channel);

  bool connected() const;
  absl::Status last_error() const;
  // Blocks until connected (true) or `timeout` passes.
  bool WaitConnected(absl::Duration timeout) const;

  // Closes the connection and joins the thread. Idempotent.
  void Stop();

 private:
  struct Channel {
    bool want = false;    // the listener wants it
    bool active = false;  // subscribed and confirmed, and still wanted
    int pending = 0;      // SUBSCRIBE/UNSUBSCRIBE sent, not yet confirmed
  };
  struct Op {
    bool subscribe;
    std::string channel;
  };

  void Run();
  void Wake();
  // Waits up to `d` for a wake-up; false if stopping.
  bool Sleep(absl::Duration d);
  absl::Status Flush(redisContext* c);
  absl::Status HandleReply(const redisReply* r);
  void Disconnected(const absl::Status& why);
  bool ConnectedOrStopped() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  const ConnectionOptions options_;
  Listener* const listener_;
  const absl::Duration backoff_min_;
  const absl::Duration backoff_max_;
  const absl::Duration ping_interval_;
  int wake_fd_ = -1;

  mutable absl::Mutex mu_;
  bool stop_ ABSL_GUARDED_BY(mu_) = false;
  bool connected_ ABSL_GUARDED_BY(mu_) = false;
  absl::Status last_error_ ABSL_GUARDED_BY(mu_);
  absl::flat_hash_map<std::string, Channel> channels_ ABSL_GUARDED_BY(mu_);
  std::vector<Op> ops_ ABSL_GUARDED_BY(mu_);
  bool ping_outstanding_ = false;  // thread only
  std::thread thread_;
};

}  // namespace lockd::redis

#endif  // LOCKD_BACKENDS_REDIS_REDIS_CLIENT_H_
