// The Redis client under the redis backend: connection set-up (AUTH, SELECT,
// script loading), a pool of pipelining command connections, and one pub/sub
// subscriber connection. Built on hiredis 0.14's synchronous API; replies are
// read by threads owned here, so that no caller ever waits for Redis to
// answer (a caller only writes its command to a socket).
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

  // Writes `cmd` to a connection. OK: cmd was moved from and cmd.done will
  // run exactly once on a pool thread. Otherwise `cmd` is untouched and the
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

  absl::Status Write(Command& cmd, Command* then);
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
