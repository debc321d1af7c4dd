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
// round trip, one short InnoDB transaction under READ COMMITTED). RenewMany
// (a session's renewals) is batched across calls: a SELECT and an UPDATE per
// 500 holds, run ahead of queued work (mysql_renew_many.h).
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
#include "backends/mysql/mysql_options.h"

namespace lockd {

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
