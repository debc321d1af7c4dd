#include "backends/mysql/mysql_schema.h"

#include <algorithm>
#include <cstdint>
#include <utility>

#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_replace.h"

namespace lockd {
namespace {

// Every procedure runs one short transaction under the caller's READ
// COMMITTED isolation. The lock row is always locked before the fence row and
// the fence floor is only read when a fence row is created, so concurrent
// calls queue on row locks instead of deadlocking; the rare duplicate-key race
// of two first grants of a new name fails one CALL (the caller retries it).
// On any error the handler rolls back before re-raising, so a failed CALL
// never leaves a transaction open on the connection.

constexpr char kAcquireBody[] = R"sql(
(IN p_ns VARBINARY(64), IN p_name VARBINARY(512), IN p_owner VARBINARY(256),
 IN p_ttl_us BIGINT, IN p_rid VARBINARY(128), IN p_may_take TINYINT, IN p_poll TINYINT,
 IN p_replica VARBINARY(32), IN p_demand_us BIGINT, IN p_clear_demand TINYINT)
MODIFIES SQL DATA SQL SECURITY INVOKER
proc: BEGIN
  DECLARE v_missing TINYINT DEFAULT 0;
  DECLARE v_found TINYINT DEFAULT 0;
  DECLARE v_owner VARBINARY(256);
  DECLARE v_hold INT UNSIGNED;
  DECLARE v_token BIGINT UNSIGNED;
  DECLARE v_floor BIGINT UNSIGNED;
  DECLARE v_expires DATETIME(6);
  DECLARE v_kind TINYINT UNSIGNED;
  DECLARE v_rid VARBINARY(128);
  DECLARE v_last_hold INT UNSIGNED;
  DECLARE v_last_ttl BIGINT;
  DECLARE v_now DATETIME(6);
  DECLARE CONTINUE HANDLER FOR NOT FOUND SET v_missing = 1;
  DECLARE EXIT HANDLER FOR SQLEXCEPTION BEGIN ROLLBACK; RESIGNAL; END;

  IF p_poll = 1 THEN
    -- A waiter polling: a lock held by another owner (or free, when it may
    -- not take it) is answered from a plain read, without the row lock that
    -- the holder's release would have to queue behind.
    SELECT owner, hold_count, token, expires_at INTO v_owner, v_hold, v_token, v_expires
      FROM {locks} WHERE ns = p_ns AND name = p_name;
    SET v_now = NOW(6);
    IF v_missing = 0 AND v_expires > v_now AND v_owner <> p_owner THEN
      {note_demand}
      SELECT 0, v_owner, v_hold, v_token, TIMESTAMPDIFF(MICROSECOND, v_now, v_expires);
      LEAVE proc;
    END IF;
    IF p_may_take = 0 AND (v_missing = 1 OR v_expires <= v_now) THEN
      SELECT 3, '', 0, 0, 0;
      LEAVE proc;
    END IF;
    SET v_missing = 0;
  END IF;

  START TRANSACTION;
  SELECT owner, hold_count, token, expires_at, last_kind, last_request_id, last_hold_count,
         last_ttl_us
    INTO v_owner, v_hold, v_token, v_expires, v_kind, v_rid, v_last_hold, v_last_ttl
    FROM {locks} WHERE ns = p_ns AND name = p_name FOR UPDATE;
  SET v_found = 1 - v_missing;
  SET v_now = NOW(6);
  IF v_found = 1 AND v_expires > v_now AND v_owner = p_owner THEN
    IF p_rid <> '' AND v_kind = 1 AND v_rid = p_rid THEN
      COMMIT;
      SELECT 2, v_owner, v_last_hold, v_token, v_last_ttl;
    ELSE
      UPDATE {locks}
         SET hold_count = v_hold + 1, expires_at = TIMESTAMPADD(MICROSECOND, p_ttl_us, v_now),
             last_kind = IF(p_rid = '', 0, 1), last_request_id = p_rid,
             last_hold_count = v_hold + 1, last_ttl_us = p_ttl_us
       WHERE ns = p_ns AND name = p_name;
      COMMIT;
      SELECT 1, v_owner, v_hold + 1, v_token, p_ttl_us;
    END IF;
  ELSEIF v_found = 1 AND v_expires > v_now THEN
    COMMIT;
    SELECT 0, v_owner, v_hold, v_token, TIMESTAMPDIFF(MICROSECOND, v_now, v_expires);
  ELSEIF p_may_take = 0 THEN
    COMMIT;
    SELECT 3, '', 0, 0, 0;
  ELSE
    {bump_fence}
    IF v_found = 1 THEN
      UPDATE {locks}
         SET owner = p_owner, hold_count = 1, token = v_token,
             expires_at = TIMESTAMPADD(MICROSECOND, p_ttl_us, v_now),
             last_kind = IF(p_rid = '', 0, 1), last_request_id = p_rid, last_hold_count = 1,
             last_ttl_us = p_ttl_us
       WHERE ns = p_ns AND name = p_name;
    ELSE
      INSERT INTO {locks} (ns, name, owner, hold_count, token, expires_at, last_kind,
                           last_request_id, last_hold_count, last_ttl_us)
        VALUES (p_ns, p_name, p_owner, 1, v_token, TIMESTAMPADD(MICROSECOND, p_ttl_us, v_now),
                IF(p_rid = '', 0, 1), p_rid, 1, p_ttl_us);
    END IF;
    {clear_demand}
    COMMIT;
    SELECT 1, p_owner, 1, v_token, p_ttl_us;
  END IF;
END)sql";

// Sets v_token to the lock's next fencing token, inside the grant's
// transaction (after the lock row was locked). One statement in the common
// case; a name without a counter row starts above the floor of collected
// counters.
constexpr char kBumpFence[] = R"sql(
    UPDATE {fences} SET token = LAST_INSERT_ID(token + 1), granted_at = v_now
     WHERE ns = p_ns AND name = p_name;
    IF ROW_COUNT() = 0 THEN
      SET v_missing = 0;
      SELECT v INTO v_floor FROM {meta} WHERE k = 'fence_floor' LOCK IN SHARE MODE;
      SET v_token = COALESCE(v_floor, 0) + 1;
      INSERT INTO {fences} (ns, name, token, granted_at) VALUES (p_ns, p_name, v_token, v_now);
    ELSE
      SET v_token = LAST_INSERT_ID();
    END IF;)sql";

// A waiter of replica p_replica found the lock held by another owner:
// record (or keep up) that replica's demand, with the time it began waiting
// continuously. Releases on other replicas read it to take turns.
constexpr char kNoteDemand[] = R"sql(
      IF p_demand_us > 0 THEN
        INSERT INTO {demand} (ns, name, replica, since, until)
          VALUES (p_ns, p_name, p_replica, v_now, TIMESTAMPADD(MICROSECOND, p_demand_us, v_now))
          ON DUPLICATE KEY UPDATE since = IF(until < v_now, v_now, since),
                                  until = TIMESTAMPADD(MICROSECOND, p_demand_us, v_now);
      END IF;)sql";

// p_replica's waiter got the lock: its turn has come, so its demand ends.
constexpr char kClearDemand[] = R"sql(
    IF p_clear_demand = 1 THEN
      DELETE FROM {demand} WHERE ns = p_ns AND name = p_name AND replica = p_replica;
    END IF;)sql";

// Sets v_yield when another replica's waiters have wanted the lock for longer
// than p_slice_us: this replica then frees it instead of handing it to its
// own next waiter, and holds its waiters back for a moment.
constexpr char kCheckYield[] = R"sql(
      IF p_slice_us > 0 THEN
        SELECT COUNT(*) > 0 INTO v_yield FROM {demand}
         WHERE ns = p_ns AND name = p_name AND replica <> p_replica AND until > v_now
           AND since < TIMESTAMPADD(MICROSECOND, -p_slice_us, v_now);
      END IF;)sql";

constexpr char kReleaseBody[] = R"sql(
(IN p_ns VARBINARY(64), IN p_name VARBINARY(512), IN p_owner VARBINARY(256),
 IN p_rid VARBINARY(128), IN p_remember_us BIGINT, IN p_next_owner VARBINARY(256),
 IN p_next_ttl_us BIGINT, IN p_next_rid VARBINARY(128), IN p_replica VARBINARY(32),
 IN p_slice_us BIGINT, IN p_clear_demand TINYINT, IN p_arid VARBINARY(128),
 IN p_token BIGINT UNSIGNED)
MODIFIES SQL DATA SQL SECURITY INVOKER
proc: BEGIN
  DECLARE v_missing TINYINT DEFAULT 0;
  DECLARE v_owner VARBINARY(256);
  DECLARE v_hold INT UNSIGNED;
  DECLARE v_held_token BIGINT UNSIGNED;
  DECLARE v_token BIGINT UNSIGNED DEFAULT 0;
  DECLARE v_floor BIGINT UNSIGNED;
  DECLARE v_expires DATETIME(6);
  DECLARE v_kind TINYINT UNSIGNED;
  DECLARE v_rid VARBINARY(128);
  DECLARE v_last_hold INT UNSIGNED;
  DECLARE v_replay TINYINT DEFAULT 0;
  DECLARE v_yield TINYINT DEFAULT 0;
  DECLARE v_now DATETIME(6);
  DECLARE CONTINUE HANDLER FOR NOT FOUND SET v_missing = 1;
  DECLARE EXIT HANDLER FOR SQLEXCEPTION BEGIN ROLLBACK; RESIGNAL; END;

  -- The common case, a last hold given back without a request id and with
  -- nobody to hand over to, is one autocommitted statement.
  IF p_rid = '' AND p_next_owner = '' AND p_arid = '' THEN
    DELETE FROM {locks}
     WHERE ns = p_ns AND name = p_name AND owner = p_owner AND hold_count = 1
       AND (p_token = 0 OR token = p_token) AND expires_at > NOW(6);
    IF ROW_COUNT() > 0 THEN
      SET v_now = NOW(6);
      {check_yield}
      SELECT 1, 0, 0, v_yield;
      LEAVE proc;
    END IF;
  END IF;

  START TRANSACTION;
  SELECT owner, hold_count, token, expires_at, last_kind, last_request_id, last_hold_count
    INTO v_owner, v_hold, v_held_token, v_expires, v_kind, v_rid, v_last_hold
    FROM {locks} WHERE ns = p_ns AND name = p_name FOR UPDATE;
  SET v_now = NOW(6);
  IF v_missing = 0 AND v_expires > v_now AND v_owner = p_owner THEN
    IF p_arid <> '' AND
       (NOT (v_kind = 1 AND v_rid = p_arid) OR (p_token <> 0 AND v_held_token <> p_token)) THEN
      -- An undo of an Acquire that is not the owner's last request, or not
      -- of this hold.
      COMMIT;
      SELECT 6, v_hold, 0, 0;
    ELSEIF p_rid <> '' AND v_kind = 2 AND v_rid = p_rid THEN
      COMMIT;
      SELECT 2, v_last_hold, 0, 0;
    ELSEIF p_token <> 0 AND v_held_token <> p_token THEN
      -- A request for an earlier hold of the owner's.
      COMMIT;
      SELECT 7, 0, 0, 0;
    ELSEIF v_hold > 1 THEN
      UPDATE {locks}
         SET hold_count = v_hold - 1, last_kind = IF(p_rid = '', 0, 2), last_request_id = p_rid,
             last_hold_count = v_hold - 1
       WHERE ns = p_ns AND name = p_name;
      COMMIT;
      SELECT 0, v_hold - 1, 0, 0;
    ELSE
      {check_yield}
      IF p_next_owner = '' OR v_yield = 1 THEN
        DELETE FROM {locks} WHERE ns = p_ns AND name = p_name;
      ELSE
        -- Hand the lock to this replica's first waiter in the same
        -- transaction: a fresh grant with the next token.
        {bump_fence}
        UPDATE {locks}
           SET owner = p_next_owner, hold_count = 1, token = v_token,
               expires_at = TIMESTAMPADD(MICROSECOND, p_next_ttl_us, v_now),
               last_kind = IF(p_next_rid = '', 0, 1), last_request_id = p_next_rid,
               last_hold_count = 1, last_ttl_us = p_next_ttl_us
         WHERE ns = p_ns AND name = p_name;
        {clear_demand}
      END IF;
      IF p_rid <> '' THEN
        UPDATE {fences}
           SET freed_owner = p_owner, freed_request_id = p_rid,
               freed_until = TIMESTAMPADD(MICROSECOND, p_remember_us, v_now)
         WHERE ns = p_ns AND name = p_name;
      END IF;
      COMMIT;
      SELECT 1, 0, v_token, v_yield;
    END IF;
  ELSE
    IF p_rid <> '' THEN
      SELECT 1 INTO v_replay FROM {fences}
       WHERE ns = p_ns AND name = p_name AND freed_owner = p_owner AND freed_request_id = p_rid
         AND freed_until > v_now;
    END IF;
    COMMIT;
    IF p_arid <> '' THEN
      SELECT 6, 0, 0, 0;
    ELSEIF v_replay = 1 THEN
      SELECT 3, 0, 0, 0;
    ELSEIF v_missing = 0 AND v_expires > v_now THEN
      SELECT 4, 0, 0, 0;
    ELSE
      SELECT 5, 0, 0, 0;
    END IF;
  END IF;
END)sql";

constexpr char kRenewBody[] = R"sql(
(IN p_ns VARBINARY(64), IN p_name VARBINARY(512), IN p_owner VARBINARY(256), IN p_ttl_us BIGINT,
 IN p_token BIGINT UNSIGNED)
MODIFIES SQL DATA SQL SECURITY INVOKER
BEGIN
  DECLARE v_missing TINYINT DEFAULT 0;
  DECLARE v_owner VARBINARY(256);
  DECLARE v_token BIGINT UNSIGNED;
  DECLARE v_expires DATETIME(6);
  DECLARE v_now DATETIME(6);
  DECLARE CONTINUE HANDLER FOR NOT FOUND SET v_missing = 1;
  DECLARE EXIT HANDLER FOR SQLEXCEPTION BEGIN ROLLBACK; RESIGNAL; END;
  START TRANSACTION;
  SELECT owner, token, expires_at INTO v_owner, v_token, v_expires
    FROM {locks} WHERE ns = p_ns AND name = p_name FOR UPDATE;
  SET v_now = NOW(6);
  IF v_missing = 0 AND v_expires > v_now AND v_owner = p_owner
     AND (p_token = 0 OR v_token = p_token) THEN
    UPDATE {locks} SET expires_at = TIMESTAMPADD(MICROSECOND, p_ttl_us, v_now)
     WHERE ns = p_ns AND name = p_name;
    COMMIT;
    SELECT 1, v_token;
  ELSE
    COMMIT;
    IF v_missing = 0 AND v_expires > v_now AND v_owner = p_owner THEN
      SELECT 7, 0;
    ELSEIF v_missing = 0 AND v_expires > v_now THEN
      SELECT 4, 0;
    ELSE
      SELECT 5, 0;
    END IF;
  END IF;
END)sql";

// Deletes fence rows no grant used for `p_retention_us`, after raising the
// floor above their tokens (in the same transaction, holding the floor row
// exclusively, while a grant that creates a fence row reads the floor under a
// shared lock): a name whose counter was collected restarts above it.
// Counters of held locks may be collected too: the lock row keeps its token
// and the next grant still gets a larger one. Rows that remember a recent
// freeing release are kept until that memory ends.
constexpr char kCollectBody[] = R"sql(
(IN p_retention_us BIGINT, IN p_batch INT)
MODIFIES SQL DATA SQL SECURITY INVOKER
BEGIN
  DECLARE v_floor BIGINT UNSIGNED;
  DECLARE v_max BIGINT UNSIGNED;
  DECLARE v_deleted BIGINT DEFAULT 0;
  DECLARE v_cutoff DATETIME(6);
  DECLARE EXIT HANDLER FOR SQLEXCEPTION BEGIN ROLLBACK; RESIGNAL; END;
  START TRANSACTION;
  SELECT v INTO v_floor FROM {meta} WHERE k = 'fence_floor' FOR UPDATE;
  SET v_cutoff = TIMESTAMPADD(MICROSECOND, -p_retention_us, NOW(6));
  SELECT MAX(token) INTO v_max
    FROM (SELECT token FROM {fences} WHERE granted_at < v_cutoff
          ORDER BY granted_at LIMIT p_batch) AS old;
  IF v_max IS NOT NULL AND v_floor IS NOT NULL THEN
    IF v_max > v_floor THEN
      UPDATE {meta} SET v = v_max WHERE k = 'fence_floor';
      SET v_floor = v_max;
    END IF;
    DELETE FROM {fences}
     WHERE granted_at < v_cutoff AND token <= v_floor
       AND (freed_until IS NULL OR freed_until < NOW(6))
     ORDER BY granted_at LIMIT p_batch;
    SET v_deleted = ROW_COUNT();
  END IF;
  COMMIT;
  SELECT v_deleted;
END)sql";

uint64_t Fnv1a(absl::string_view s) {
  uint64_t h = 1469598103934665603ull;
  for (unsigned char c : s) {
    h ^= c;
    h *= 1099511628211ull;
  }
  return h;
}

bool ValidPrefix(absl::string_view prefix) {
  if (prefix.size() > 40) return false;
  for (char c : prefix) {
    if (!absl::ascii_isalnum(static_cast<unsigned char>(c)) && c != '_') return false;
  }
  return true;
}

}  // namespace

absl::StatusOr<MysqlSchema> MysqlSchema::ForPrefix(absl::string_view prefix) {
  if (!ValidPrefix(prefix)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "mysql.table_prefix: must be at most 40 characters of [A-Za-z0-9_], got \"", prefix, "\""));
  }
  MysqlSchema s;
  s.prefix_ = std::string(prefix);
  s.locks_ = absl::StrCat("`", prefix, "locks`");
  s.fences_ = absl::StrCat("`", prefix, "fences`");
  s.meta_ = absl::StrCat("`", prefix, "meta`");
  s.demand_ = absl::StrCat("`", prefix, "demand`");
  const std::vector<std::pair<std::string, std::string>> replacements = {
      {"{bump_fence}", kBumpFence},
      {"{note_demand}", kNoteDemand},
      {"{clear_demand}", kClearDemand},
      {"{check_yield}", kCheckYield}};
  const std::vector<std::pair<std::string, std::string>> tables = {
      {"{locks}", s.locks_}, {"{fences}", s.fences_}, {"{meta}", s.meta_}, {"{demand}", s.demand_}};
  auto add = [&](absl::string_view kind, absl::string_view body, std::string* quoted) {
    std::string text = absl::StrReplaceAll(absl::StrReplaceAll(body, replacements), tables);
    std::string name =
        absl::StrFormat("%s%s_%08x", prefix, kind, static_cast<uint32_t>(Fnv1a(text) >> 32));
    *quoted = absl::StrCat("`", name, "`");
    s.procedures_.emplace_back(name, absl::StrCat("CREATE PROCEDURE ", *quoted, text));
  };
  add("acquire", kAcquireBody, &s.acquire_proc_);
  add("release", kReleaseBody, &s.release_proc_);
  add("renew", kRenewBody, &s.renew_proc_);
  add("collect", kCollectBody, &s.collect_proc_);
  return s;
}

std::vector<std::string> MysqlSchema::CreateTables() const {
  return {
      absl::StrCat("CREATE TABLE IF NOT EXISTS ", meta_,
                   " (k VARBINARY(64) NOT NULL PRIMARY KEY, v BIGINT UNSIGNED NOT NULL)"
                   " ENGINE=InnoDB"),
      absl::StrCat("CREATE TABLE IF NOT EXISTS ", locks_,
                   " (ns VARBINARY(64) NOT NULL,"
                   " name VARBINARY(512) NOT NULL,"
                   " owner VARBINARY(256) NOT NULL,"
                   " hold_count INT UNSIGNED NOT NULL,"
                   " token BIGINT UNSIGNED NOT NULL,"
                   " expires_at DATETIME(6) NOT NULL,"
                   " last_kind TINYINT UNSIGNED NOT NULL DEFAULT 0,"
                   " last_request_id VARBINARY(128) NOT NULL DEFAULT '',"
                   " last_hold_count INT UNSIGNED NOT NULL DEFAULT 0,"
                   " last_ttl_us BIGINT NOT NULL DEFAULT 0,"
                   " PRIMARY KEY (ns, name),"
                   " KEY expires (expires_at))"
                   " ENGINE=InnoDB"),
      absl::StrCat("CREATE TABLE IF NOT EXISTS ", fences_,
                   " (ns VARBINARY(64) NOT NULL,"
                   " name VARBINARY(512) NOT NULL,"
                   " token BIGINT UNSIGNED NOT NULL,"
                   " granted_at DATETIME(6) NOT NULL,"
                   " freed_owner VARBINARY(256) NOT NULL DEFAULT '',"
                   " freed_request_id VARBINARY(128) NOT NULL DEFAULT '',"
                   " freed_until DATETIME(6) NULL,"
                   " PRIMARY KEY (ns, name),"
                   " KEY granted (granted_at))"
                   " ENGINE=InnoDB"),
      absl::StrCat("CREATE TABLE IF NOT EXISTS ", demand_,
                   " (ns VARBINARY(64) NOT NULL,"
                   " name VARBINARY(512) NOT NULL,"
                   " replica VARBINARY(32) NOT NULL,"
                   " since DATETIME(6) NOT NULL,"
                   " until DATETIME(6) NOT NULL,"
                   " PRIMARY KEY (ns, name, replica),"
                   " KEY until (until))"
                   " ENGINE=InnoDB"),
  };
}

std::vector<std::pair<std::string, std::string>> MysqlSchema::CreateProcedures() const {
  return procedures_;
}

namespace {

absl::StatusOr<MysqlResult> Run(MysqlConnection& conn, absl::string_view sql,
                                absl::string_view context, unsigned* code = nullptr) {
  MysqlOutcome o = conn.Query(sql, context);
  if (code != nullptr) *code = o.error_code;
  return std::move(o.result);
}

absl::Status EnsureLocked(MysqlConnection& conn, const MysqlSchema& schema) {
  for (const std::string& sql : schema.CreateTables()) {
    absl::StatusOr<MysqlResult> r = Run(conn, sql, "create table");
    if (!r.ok()) return r.status();
  }
  // Two rows, inserted once; a replica that finds them keeps them.
  absl::StatusOr<MysqlResult> r =
      Run(conn,
          absl::StrCat("INSERT IGNORE INTO ", schema.meta(), " (k, v) VALUES ('schema_version', ",
                       MysqlSchema::kVersion, "), ('fence_floor', 0)"),
          "record schema version");
  if (!r.ok()) return r.status();
  r = Run(conn, absl::StrCat("SELECT v FROM ", schema.meta(), " WHERE k = 'schema_version'"),
          "read schema version");
  if (!r.ok()) return r.status();
  int64_t stored = 0;
  if (r->rows.size() != 1 || !r->rows[0][0] || !absl::SimpleAtoi(*r->rows[0][0], &stored)) {
    return absl::InternalError(
        absl::StrCat("mysql: ", schema.meta(), " holds no readable schema_version"));
  }
  if (stored > MysqlSchema::kVersion) {
    return absl::FailedPreconditionError(absl::StrCat(
        "mysql: the database holds lockd schema version ", stored,
        ", newer than this lockd supports (", MysqlSchema::kVersion, "); upgrade lockd"));
  }
  // Upgrades from older layouts go here, one step per version, each followed
  // by an UPDATE of schema_version. Version 1 is the first layout.

  r = Run(conn,
          "SELECT ROUTINE_NAME FROM information_schema.ROUTINES"
          " WHERE ROUTINE_SCHEMA = DATABASE() AND ROUTINE_TYPE = 'PROCEDURE'",
          "list procedures");
  if (!r.ok()) return r.status();
  std::vector<std::string> existing;
  for (const MysqlRow& row : r->rows) {
    if (row[0]) existing.push_back(*row[0]);
  }
  for (const auto& [name, sql] : schema.CreateProcedures()) {
    if (std::find(existing.begin(), existing.end(), name) != existing.end()) continue;
    unsigned code = 0;
    absl::StatusOr<MysqlResult> c = Run(conn, sql, absl::StrCat("create procedure ", name), &code);
    // 1304 ER_SP_ALREADY_EXISTS: another lockd created it meanwhile (only
    // possible if it does not take the advisory lock, e.g. an older one).
    if (!c.ok() && code != 1304) return c.status();
  }
  return absl::OkStatus();
}

}  // namespace

absl::Status EnsureSchema(MysqlConnection& conn, const MysqlSchema& schema,
                          absl::string_view database, absl::string_view prefix) {
  // GET_LOCK names are limited to 64 characters; a hash keeps long database
  // names and prefixes apart.
  std::string lock_name =
      absl::StrFormat("lockd.schema.%016x", Fnv1a(absl::StrCat(database, "\n", prefix)));
  absl::StatusOr<MysqlResult> r =
      Run(conn, absl::StrCat("SELECT GET_LOCK('", lock_name, "', 30)"), "take the schema lock");
  if (!r.ok()) return r.status();
  if (r->rows.size() != 1 || !r->rows[0][0] || *r->rows[0][0] != "1") {
    return absl::UnavailableError(
        "mysql: another lockd held the schema lock for 30 s; try again later");
  }
  absl::Status s = EnsureLocked(conn, schema);
  absl::StatusOr<MysqlResult> u =
      Run(conn, absl::StrCat("DO RELEASE_LOCK('", lock_name, "')"), "release the schema lock");
  if (s.ok() && !u.ok()) s = u.status();
  return s;
}

}  // namespace lockd
