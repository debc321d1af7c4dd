// The MySQL/MariaDB backend: every lock is a row in a table of a MySQL or
// MariaDB database, so any number of lockd replicas can share the locks.
//
// Storage (created or upgraded by NewMysqlBackend; see mysql_schema.h):
//   <prefix>locks   one row per held lock, PRIMARY KEY (ns, name): owner, hold
//                   count, fencing token, the owner's last request id and
//                   `expires_at DATETIME(6)`.
//   <prefix>fences  one row per lock name: its fencing-token counter (bumped
//                   in the grant's transaction, never reset by a release or
//                   the sweeper) and the last freeing release's request id.
//   <prefix>meta    schema version and the token floor of collected fences.
//   <prefix>demand  which replicas' waiters are polling which lock, since
//                   when (for taking turns).
// Acquire, Release and Renew are each one CALL of a stored procedure (one
// round trip, one short InnoDB transaction under READ COMMITTED).
//
// Guarantees: everything in backends/backend.h. Leases are measured by the
// database clock only (NOW(6) with the session time zone pinned to UTC).
// Fencing tokens strictly increase per lock across releases, expiry, lockd
// restarts and database restarts (they are stored durably). A sweeper on
// every replica deletes expired rows, never a live one: the DELETE re-checks
// `expires_at < NOW(6)` on the locked row. A repeated Release whose first
// try freed the lock answers released=true for release_memory, even after
// another owner took the lock meanwhile.
//
// Waiting: MySQL cannot notify, so parked Acquires are retried. A release
// through this replica hands the lock to the first local waiter inside the
// release's own transaction; otherwise the first waiter of each lock re-tries
// with capped, jittered exponential backoff (initial_retry .. max_retry) and
// just after the holder's lease ends. Waiters of one replica are granted in
// arrival order; across replicas there is no order, but replicas take turns
// on a contended lock (fair_slice), so none is starved.
//
// Threading: thread-safe. The blocking C client runs on `pool_size` worker
// threads, one connection each; Backend methods only enqueue work. Callbacks
// run on those workers or on the backend's timer thread.

#ifndef LOCKD_BACKENDS_MYSQL_MYSQL_BACKEND_H_
#define LOCKD_BACKENDS_MYSQL_MYSQL_BACKEND_H_

#include <cstddef>
#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "backends/backend.h"

namespace lockd {

enum class MysqlSslMode {
  kDisabled,        // plain TCP
  kRequired,        // TLS, server certificate not verified
  kVerifyIdentity,  // TLS, certificate and host name verified (needs ssl_ca)
};

struct MysqlOptions {
  // Where the server is: `socket` (a Unix socket path) wins over host:port.
  std::string host = "127.0.0.1";
  int port = 3306;
  std::string socket;

  std::string user = "lockd";
  std::string password;  // secret: never logged, never put in a status
  std::string database = "lockd";
  // Prefix of every table and procedure name: [A-Za-z0-9_]{0,40}. Several
  // deployments can share one database with different prefixes.
  std::string table_prefix = "lockd_";

  // Connections, and worker threads (one per connection).
  size_t pool_size = 8;
  // How often this replica deletes expired rows.
  absl::Duration sweep_interval = absl::Seconds(1);

  // Client timeouts. The C client counts read and write timeouts in whole
  // seconds; they are rounded up.
  absl::Duration connect_timeout = absl::Seconds(2);
  absl::Duration read_timeout = absl::Seconds(2);
  absl::Duration write_timeout = absl::Seconds(2);

  MysqlSslMode ssl_mode = MysqlSslMode::kDisabled;
  std::string ssl_ca;    // CA certificate file (PEM)
  std::string ssl_cert;  // client certificate file, for X.509 authentication
  std::string ssl_key;   // client key file

  // Parked Acquire calls allowed at once; more get kResourceExhausted.
  size_t max_waiters = 100000;
  // Backoff of a parked waiter that polls the database: starts at
  // initial_retry, doubles up to max_retry, each delay jittered by +-25%.
  absl::Duration initial_retry = absl::Milliseconds(2);
  absl::Duration max_retry = absl::Milliseconds(50);
  // Taking turns between replicas: when a release through this replica would
  // hand the lock to its next local waiter but waiters on another replica have
  // wanted it for longer than this, the lock is freed instead and local
  // waiters hold back briefly, so the other replica gets it. Zero: replicas
  // do not take turns (a busy replica can keep a lock to itself).
  absl::Duration fair_slice = absl::Milliseconds(200);
  // How long a Release that freed a lock is remembered for request_id
  // retries.
  absl::Duration release_memory = absl::Minutes(5);
  // A lock name's fencing counter row is deleted once no grant used it for
  // this long; the next grant of that name continues above every collected
  // counter (the floor in <prefix>meta), so tokens still only grow. Zero
  // keeps counters forever.
  absl::Duration fence_retention = absl::Hours(24);
};

// Connects, creates or upgrades the schema (idempotent; safe when several
// replicas start at once: serialized with GET_LOCK), starts the workers and
// the sweeper.
// Errors: kInvalidArgument for unusable options (naming the option);
// kUnavailable if the server cannot be reached; kUnauthenticated if it
// refuses the credentials; kFailedPrecondition if the database holds a newer
// schema than this lockd knows or lacks a privilege it needs. Messages never
// contain the password.
absl::StatusOr<std::unique_ptr<Backend>> NewMysqlBackend(const MysqlOptions& options);

}  // namespace lockd

#endif  // LOCKD_BACKENDS_MYSQL_MYSQL_BACKEND_H_
