// The MySQL/MariaDB backend: every lock is a row in a table of a MySQL or
// MariaDB database, so any number of lockd replicas can share the locks.
//
// Storage (created or upgraded by NewMysqlBackend; see mysql_schema.h):
//   <prefix>locks   one row per held name (or one with waiters), PRIMARY KEY
//                   (ns, name): its kind; for an exclusive lock its one
//                   holder (owner, hold count, fencing token, the owner's
//                   last request id, `expires_at DATETIME(6)`); until when
//                   it may have a queue.
//   <prefix>holders one row per SHARED or semaphore holder, PRIMARY KEY (ns,
//                   name, owner): mode, permits, hold count, token, its own
//                   `expires_at`, last request id.
//   <prefix>queue   one entry per owner waiting on a name through a replica,
//                   in arrival order, with a lifetime the replica extends.
//   <prefix>fences  one row per lock name: its fencing-token counter (bumped
//                   in the grant's transaction, never reset by a release or
//                   the sweeper) and the last freeing release's request id.
//   <prefix>replicas one row per live lockd replica (ReplicaPresence beats).
//   <prefix>meta    schema version and the token floor of collected fences.
// Why exclusive holders stay in the locks row: the uncontended exclusive
// acquire and release keep exactly the statements of an exclusive-only
// layout (a name without a row has no holders and no queue, so the acquire
// looks nowhere else; the release is one DELETE). One set of rules still
// holds: the locks row is every name's header, locked first by every
// transaction, and says where its holders are.
// Acquire, Release and Renew are each one CALL of a stored procedure (one
// round trip, one short InnoDB transaction under READ COMMITTED) that
// applies every rule of backends/backend.h "Kinds". RenewMany (a session's
// renewals) is batched across calls: a SELECT and an UPDATE per 500
// exclusive holds, run ahead of queued work; a shared or semaphore hold is
// renewed with the renew procedure (mysql_renew_many.h).
//
// Guarantees: everything in backends/backend.h. Leases are measured by the
// database clock only (NOW(6) with the session time zone pinned to UTC),
// each holder's on its own. Fencing tokens strictly increase per name, over
// every mode, across releases, expiry, lockd restarts and database restarts
// (they are stored durably). A sweeper on every replica deletes expired rows
// and holders, never a live one: each DELETE re-checks `expires_at < NOW(6)`
// on the locked row. A repeated Release whose first try freed the caller's
// hold answers released=true for release_memory (the last such release of
// the name), even after another owner took the lock meanwhile.
//
// Waiting: MySQL cannot notify, so parked Acquires are retried. FIFO across
// modes and replicas comes from the queue table, which admission consults:
// while another replica is live (backends/common/replica_presence.h), a call
// that may wait gets its owner's entry on this replica when its first
// attempt is not granted; the head's polls extend this replica's entries
// (every quarter of their 2 s lifetime), a grant deletes the entry, and a
// wait that ends otherwise deletes it at once (a dead replica's lapse). A
// replica orders its own waiters (the WaitEngine), and its place in the
// database's queue is its earliest entry. A release through this replica
// hands an exclusive lock to the first local waiter (an exclusive acquire)
// inside the release's own transaction when no other replica's waiter
// queued first; otherwise the first waiter of each lock re-tries with capped,
// jittered exponential backoff (initial_retry .. max_retry) and just after
// the holder's lease ends.
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
