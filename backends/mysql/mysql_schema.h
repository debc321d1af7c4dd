// The MySQL backend's schema: table and stored-procedure names for a table
// prefix, the SQL that creates them, and the start-up step that creates or
// upgrades them.
//
// Tables (InnoDB, binary strings so names round-trip byte for byte and sort
// bytewise):
//   <p>meta    (k, v): `schema_version` and `fence_floor`.
//   <p>locks   one row per held (or expired, not yet swept) lock, PRIMARY KEY
//              (ns, name); KEY (expires_at) for the sweeper.
//   <p>fences  one row per lock name: `token`, the last token granted; the
//              request id of the last freeing release (`freed_*`).
//   <p>demand  per lock and replica whose waiters poll it while another
//              owner holds it: since when, and until when (renewed by the
//              polls). Releases read it so that replicas take turns.
// Procedures (SQL SECURITY INVOKER; the name ends in a hash of the body, so a
// changed body gets a new name and replicas of different versions coexist):
//   <p>acquire_<h>(ns, name, owner, ttl_us, request_id, may_take, poll,
//                  replica, demand_us, clear_demand)
//   <p>release_<h>(ns, name, owner, request_id, remember_us, next_owner,
//                  next_ttl_us, next_request_id, replica, slice_us,
//                  clear_demand, acquire_request_id, token)
//   <p>renew_<h>(ns, name, owner, ttl_us, token)
//   <p>collect_<h>(retention_us, batch)   fence garbage collection
// Each returns one row; see the kAcquire*/kRelease*/kRenew* outcome codes.
// A non-zero token scopes release and renew to the owner's hold with that
// token (compared under the row lock); 0 means any hold of the owner.
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
// acquire: (outcome, owner, hold_count, token, micros) where micros is the
// granted lease for kAcquireGranted/kAcquireReplayed and the holder's
// remaining lease for kAcquireHeld.
inline constexpr int kAcquireHeld = 0;      // held by another owner: not granted
inline constexpr int kAcquireGranted = 1;   // granted or re-entered
inline constexpr int kAcquireReplayed = 2;  // repeat of the owner's last request id
inline constexpr int kAcquireDeferred = 3;  // free, but may_take = 0: not taken
// release: (outcome, hold_count, next_token, yielded): next_token is the token
// granted to next_owner when the release handed the lock over (else 0);
// yielded is 1 when it freed the lock instead because another replica's
// waiters have waited longer than slice_us.
inline constexpr int kReleaseDecremented = 0;
inline constexpr int kReleaseFreed = 1;
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

class MysqlSchema {
 public:
  // The current layout version, stored in <p>meta.schema_version.
  static constexpr int kVersion = 1;

  // kInvalidArgument unless `prefix` is [A-Za-z0-9_]{0,40}.
  static absl::StatusOr<MysqlSchema> ForPrefix(absl::string_view prefix);

  // Backquoted identifiers.
  const std::string& locks() const { return locks_; }
  const std::string& fences() const { return fences_; }
  const std::string& meta() const { return meta_; }
  const std::string& demand() const { return demand_; }
  const std::string& acquire_proc() const { return acquire_proc_; }
  const std::string& release_proc() const { return release_proc_; }
  const std::string& renew_proc() const { return renew_proc_; }
  const std::string& collect_proc() const { return collect_proc_; }

  // CREATE TABLE IF NOT EXISTS statements, in order.
  std::vector<std::string> CreateTables() const;
  // (unquoted procedure name, CREATE PROCEDURE statement) pairs.
  std::vector<std::pair<std::string, std::string>> CreateProcedures() const;

 private:
  MysqlSchema() = default;
  std::string prefix_;
  std::string locks_, fences_, meta_, demand_;
  std::string acquire_proc_, release_proc_, renew_proc_, collect_proc_;
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
