// The Redis client under the redis backend, part one: connection set-up
// (AUTH, SELECT, script loading), address parsing, and the one translation of
// hiredis errors into absl::Status. Built on hiredis 0.14's synchronous API.
// The pool of pipelining command connections is command_pool.h, the pub/sub
// connection subscriber.h; both build on this.
//
// Internal to backends/redis; the backend's contract is redis_backend.h.

#ifndef LOCKD_BACKENDS_REDIS_REDIS_CLIENT_H_
#define LOCKD_BACKENDS_REDIS_REDIS_CLIENT_H_

#include <hiredis/hiredis.h>

#include <cstdint>
#include <initializer_list>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "backends/common/host_ports.h"

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
// the operation and the lock (e.g. `acquire of lock "a" in namespace "b"`, as the other backends
// word it).
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

using Endpoint = HostPort;

// Parses "host:port[,host:port...]" ("[v6addr]:port" allowed; see
// backends/common/host_ports.h). Errors are kInvalidArgument naming
// redis.addresses.
absl::StatusOr<std::vector<Endpoint>> ParseAddresses(absl::string_view text);

// Sentinel mode (sentinel.h): how to ask the Sentinels for the primary.
struct SentinelOptions {
  std::string master_name;  // the master set (SENTINEL get-master-addr-by-name)
  std::string username;     // ACL user for the Sentinels
  std::string password;     // secret; empty: no AUTH to the Sentinels
};

struct ConnectionOptions {
  // Tried in order; the first that works is used. In sentinel mode these are
  // the Sentinels, asked in order for the primary.
  std::vector<Endpoint> addresses;
  std::optional<SentinelOptions> sentinel;  // set: sentinel mode
  std::string username;                     // ACL user; empty: AUTH with the password only
  std::string password;                     // secret; empty: no AUTH
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
// In sentinel mode the addresses are Sentinels: each in turn is asked for the
// primary's address (sentinel.h), and the connection goes to that primary,
// which must answer ROLE with "master" (a replica, e.g. during a failover,
// counts as unreachable); `*next_address` is then the Sentinel that answered.
// Blocks up to twice as long per Sentinel.
// Errors: kUnauthenticated ("authentication failed") if the server (or a
// Sentinel) refuses the credentials or requires some; kUnavailable if no
// address can be reached (or no primary, in sentinel mode);
// kInvalidArgument naming redis.sentinel_master if the Sentinels do not know
// the master set; kInternal for unexpected replies.
absl::StatusOr<ContextPtr> Connect(const ConnectionOptions& options,
                                   const std::vector<Script*>& scripts, size_t* next_address);

// --- For the command pool, the subscriber and sentinel.cc -----------------

// Runs one command on `c` and waits for its reply (null on a connection
// error).
ReplyPtr Call(redisContext* c, std::initializer_list<absl::string_view> args);

// Opens a connection to `e` (connect_timeout), sets the command timeout and
// TCP keepalive, and AUTHs with `username`/`password` (empty password: no
// AUTH). Errors as Connect's, their messages starting with `where` ("redis
// host:port", "redis sentinel host:port").
absl::StatusOr<ContextPtr> OpenConnection(const ConnectionOptions& o, const Endpoint& e,
                                          absl::string_view where, absl::string_view username,
                                          absl::string_view password);

// The text of a string, status or error reply ("" if it has none).
absl::string_view ReplyText(const redisReply* r);

// True for a NOSCRIPT error reply (the server forgot the script: resend as
// EVAL).
bool IsNoScript(const redisReply* r);

// " (host:port)" of `c`'s server; empty if unknown (`c` may be null).
std::string ServerOf(const redisContext* c);

// "redis timed out (host:port)" and the like: why `c`'s connection failed
// (`c` may be null).
std::string ConnectionFailure(const redisContext* c);

// "redis host:port", for log lines.
std::string Where(const Endpoint& e);

// Blocks SIGPIPE on the calling thread for good, so that a write to a socket
// the server closed fails with EPIPE instead of killing the process. For
// threads that write with hiredis (which uses plain write(2)).
void BlockSigpipeOnThisThread();

// A random duration in [d/2, d): spreads reconnect attempts. Thread-safe.
absl::Duration Jitter(absl::Duration d);

}  // namespace lockd::redis

#endif  // LOCKD_BACKENDS_REDIS_REDIS_CLIENT_H_
