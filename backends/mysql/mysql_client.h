// A thin, blocking wrapper of one MariaDB Connector/C connection (mysql.h),
// and the one place where the client's error numbers become absl::Status.
//
// Not thread-safe: a MysqlConnection belongs to one thread at a time (the
// backend gives each worker thread its own).

#ifndef LOCKD_BACKENDS_MYSQL_MYSQL_CLIENT_H_
#define LOCKD_BACKENDS_MYSQL_MYSQL_CLIENT_H_

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "backends/mysql/mysql_backend.h"

struct st_mysql;  // MYSQL, from mysql.h

namespace lockd {

// Server and client error numbers the backend treats specially.
inline constexpr unsigned kErDupEntry = 1062;
inline constexpr unsigned kErLockWaitTimeout = 1205;
inline constexpr unsigned kErLockDeadlock = 1213;

// The status for a failed call on `mysql` (or a failed connect).
//   kUnavailable       the connection is lost or cannot be made, the server is
//                      shutting down, overloaded, or a lock wait / deadlock
//                      outlasted the retries: retry the call later.
//   kUnauthenticated   the server refused the credentials.
//   kFailedPrecondition a missing privilege or database.
//   kInternal          anything else (a bug or an unexpected schema).
// The message names `context`, the server's message and the error number; the
// server never echoes passwords in its messages.
absl::Status MysqlError(absl::string_view context, st_mysql* mysql);
// The same, from an error number and message (testable without a server).
absl::Status MysqlErrorFromCode(absl::string_view context, unsigned code,
                                absl::string_view message);

// True if `code` means the connection is gone or unusable, so it must be
// closed and made again before the next statement.
bool IsConnectionError(unsigned code);
// True for errors after which the same transaction may simply be run again
// (deadlock, lock wait timeout): InnoDB rolled it back.
bool IsRetryableTransactionError(unsigned code);

// One result row; nullopt for SQL NULL.
using MysqlRow = std::vector<std::optional<std::string>>;

// Everything a statement (or a CALL) returned: the rows of every result set,
// concatenated, and the affected-row count of the last one.
struct MysqlResult {
  std::vector<MysqlRow> rows;
  uint64_t affected_rows = 0;
};

// The outcome of one statement: the status, and the error number when the
// server or client reported one (0 otherwise).
struct MysqlOutcome {
  absl::StatusOr<MysqlResult> result;
  unsigned error_code = 0;
};

class MysqlConnection {
 public:
  // Opens a connection with `options`' address, credentials, timeouts and
  // TLS settings, then pins the session: time zone UTC, READ COMMITTED,
  // strict SQL mode, 1 s InnoDB lock wait timeout. `database` may be empty
  // (no default database). Blocks up to about connect_timeout.
  // Errors as MysqlError; `error_code` (if non-null) gets the error number.
  static absl::StatusOr<std::unique_ptr<MysqlConnection>> Connect(const MysqlOptions& options,
                                                                  bool use_database,
                                                                  unsigned* error_code = nullptr);

  ~MysqlConnection();
  MysqlConnection(const MysqlConnection&) = delete;
  MysqlConnection& operator=(const MysqlConnection&) = delete;

  // Runs `sql` (one statement; a CALL may return result sets) and reads every
  // result. Blocks up to the read/write timeouts. On a connection error the
  // connection is unusable (broken() is true).
  MysqlOutcome Query(absl::string_view sql, absl::string_view context);

  // One round trip to check that the server still answers (after the
  // connection sat idle, when the server may have closed it). Errors as
  // Query.
  MysqlOutcome Ping();

  // True once a statement failed with a connection error.
  bool broken() const { return broken_; }

  // "TLSv1.3 / TLS_AES_256_GCM_SHA384" when the connection is encrypted,
  // empty otherwise.
  std::string TlsDescription() const;

 private:
  explicit MysqlConnection(st_mysql* mysql) : mysql_(mysql) {}
  st_mysql* mysql_;
  bool broken_ = false;
};

// `bytes` as a SQL hex literal (X'616263'; X'' for empty). Safe for any
// bytes, independent of the connection character set.
std::string SqlBytes(absl::string_view bytes);

// `text` escaped for LIKE ... ESCAPE '!' (escapes !, % and _).
std::string EscapeLike(absl::string_view text);

}  // namespace lockd

#endif  // LOCKD_BACKENDS_MYSQL_MYSQL_CLIENT_H_
