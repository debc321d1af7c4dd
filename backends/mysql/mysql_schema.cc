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
// COMMITTED isolation. The lock row is always locked before holders rows,
// queue entries and the fence row (statements outside a transaction touch one
// table each), and the fence floor is only read when a fence row is created, so concurrent
// calls queue on row locks instead of deadlocking; the rare duplicate-key race
// of two first grants of a new name fails one CALL (the caller retries it).
// On any error the handler rolls back before re-raising, so a failed CALL
// never leaves a transaction open on the connection.

constexpr char kAcquireBody[] = R"sql(
(IN p_ns VARBINARY(64), IN p_name VARBINARY(512), IN p_owner VARBINARY(256),
 IN p_ttl_us BIGINT, IN p_rid VARBINARY(128), IN p_may_take TINYINT, IN p_poll TINYINT,
 IN p_replica VARBINARY(32), IN p_queue_us BIGINT, IN p_refresh TINYINT, IN p_mode TINYINT,
 IN p_lim INT UNSIGNED, IN p_permits INT UNSIGNED)
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
  DECLARE v_lk TINYINT UNSIGNED DEFAULT 0;
  DECLARE v_lim INT UNSIGNED DEFAULT 0;
  DECLARE v_qu DATETIME(6);
  DECLARE v_until DATETIME(6);
  DECLARE v_x TINYINT DEFAULT 0;
  DECLARE v_count INT DEFAULT 0;
  DECLARE v_used BIGINT DEFAULT 0;
  DECLARE v_mine TINYINT DEFAULT 0;
  DECLARE v_hmode TINYINT UNSIGNED;
  DECLARE v_hpermits INT UNSIGNED;
  DECLARE v_entry BIGINT UNSIGNED DEFAULT NULL;
  DECLARE v_waiting INT DEFAULT 0;
  DECLARE v_ahead INT DEFAULT 0;
  DECLARE v_ahead_s INT DEFAULT 0;
  DECLARE v_ahead_sem INT DEFAULT 0;
  DECLARE v_ahead_permits BIGINT DEFAULT 0;
  DECLARE v_admit TINYINT DEFAULT 0;
  DECLARE CONTINUE HANDLER FOR NOT FOUND SET v_missing = 1;
  DECLARE EXIT HANDLER FOR SQLEXCEPTION BEGIN ROLLBACK; RESIGNAL; END;

  IF p_poll = 1 THEN
    -- A waiter polling: a lock held exclusively by another owner (or free,
    -- when it may not take it) is answered from a plain read, without the
    -- row lock that the holder's release would have to queue behind.
    SELECT owner, hold_count, token, expires_at, kind INTO v_owner, v_hold, v_token, v_expires, v_lk
      FROM {locks} WHERE ns = p_ns AND name = p_name;
    SET v_now = NOW(6);
    IF v_missing = 0 AND v_lk = 0 AND v_expires > v_now AND v_owner <> p_owner AND p_lim = 0 THEN
      {enqueue}
      SELECT 0, v_owner, v_hold, v_token, TIMESTAMPDIFF(MICROSECOND, v_now, v_expires), 0, 0;
      LEAVE proc;
    END IF;
    IF p_may_take = 0 AND (v_missing = 1 OR (v_lk = 0 AND v_expires <= v_now)) THEN
      {enqueue}
      SELECT 3, '', 0, 0, 0, 0, 0;
      LEAVE proc;
    END IF;
    SET v_missing = 0;
    SET v_lk = 0;
  END IF;

  START TRANSACTION;
  SELECT owner, hold_count, token, expires_at, last_kind, last_request_id, last_hold_count,
         last_ttl_us, kind, lim, queue_until
    INTO v_owner, v_hold, v_token, v_expires, v_kind, v_rid, v_last_hold, v_last_ttl, v_lk,
         v_lim, v_qu
    FROM {locks} WHERE ns = p_ns AND name = p_name FOR UPDATE;
  SET v_found = 1 - v_missing;
  SET v_now = NOW(6);
  IF v_found = 1 AND v_lk = 0 AND v_expires > v_now THEN
    SET v_x = 1;
  ELSEIF v_found = 1 AND v_lk <> 0 AND v_expires > v_now THEN
    -- Shared or semaphore holders (their leases end at most at expires_at).
    SELECT COUNT(*), COALESCE(SUM(permits), 0) INTO v_count, v_used FROM {holders}
     WHERE ns = p_ns AND name = p_name AND expires_at > v_now;
  END IF;

  IF (v_x = 1 OR v_count > 0) AND
     ((p_lim > 0) <> (v_lk = 2) OR (p_lim > 0 AND p_lim <> v_lim)) THEN
    -- Another kind than the holders': at once, whatever the wait.
    COMMIT;
    SELECT 5, '', 0, 0, 0, v_lk, v_lim;
    LEAVE proc;
  END IF;

  IF v_x = 1 AND v_owner = p_owner THEN
    -- The exclusive holder again (also when it asks SHARED): reentrant.
    IF p_rid <> '' AND v_kind = 1 AND v_rid = p_rid THEN
      COMMIT;
      SELECT 2, v_owner, v_last_hold, v_token, v_last_ttl, 0, 0;
    ELSE
      UPDATE {locks}
         SET hold_count = v_hold + 1, expires_at = TIMESTAMPADD(MICROSECOND, p_ttl_us, v_now),
             last_kind = IF(p_rid = '', 0, 1), last_request_id = p_rid,
             last_hold_count = v_hold + 1, last_ttl_us = p_ttl_us
       WHERE ns = p_ns AND name = p_name;
      {drop_entry}
      COMMIT;
      SELECT 1, v_owner, v_hold + 1, v_token, p_ttl_us, 0, 0;
    END IF;
    LEAVE proc;
  END IF;

  IF v_count > 0 THEN
    SET v_missing = 0;
    SELECT mode, permits, hold_count, token, last_kind, last_request_id, last_hold_count,
           last_ttl_us
      INTO v_hmode, v_hpermits, v_hold, v_token, v_kind, v_rid, v_last_hold, v_last_ttl
      FROM {holders} WHERE ns = p_ns AND name = p_name AND owner = p_owner
       AND expires_at > v_now FOR UPDATE;
    SET v_mine = 1 - v_missing;
  END IF;

  -- Who waits ahead of this call: for a new call (p_poll = 0), every other
  -- owner's live entry. A replica orders its own parked calls (the caller
  -- does), so ahead of one of them (p_poll = 1) are the live entries of other
  -- replicas' owners made before this replica's first live entry. v_waiting
  -- counts every other owner's live entry (for an upgrade).
  IF v_found = 1 AND v_qu > v_now THEN
    {queue_ahead}
  END IF;

  IF v_mine = 1 THEN
    IF p_rid <> '' AND v_kind = 1 AND v_rid = p_rid THEN
      COMMIT;
      SELECT 2, p_owner, v_last_hold, v_token, v_last_ttl, v_lk, v_lim;
    ELSEIF v_lk = 2 AND p_permits <> v_hpermits THEN
      COMMIT;
      SELECT 7, p_owner, v_hold, v_token, 0, v_lk, v_hpermits;
    ELSEIF v_lk = 2 OR p_mode = 1 THEN
      UPDATE {holders}
         SET hold_count = v_hold + 1, expires_at = TIMESTAMPADD(MICROSECOND, p_ttl_us, v_now),
             last_kind = IF(p_rid = '', 0, 1), last_request_id = p_rid,
             last_hold_count = v_hold + 1, last_ttl_us = p_ttl_us
       WHERE ns = p_ns AND name = p_name AND owner = p_owner;
      UPDATE {locks}
         SET expires_at = GREATEST(expires_at, TIMESTAMPADD(MICROSECOND, p_ttl_us, v_now))
       WHERE ns = p_ns AND name = p_name;
      {drop_entry}
      COMMIT;
      SELECT 1, p_owner, v_hold + 1, v_token, p_ttl_us, v_lk, v_lim;
    ELSEIF v_count = 1 AND v_waiting = 0 AND p_may_take = 1 THEN
      -- An upgrade: the only holder, nobody waits (p_may_take = 0: others of
      -- this replica do). A new grant, exclusive.
      {bump_fence}
      DELETE FROM {holders} WHERE ns = p_ns AND name = p_name AND owner = p_owner;
      UPDATE {locks}
         SET kind = 0, lim = 0, owner = p_owner, hold_count = v_hold + 1, token = v_token,
             expires_at = TIMESTAMPADD(MICROSECOND, p_ttl_us, v_now),
             last_kind = IF(p_rid = '', 0, 1), last_request_id = p_rid,
             last_hold_count = v_hold + 1, last_ttl_us = p_ttl_us
       WHERE ns = p_ns AND name = p_name;
      {drop_entry}
      COMMIT;
      SELECT 1, p_owner, v_hold + 1, v_token, p_ttl_us, 0, 0;
    ELSE
      COMMIT;
      SELECT 6, '', 0, 0, 0, v_lk, v_lim;
    END IF;
    LEAVE proc;
  END IF;

  -- Admission (FIFO across modes): EXCLUSIVE when nobody holds or waits
  -- ahead; SHARED beside shared holders when only SHARED acquires wait
  -- ahead; a semaphore when only semaphore acquires wait ahead and their
  -- permits, the held ones and its own fit in the limit.
  IF p_lim > 0 THEN
    SET v_admit = v_x = 0 AND v_ahead_sem = v_ahead AND
                  v_used + v_ahead_permits + p_permits <= p_lim;
  ELSEIF p_mode = 1 THEN
    SET v_admit = v_x = 0 AND v_ahead_s = v_ahead;
  ELSE
    SET v_admit = v_x = 0 AND v_count = 0 AND v_ahead = 0;
  END IF;

  IF v_admit = 0 OR p_may_take = 0 THEN
    {enqueue}
    IF v_count > 0 AND v_admit = 0 THEN
      -- Held shared or as a semaphore: the newest holder, read under the
      -- name's lock.
      SET v_missing = 0;
      SELECT owner, hold_count, token, expires_at INTO v_owner, v_hold, v_token, v_expires
        FROM {holders} WHERE ns = p_ns AND name = p_name AND expires_at > v_now
       ORDER BY token DESC LIMIT 1;
    END IF;
    COMMIT;
    IF v_x = 1 THEN
      SELECT 0, v_owner, v_hold, v_token, TIMESTAMPDIFF(MICROSECOND, v_now, v_expires), 0, 0;
    ELSEIF v_count > 0 AND v_admit = 0 THEN
      IF v_missing = 0 THEN
        SELECT 0, v_owner, v_hold, v_token, TIMESTAMPDIFF(MICROSECOND, v_now, v_expires), v_lk,
               v_lim;
      ELSE
        SELECT 4, '', 0, 0, 0, 0, 0;
      END IF;
    ELSEIF v_admit = 0 THEN
      SELECT 4, '', 0, 0, 0, 0, 0;
    ELSE
      SELECT 3, '', 0, 0, 0, 0, 0;
    END IF;
    LEAVE proc;
  END IF;

  {bump_fence}
  IF p_lim = 0 AND p_mode = 0 THEN
    IF v_found = 1 THEN
      UPDATE {locks}
         SET owner = p_owner, hold_count = 1, token = v_token,
             expires_at = TIMESTAMPADD(MICROSECOND, p_ttl_us, v_now),
             last_kind = IF(p_rid = '', 0, 1), last_request_id = p_rid, last_hold_count = 1,
             last_ttl_us = p_ttl_us, kind = 0, lim = 0
       WHERE ns = p_ns AND name = p_name;
    ELSE
      INSERT INTO {locks} (ns, name, owner, hold_count, token, expires_at, last_kind,
                           last_request_id, last_hold_count, last_ttl_us)
        VALUES (p_ns, p_name, p_owner, 1, v_token, TIMESTAMPADD(MICROSECOND, p_ttl_us, v_now),
                IF(p_rid = '', 0, 1), p_rid, 1, p_ttl_us);
    END IF;
  ELSE
    SET v_until = TIMESTAMPADD(MICROSECOND, p_ttl_us, v_now);
    INSERT INTO {holders} (ns, name, owner, mode, permits, hold_count, token, expires_at,
                           last_kind, last_request_id, last_hold_count, last_ttl_us)
      VALUES (p_ns, p_name, p_owner, p_mode, p_permits, 1, v_token, v_until,
              IF(p_rid = '', 0, 1), p_rid, 1, p_ttl_us)
      ON DUPLICATE KEY UPDATE mode = p_mode, permits = p_permits, hold_count = 1,
        token = v_token, expires_at = v_until, last_kind = IF(p_rid = '', 0, 1),
        last_request_id = p_rid, last_hold_count = 1, last_ttl_us = p_ttl_us;
    IF v_found = 1 THEN
      UPDATE {locks}
         SET owner = '', hold_count = 0, token = v_token, kind = IF(p_lim > 0, 2, 1),
             lim = p_lim, expires_at = IF(v_count > 0, GREATEST(expires_at, v_until), v_until)
       WHERE ns = p_ns AND name = p_name;
    ELSE
      INSERT INTO {locks} (ns, name, owner, hold_count, token, expires_at, kind, lim)
        VALUES (p_ns, p_name, '', 0, v_token, v_until, IF(p_lim > 0, 2, 1), p_lim);
    END IF;
  END IF;
  {drop_entry}
  COMMIT;
  SELECT 1, p_owner, 1, v_token, p_ttl_us, IF(p_lim > 0, 2, p_mode), p_lim;
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

// A call that waits (p_queue_us > 0) and was not granted: its owner's entry
// in the queue of this replica, kept (or made) live for p_queue_us; with
// p_refresh, every entry of this replica on the name is extended. The lock
// row (made if missing, as a free row) records until when the name may have
// a queue, so that acquires of a name without one need not look.
constexpr char kEnqueue[] = R"sql(
      IF p_queue_us > 0 THEN
        SET v_until = TIMESTAMPADD(MICROSECOND, p_queue_us, v_now);
        INSERT INTO {queue} (ns, name, owner, replica, mode, permits, lim, until)
          VALUES (p_ns, p_name, p_owner, p_replica, p_mode, p_permits, p_lim, v_until)
          ON DUPLICATE KEY UPDATE until = IF(p_refresh = 1 OR until < v_now, v_until, until);
        IF p_refresh = 1 THEN
          UPDATE {queue} SET until = v_until
           WHERE ns = p_ns AND name = p_name AND replica = p_replica;
        END IF;
        INSERT INTO {locks} (ns, name, owner, hold_count, token, expires_at, queue_until)
          VALUES (p_ns, p_name, '', 0, 0, v_now, v_until)
          ON DUPLICATE KEY UPDATE queue_until = GREATEST(queue_until, v_until);
      END IF;)sql";

// Reads the queue of the name as seen by p_owner's call on p_replica (see
// "Who waits ahead" in the acquire procedure).
constexpr char kQueueAhead[] = R"sql(
    IF p_poll = 1 THEN
      SET v_entry = (SELECT id FROM {queue}
                      WHERE ns = p_ns AND name = p_name AND replica = p_replica AND until > v_now
                      ORDER BY id LIMIT 1);
    END IF;
    SELECT COUNT(*), COALESCE(SUM(ahead), 0), COALESCE(SUM(ahead AND mode = 1), 0),
           COALESCE(SUM(ahead AND lim > 0), 0), COALESCE(SUM(IF(ahead, permits, 0)), 0)
      INTO v_waiting, v_ahead, v_ahead_s, v_ahead_sem, v_ahead_permits
      FROM (SELECT (p_poll = 0 OR (replica <> p_replica AND
                                   (v_entry IS NULL OR id < v_entry))) AS ahead,
                   mode, lim, permits
              FROM {queue}
             WHERE ns = p_ns AND name = p_name AND until > v_now AND owner <> p_owner) AS q;)sql";

// A grant to p_owner ends its wait on this replica.
constexpr char kDropEntry[] = R"sql(
      IF v_qu > v_now THEN
        DELETE FROM {queue}
         WHERE ns = p_ns AND name = p_name AND owner = p_owner AND replica = p_replica;
      END IF;)sql";

constexpr char kReleaseBody[] = R"sql(
(IN p_ns VARBINARY(64), IN p_name VARBINARY(512), IN p_owner VARBINARY(256),
 IN p_rid VARBINARY(128), IN p_remember_us BIGINT, IN p_next_owner VARBINARY(256),
 IN p_next_ttl_us BIGINT, IN p_next_rid VARBINARY(128), IN p_replica VARBINARY(32),
 IN p_arid VARBINARY(128), IN p_token BIGINT UNSIGNED)
MODIFIES SQL DATA SQL SECURITY INVOKER
proc: BEGIN
  DECLARE v_missing TINYINT DEFAULT 0;
  DECLARE v_owner VARBINARY(256);
  DECLARE v_hold INT UNSIGNED;
  DECLARE v_held_token BIGINT UNSIGNED;
  DECLARE v_token BIGINT UNSIGNED DEFAULT 0;
  DECLARE v_floor BIGINT UNSIGNED;
  DECLARE v_expires DATETIME(6);
  DECLARE v_lock_expires DATETIME(6);
  DECLARE v_kind TINYINT UNSIGNED;
  DECLARE v_rid VARBINARY(128);
  DECLARE v_last_hold INT UNSIGNED;
  DECLARE v_lk TINYINT UNSIGNED DEFAULT 0;
  DECLARE v_qu DATETIME(6);
  DECLARE v_count INT DEFAULT 0;
  DECLARE v_max DATETIME(6);
  DECLARE v_entry BIGINT UNSIGNED DEFAULT NULL;
  DECLARE v_handover TINYINT DEFAULT 0;
  DECLARE v_replay TINYINT DEFAULT 0;
  DECLARE v_now DATETIME(6);
  DECLARE CONTINUE HANDLER FOR NOT FOUND SET v_missing = 1;
  DECLARE EXIT HANDLER FOR SQLEXCEPTION BEGIN ROLLBACK; RESIGNAL; END;

  -- The common case, an exclusive lock's last hold given back without a
  -- request id, with nobody to hand over to and no queue, is one
  -- autocommitted statement.
  IF p_rid = '' AND p_next_owner = '' AND p_arid = '' THEN
    DELETE FROM {locks}
     WHERE ns = p_ns AND name = p_name AND owner = p_owner AND hold_count = 1
       AND (p_token = 0 OR token = p_token) AND expires_at > NOW(6) AND queue_until < NOW(6);
    IF ROW_COUNT() > 0 THEN
      SELECT 1, 0, 0, 0;
      LEAVE proc;
    END IF;
  END IF;

  START TRANSACTION;
  SELECT owner, hold_count, token, expires_at, last_kind, last_request_id, last_hold_count, kind,
         queue_until
    INTO v_owner, v_hold, v_held_token, v_expires, v_kind, v_rid, v_last_hold, v_lk, v_qu
    FROM {locks} WHERE ns = p_ns AND name = p_name FOR UPDATE;
  SET v_now = NOW(6);
  SET v_lock_expires = v_expires;
  IF v_missing = 0 AND v_lk <> 0 THEN
    -- A shared or semaphore lock: the caller's own holder row.
    SELECT owner, hold_count, token, expires_at, last_kind, last_request_id, last_hold_count
      INTO v_owner, v_hold, v_held_token, v_expires, v_kind, v_rid, v_last_hold
      FROM {holders} WHERE ns = p_ns AND name = p_name AND owner = p_owner FOR UPDATE;
  END IF;
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
    ELSEIF v_hold > 1 AND v_lk <> 0 THEN
      UPDATE {holders}
         SET hold_count = v_hold - 1, last_kind = IF(p_rid = '', 0, 2), last_request_id = p_rid,
             last_hold_count = v_hold - 1
       WHERE ns = p_ns AND name = p_name AND owner = p_owner;
      COMMIT;
      SELECT 0, v_hold - 1, 0, 0;
    ELSEIF v_hold > 1 THEN
      UPDATE {locks}
         SET hold_count = v_hold - 1, last_kind = IF(p_rid = '', 0, 2), last_request_id = p_rid,
             last_hold_count = v_hold - 1
       WHERE ns = p_ns AND name = p_name;
      COMMIT;
      SELECT 0, v_hold - 1, 0, 0;
    ELSE
      IF v_lk <> 0 THEN
        DELETE FROM {holders} WHERE ns = p_ns AND name = p_name AND owner = p_owner;
        SELECT COUNT(*), MAX(expires_at) INTO v_count, v_max FROM {holders}
         WHERE ns = p_ns AND name = p_name AND expires_at > v_now;
      ELSEIF p_next_owner <> '' THEN
        -- This replica's first waiter (an EXCLUSIVE acquire) takes the lock in
        -- the same transaction, if nobody waits ahead of it.
        SET v_handover = 1;
        IF v_qu > v_now THEN
          -- Scans stop early: the first entry of this replica in id order,
          -- then only the entries before it.
          SET v_entry = (SELECT id FROM {queue}
                          WHERE ns = p_ns AND name = p_name AND replica = p_replica
                            AND until > v_now
                          ORDER BY id LIMIT 1);
          IF v_entry IS NULL THEN
            SET v_handover = NOT EXISTS (
                SELECT 1 FROM {queue}
                 WHERE ns = p_ns AND name = p_name AND until > v_now
                   AND owner <> p_next_owner AND replica <> p_replica);
          ELSE
            SET v_handover = NOT EXISTS (
                SELECT 1 FROM {queue}
                 WHERE ns = p_ns AND name = p_name AND id < v_entry AND until > v_now
                   AND owner <> p_next_owner AND replica <> p_replica);
          END IF;
        END IF;
      END IF;
      IF v_count > 0 THEN
        UPDATE {locks} SET expires_at = v_max WHERE ns = p_ns AND name = p_name;
      ELSEIF v_handover = 1 THEN
        -- A fresh grant with the next token.
        {bump_fence}
        UPDATE {locks}
           SET owner = p_next_owner, hold_count = 1, token = v_token,
               expires_at = TIMESTAMPADD(MICROSECOND, p_next_ttl_us, v_now),
               last_kind = IF(p_next_rid = '', 0, 1), last_request_id = p_next_rid,
               last_hold_count = 1, last_ttl_us = p_next_ttl_us
         WHERE ns = p_ns AND name = p_name;
        IF v_qu > v_now THEN
          DELETE FROM {queue}
           WHERE ns = p_ns AND name = p_name AND owner = p_next_owner AND replica = p_replica;
        END IF;
      ELSEIF v_qu > v_now THEN
        -- Free, but acquires wait: the row keeps their queue's mark.
        UPDATE {locks}
           SET kind = 0, lim = 0, owner = '', hold_count = 0, expires_at = v_now
         WHERE ns = p_ns AND name = p_name;
      ELSE
        DELETE FROM {locks} WHERE ns = p_ns AND name = p_name;
      END IF;
      IF p_rid <> '' THEN
        UPDATE {fences}
           SET freed_owner = p_owner, freed_request_id = p_rid,
               freed_until = TIMESTAMPADD(MICROSECOND, p_remember_us, v_now)
         WHERE ns = p_ns AND name = p_name;
      END IF;
      COMMIT;
      SELECT 1, 0, v_token, v_count;
    END IF;
  ELSE
    IF p_rid <> '' THEN
      SET v_missing = 0;
      SELECT 1 INTO v_replay FROM {fences}
       WHERE ns = p_ns AND name = p_name AND freed_owner = p_owner AND freed_request_id = p_rid
         AND freed_until > v_now;
    END IF;
    COMMIT;
    IF p_arid <> '' THEN
      SELECT 6, 0, 0, 0;
    ELSEIF v_replay = 1 THEN
      SELECT 3, 0, 0, 0;
    ELSEIF v_lock_expires > v_now THEN
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
  DECLARE v_lock_expires DATETIME(6);
  DECLARE v_lk TINYINT UNSIGNED DEFAULT 0;
  DECLARE v_now DATETIME(6);
  DECLARE CONTINUE HANDLER FOR NOT FOUND SET v_missing = 1;
  DECLARE EXIT HANDLER FOR SQLEXCEPTION BEGIN ROLLBACK; RESIGNAL; END;
  START TRANSACTION;
  SELECT owner, token, expires_at, kind INTO v_owner, v_token, v_expires, v_lk
    FROM {locks} WHERE ns = p_ns AND name = p_name FOR UPDATE;
  SET v_now = NOW(6);
  SET v_lock_expires = v_expires;
  IF v_missing = 0 AND v_lk <> 0 THEN
    SELECT owner, token, expires_at INTO v_owner, v_token, v_expires
      FROM {holders} WHERE ns = p_ns AND name = p_name AND owner = p_owner FOR UPDATE;
  END IF;
  IF v_missing = 0 AND v_expires > v_now AND v_owner = p_owner
     AND (p_token = 0 OR v_token = p_token) THEN
    IF v_lk <> 0 THEN
      UPDATE {holders} SET expires_at = TIMESTAMPADD(MICROSECOND, p_ttl_us, v_now)
       WHERE ns = p_ns AND name = p_name AND owner = p_owner;
      UPDATE {locks}
         SET expires_at = (SELECT MAX(expires_at) FROM {holders}
                            WHERE ns = p_ns AND name = p_name)
       WHERE ns = p_ns AND name = p_name;
    ELSE
      UPDATE {locks} SET expires_at = TIMESTAMPADD(MICROSECOND, p_ttl_us, v_now)
       WHERE ns = p_ns AND name = p_name;
    END IF;
    COMMIT;
    SELECT 1, v_token;
  ELSE
    COMMIT;
    IF v_missing = 0 AND v_expires > v_now AND v_owner = p_owner THEN
      SELECT 7, 0;
    ELSEIF v_lock_expires > v_now THEN
      SELECT 4, 0;
    ELSE
      SELECT 5, 0;
    END IF;
  END IF;
END)sql";

// ForceRelease of p_token's holder, or (p_token = 0) of every holder if the
// newest grant is still p_seen (else outcome 2: look again). Outcomes: 0 free,
// 1 freed, 2 changed, 3 no holder with p_token.
constexpr char kForceBody[] = R"sql(
(IN p_ns VARBINARY(64), IN p_name VARBINARY(512), IN p_token BIGINT UNSIGNED,
 IN p_seen BIGINT UNSIGNED)
MODIFIES SQL DATA SQL SECURITY INVOKER
proc: BEGIN
  DECLARE v_missing TINYINT DEFAULT 0;
  DECLARE v_token BIGINT UNSIGNED;
  DECLARE v_expires DATETIME(6);
  DECLARE v_lk TINYINT UNSIGNED;
  DECLARE v_qu DATETIME(6);
  DECLARE v_count INT DEFAULT 0;
  DECLARE v_max DATETIME(6);
  DECLARE v_now DATETIME(6);
  DECLARE CONTINUE HANDLER FOR NOT FOUND SET v_missing = 1;
  DECLARE EXIT HANDLER FOR SQLEXCEPTION BEGIN ROLLBACK; RESIGNAL; END;
  START TRANSACTION;
  SELECT token, expires_at, kind, queue_until INTO v_token, v_expires, v_lk, v_qu
    FROM {locks} WHERE ns = p_ns AND name = p_name FOR UPDATE;
  SET v_now = NOW(6);
  IF v_missing = 1 OR v_expires <= v_now THEN
    COMMIT;
    SELECT 0;
    LEAVE proc;
  END IF;
  IF v_lk <> 0 THEN
    -- The newest live holder's token (the row's may be a holder's that left).
    SELECT MAX(token) INTO v_token FROM {holders}
     WHERE ns = p_ns AND name = p_name AND expires_at > v_now;
    IF v_token IS NULL THEN
      COMMIT;
      SELECT 0;
      LEAVE proc;
    END IF;
  END IF;
  IF p_token = 0 AND v_token <> p_seen THEN
    COMMIT;
    SELECT 2;
    LEAVE proc;
  END IF;
  IF p_token <> 0 AND v_lk <> 0 THEN
    DELETE FROM {holders}
     WHERE ns = p_ns AND name = p_name AND token = p_token AND expires_at > v_now;
    IF ROW_COUNT() = 0 THEN
      COMMIT;
      SELECT 3;
      LEAVE proc;
    END IF;
    SELECT COUNT(*), MAX(expires_at) INTO v_count, v_max FROM {holders}
     WHERE ns = p_ns AND name = p_name AND expires_at > v_now;
  ELSEIF p_token <> 0 AND v_token <> p_token THEN
    COMMIT;
    SELECT 3;
    LEAVE proc;
  ELSE
    DELETE FROM {holders} WHERE ns = p_ns AND name = p_name;
  END IF;
  IF v_count > 0 THEN
    UPDATE {locks} SET expires_at = v_max WHERE ns = p_ns AND name = p_name;
  ELSEIF v_qu > v_now THEN
    UPDATE {locks} SET kind = 0, lim = 0, owner = '', hold_count = 0, expires_at = v_now
     WHERE ns = p_ns AND name = p_name;
  ELSE
    DELETE FROM {locks} WHERE ns = p_ns AND name = p_name;
  END IF;
  COMMIT;
  SELECT 1;
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
  s.holders_ = absl::StrCat("`", prefix, "holders`");
  s.queue_ = absl::StrCat("`", prefix, "queue`");
  s.replicas_ = absl::StrCat("`", prefix, "replicas`");
  const std::vector<std::pair<std::string, std::string>> replacements = {
      {"{bump_fence}", kBumpFence},
      {"{enqueue}", kEnqueue},
      {"{drop_entry}", kDropEntry},
      {"{queue_ahead}", kQueueAhead}};
  const std::vector<std::pair<std::string, std::string>> tables = {{"{locks}", s.locks_},
                                                                   {"{fences}", s.fences_},
                                                                   {"{meta}", s.meta_},
                                                                   {"{holders}", s.holders_},
                                                                   {"{queue}", s.queue_}};
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
  add("force", kForceBody, &s.force_proc_);
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
                   " kind TINYINT UNSIGNED NOT NULL DEFAULT 0,"
                   " lim INT UNSIGNED NOT NULL DEFAULT 0,"
                   " queue_until DATETIME(6) NOT NULL DEFAULT '1970-01-01 00:00:00',"
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
      absl::StrCat("CREATE TABLE IF NOT EXISTS ", holders_,
                   " (ns VARBINARY(64) NOT NULL,"
                   " name VARBINARY(512) NOT NULL,"
                   " owner VARBINARY(256) NOT NULL,"
                   " mode TINYINT UNSIGNED NOT NULL,"
                   " permits INT UNSIGNED NOT NULL,"
                   " hold_count INT UNSIGNED NOT NULL,"
                   " token BIGINT UNSIGNED NOT NULL,"
                   " expires_at DATETIME(6) NOT NULL,"
                   " last_kind TINYINT UNSIGNED NOT NULL DEFAULT 0,"
                   " last_request_id VARBINARY(128) NOT NULL DEFAULT '',"
                   " last_hold_count INT UNSIGNED NOT NULL DEFAULT 0,"
                   " last_ttl_us BIGINT NOT NULL DEFAULT 0,"
                   " PRIMARY KEY (ns, name, owner),"
                   " KEY expires (expires_at))"
                   " ENGINE=InnoDB"),
      absl::StrCat("CREATE TABLE IF NOT EXISTS ", queue_,
                   " (id BIGINT UNSIGNED NOT NULL AUTO_INCREMENT,"
                   " ns VARBINARY(64) NOT NULL,"
                   " name VARBINARY(512) NOT NULL,"
                   " owner VARBINARY(256) NOT NULL,"
                   " replica VARBINARY(32) NOT NULL,"
                   " mode TINYINT UNSIGNED NOT NULL,"
                   " permits INT UNSIGNED NOT NULL,"
                   " lim INT UNSIGNED NOT NULL,"
                   " until DATETIME(6) NOT NULL,"
                   " PRIMARY KEY (ns, name, id),"
                   " UNIQUE KEY entry (ns, name, owner, replica),"
                   " KEY id (id),"
                   " KEY until (until))"
                   " ENGINE=InnoDB"),
      absl::StrCat("CREATE TABLE IF NOT EXISTS ", replicas_,
                   " (replica VARBINARY(32) NOT NULL,"
                   " until DATETIME(6) NOT NULL,"
                   " PRIMARY KEY (replica))"
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
  // Upgrades from older layouts, one step per version, each followed by an
  // UPDATE of schema_version. Version 1 is the first layout.
  if (stored < 2) {
    // 1 -> 2: the locks row learns the kind of its holders and its queue's
    // mark; the holders and queue tables were created above. Rows of version
    // 1 are exclusive locks without a queue: the defaults say so.
    r = Run(conn,
            absl::StrCat("SELECT COUNT(*) FROM information_schema.COLUMNS"
                         " WHERE TABLE_SCHEMA = DATABASE() AND TABLE_NAME = '",
                         schema.locks().substr(1, schema.locks().size() - 2),
                         "' AND COLUMN_NAME = 'queue_until'"),
            "look for the version 2 columns");
    if (!r.ok()) return r.status();
    if (r->rows.size() != 1 || !r->rows[0][0] || *r->rows[0][0] != "1") {
      r = Run(conn,
              absl::StrCat("ALTER TABLE ", schema.locks(),
                           " ADD COLUMN kind TINYINT UNSIGNED NOT NULL DEFAULT 0,"
                           " ADD COLUMN lim INT UNSIGNED NOT NULL DEFAULT 0,"
                           " ADD COLUMN queue_until DATETIME(6) NOT NULL"
                           " DEFAULT '1970-01-01 00:00:00'"),
              "upgrade the locks table to schema version 2");
      if (!r.ok()) return r.status();
    }
    r = Run(conn, absl::StrCat("UPDATE ", schema.meta(), " SET v = 2 WHERE k = 'schema_version'"),
            "record schema version 2");
    if (!r.ok()) return r.status();
  }

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
