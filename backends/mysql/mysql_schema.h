// The MySQL backend's schema: table and stored-procedure names for a table
// prefix, the SQL that creates them, and the start-up step that creates or
// upgrades them.
//
// Tables (InnoDB, binary strings so names round-trip byte for byte and sort
// bytewise):
//   <p>meta    (k, v): `schema_version` and `fence_floor`.
//   <p>locks   one row per name that is held (or expired, not yet swept) or
//              has a queue, PRIMARY KEY (ns, name); KEY (expires_at) for the
//              sweeper. `kind` says where the holders are: 0, an exclusive
//              lock whose one holder is the row itself (owner, hold count,
//              token, lease, last request: the layout of version 1); 1, a
//              shared lock, and 2, a semaphore of `lim` permits, whose holders
//              are <p>holders rows (the row then has owner '', the newest
//              grant's token and the latest end of its holders' leases).
//              `queue_until`: until when the name may have live <p>queue
//              entries (a free row, owner '', keeps it while they wait).
//   <p>holders one row per SHARED or semaphore holder, PRIMARY KEY (ns, name,
//              owner): mode, permits, hold count, token, its own lease and
//              last request; KEY (expires_at) for the sweeper.
//   <p>queue   one entry per owner waiting on a name through a replica, in
//              arrival order (`id`): mode, permits, limit, and `until`, which
//              the replica extends while the owner's calls wait, so a dead
//              replica's entries lapse. Admission consults it.
//   <p>replicas one row per lockd replica using the database, live until
//              `until` (ReplicaPresence beats extend it): a replica writes
//              queue entries only while it sees another live one.
//   <p>fences  one row per lock name: `token`, the last token granted; the
//              request id of the last freeing release (`freed_*`).
//   <p>demand  (version 1's turn-taking between replicas; no longer written,
//              kept for replicas of version 1 during an upgrade and swept.)
// Version 2 added kind, lim and queue_until to <p>locks and the holders and
// queue tables; EnsureSchema migrates a version 1 database in place.
//
// Procedures (SQL SECURITY INVOKER; the name ends in a hash of the body, so a
// changed body gets a new name and replicas of different versions coexist):
//   <p>acquire_<h>(ns, name, owner, ttl_us, request_id, may_take, poll,
//                  replica, queue_us, refresh, mode, lim, permits)
//   <p>release_<h>(ns, name, owner, request_id, remember_us, next_owner,
//                  next_ttl_us, next_request_id, replica, acquire_request_id,
//                  token)
//   <p>renew_<h>(ns, name, owner, ttl_us, token)
//   <p>force_<h>(ns, name, token, seen_token)   ForceRelease
//   <p>collect_<h>(retention_us, batch)   fence garbage collection
// Each returns one row; see the kAcquire*/kRelease*/kRenew*/kForce* outcome
// codes. A non-zero token scopes release and renew to the owner's hold with
// that token (compared under the row lock); 0 means any hold of the owner.
//
// Admission (acquire, in one transaction under the name's locks row lock):
// the kinds rules of backends/backend.h. Waiting ahead of a call are the
// live queue entries of other owners before its owner's entry on its
// replica (all of them if it has none). EXCLUSIVE is admitted when nobody
// holds and nobody waits ahead; SHARED when nobody holds EXCLUSIVE and only
// SHARED acquires wait ahead; a semaphore acquire when only semaphore
// acquires wait ahead and their permits, the held ones and its own fit in
// the limit. A call that waits (queue_us > 0) and is not granted gets (or
// keeps) its owner's entry; a grant deletes it. Lock order inside every
// procedure: the locks row, then holders rows, then queue entries, then the
// fences row.
//
// Thread-compatible value type.

#ifndef LOCKD_BACKENDS_MYSQL_MYSQL_SCHEMA_H_
#define LOCKD_BACKENDS_MYSQL_MYSQL_SCHEMA_H_

#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "backends/mysql/mysql_client.h"

namespace lockd {

// Outcome codes: the first column of each procedure's row.
// acquire: (outcome, owner, hold_count, token, micros, kind, extra) where
// micros is the granted lease for kAcquireGranted/kAcquireReplayed and the
// (newest) holder's remaining lease for kAcquireHeld; kind is the name's
// (0 exclusive, 1 shared, 2 semaphore) and extra its limit, or for
// kAcquirePermitsMismatch the permits held.
inline constexpr int kAcquireHeld = 0;      // held by others: not granted
inline constexpr int kAcquireGranted = 1;   // granted or re-entered
inline constexpr int kAcquireReplayed = 2;  // repeat of the owner's last request id
inline constexpr int kAcquireDeferred = 3;  // could be granted, but may_take = 0
inline constexpr int kAcquireQueued = 4;    // others wait ahead: not granted
inline constexpr int kAcquireKindMismatch = 5;
inline constexpr int kAcquireUpgradeWouldBlock = 6;
inline constexpr int kAcquirePermitsMismatch = 7;
// release: (outcome, hold_count, next_token, remaining): next_token is the
// token granted to next_owner when the release handed the lock over (else 0);
// remaining is the number of other SHARED or semaphore holders left.
inline constexpr int kReleaseDecremented = 0;
inline constexpr int kReleaseFreed = 1;          // the caller's hold is gone
inline constexpr int kReleaseReplayed = 2;       // repeat of a decrementing release
inline constexpr int kReleaseReplayedFreed = 3;  // repeat of the freeing release
inline constexpr int kReleaseOtherOwner = 4;
inline constexpr int kReleaseFree = 5;
inline constexpr int kReleaseNothingToUndo = 6;  // acquire_request_id matched no hold
inline constexpr int kReleaseOtherHold = 7;      // the owner's hold has another token
// renew: (outcome, token)
inline constexpr int kRenewRenewed = 1;
inline constexpr int kRenewOtherOwner = 4;
inline constexpr int kRenewFree = 5;
inline constexpr int kRenewOtherHold = 7;  // the owner's hold has another token
// force: (outcome)
inline constexpr int kForceFree = 0;      // nobody held it
inline constexpr int kForceFreed = 1;     // the holder(s) named are gone
inline constexpr int kForceChanged = 2;   // a grant since seen_token: look again
inline constexpr int kForceNoHolder = 3;  // no live holder has that token

class MysqlSchema {
 public:
  // The current layout version, stored in <p>meta.schema_version.
  static constexpr int kVersion = 2;

  // kInvalidArgument unless `prefix` is [A-Za-z0-9_]{0,40}.
  static absl::StatusOr<MysqlSchema> ForPrefix(absl::string_view prefix);

  // Backquoted identifiers.
  const std::string& locks() const { return locks_; }
  const std::string& fences() const { return fences_; }
  const std::string& meta() const { return meta_; }
  const std::string& demand() const { return demand_; }
  const std::string& holders() const { return holders_; }
  const std::string& queue() const { return queue_; }
  const std::string& replicas() const { return replicas_; }
  const std::string& acquire_proc() const { return acquire_proc_; }
  const std::string& release_proc() const { return release_proc_; }
  const std::string& renew_proc() const { return renew_proc_; }
  const std::string& collect_proc() const { return collect_proc_; }
  const std::string& force_proc() const { return force_proc_; }

  // CREATE TABLE IF NOT EXISTS statements, in order.
  std::vector<std::string> CreateTables() const;
  // (unquoted procedure name, CREATE PROCEDURE statement) pairs.
  std::vector<std::pair<std::string, std::string>> CreateProcedures() const;

 private:
  MysqlSchema() = default;
  std::string prefix_;
  std::string locks_, fences_, meta_, demand_, holders_, queue_, replicas_;
  std::string acquire_proc_, release_proc_, renew_proc_, collect_proc_, force_proc_;
  std::vector<std::pair<std::string, std::string>> procedures_;
};

// Creates or upgrades the schema on `conn` (connected to the database):
// takes the advisory lock GET_LOCK('lockd.schema.<db>.<prefix>') so that
// replicas starting together take turns, creates missing tables, records or
// checks the schema version, creates missing procedures. Idempotent.
// Errors: as MysqlError; kFailedPrecondition if the stored version is newer
// than kVersion; kUnavailable if the advisory lock is not granted in time.
absl::Status EnsureSchema(MysqlConnection& conn, const MysqlSchema& schema,
                          absl::string_view database, absl::string_view prefix);

}  // namespace lockd

#endif  // LOCKD_BACKENDS_MYSQL_MYSQL_SCHEMA_H_
