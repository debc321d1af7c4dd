#include "backends/mysql/mysql_client.h"

#include <errmsg.h>
#include <mysql.h>

#include <algorithm>
#include <mutex>

#include "absl/strings/str_cat.h"

namespace lockd {
namespace {

// The C client counts these timeouts in whole seconds; 0 would mean "none".
unsigned int WholeSeconds(absl::Duration d) {
  int64_t s = absl::ToInt64Seconds(absl::Ceil(d, absl::Seconds(1)));
  return static_cast<unsigned int>(std::clamp<int64_t>(s, 1, 86400));
}

void InitLibraryOnce() {
  // mysql_library_init is not thread-safe; every worker may connect first.
  static std::once_flag once;
  std::call_once(once, [] { mysql_library_init(0, nullptr, nullptr); });
}

}  // namespace

bool IsConnectionError(unsigned code) {
  switch (code) {
    case 1040:  // ER_CON_COUNT_ERROR: too many connections
    case 1053:  // ER_SERVER_SHUTDOWN
    case 1152:  // ER_ABORTING_CONNECTION
    case 1153:  // ER_NET_PACKET_TOO_LARGE
    case 1158:  // ER_NET_READ_ERROR
    case 1159:  // ER_NET_READ_INTERRUPTED
    case 1160:  // ER_NET_ERROR_ON_WRITE
    case 1161:  // ER_NET_WRITE_INTERRUPTED
    case 1184:  // ER_NEW_ABORTING_CONNECTION
    case 1203:  // ER_TOO_MANY_USER_CONNECTIONS
    case 1927:  // ER_CONNECTION_KILLED (MariaDB)
    case 3169:  // ER_SESSION_WAS_KILLED (MySQL)
    case 4031:  // ER_CLIENT_INTERACTION_TIMEOUT (MySQL)
      return true;
    default:
      break;
  }
  // Every client-side error (2000-2999, and Connector/C's own 5000-5999)
  // leaves the protocol state unknown: the only safe thing is a new
  // connection.
  return (code >= CR_MIN_ERROR && code <= CR_MAX_ERROR) || (code >= 5000 && code <= 5999);
}

bool IsRetryableTransactionError(unsigned code) {
  return code == kErLockDeadlock || code == kErLockWaitTimeout;
}

absl::Status MysqlErrorFromCode(absl::string_view context, unsigned code,
                                absl::string_view message) {
  std::string text = absl::StrCat("mysql ", context, ": ", message, " (error ", code, ")");
  switch (code) {
    case 1045:  // ER_ACCESS_DENIED_ERROR
    case 1698:  // ER_ACCESS_DENIED_NO_PASSWORD_ERROR
    case 1251:  // ER_NOT_SUPPORTED_AUTH_MODE
    case 2059:  // CR_AUTH_PLUGIN_CANNOT_LOAD
    case 2061:  // CR_AUTH_PLUGIN_ERR
      return absl::UnauthenticatedError(text);
    case 1044:  // ER_DBACCESS_DENIED_ERROR
    case 1049:  // ER_BAD_DB_ERROR
    case 1142:  // ER_TABLEACCESS_DENIED_ERROR
    case 1227:  // ER_SPECIFIC_ACCESS_DENIED_ERROR
    case 1370:  // ER_PROCACCESS_DENIED_ERROR
      return absl::FailedPreconditionError(text);
    case kErLockWaitTimeout:
    case kErLockDeadlock:
    case 1290:  // ER_OPTION_PREVENTS_STATEMENT (--read-only, e.g. mid-failover)
    case 1317:  // ER_QUERY_INTERRUPTED
    case 1792:  // ER_CANT_EXECUTE_IN_READ_ONLY_TRANSACTION
    case 1836:  // ER_READ_ONLY_MODE
    case 1969:  // ER_STATEMENT_TIMEOUT (MariaDB max_statement_time)
    case 3024:  // ER_QUERY_TIMEOUT (MySQL max_execution_time)
      return absl::UnavailableError(text);
    default:
      break;
  }
  if (IsConnectionError(code)) return absl::UnavailableError(text);
  return absl::InternalError(text);
}

absl::Status MysqlError(absl::string_view context, st_mysql* mysql) {
  if (mysql == nullptr) return absl::InternalError(absl::StrCat("mysql ", context, ": no handle"));
  return MysqlErrorFromCode(context, mysql_errno(mysql), mysql_error(mysql));
}

absl::StatusOr<std::unique_ptr<MysqlConnection>> MysqlConnection::Connect(
    const MysqlOptions& options, bool use_database, unsigned* error_code) {
  InitLibraryOnce();
  if (error_code != nullptr) *error_code = 0;
  MYSQL* mysql = mysql_init(nullptr);
  if (mysql == nullptr) return absl::ResourceExhaustedError("mysql_init: out of memory");
  std::unique_ptr<MysqlConnection> conn(new MysqlConnection(mysql));

  unsigned int connect_timeout = WholeSeconds(options.connect_timeout);
  unsigned int read_timeout = WholeSeconds(options.read_timeout);
  unsigned int write_timeout = WholeSeconds(options.write_timeout);
  mysql_options(mysql, MYSQL_OPT_CONNECT_TIMEOUT, &connect_timeout);
  mysql_options(mysql, MYSQL_OPT_READ_TIMEOUT, &read_timeout);
  mysql_options(mysql, MYSQL_OPT_WRITE_TIMEOUT, &write_timeout);
  mysql_options(mysql, MYSQL_SET_CHARSET_NAME, "utf8mb4");
  unsigned int no_local_infile = 0;
  mysql_options(mysql, MYSQL_OPT_LOCAL_INFILE, &no_local_infile);
  // Reconnecting silently would lose the session settings below and hide an
  // ambiguous statement; the backend reconnects itself.
  my_bool no_reconnect = 0;
  mysql_options(mysql, MYSQL_OPT_RECONNECT, &no_reconnect);
  if (options.ssl_mode != MysqlSslMode::kDisabled) {
    my_bool enforce = 1;
    my_bool verify = options.ssl_mode == MysqlSslMode::kVerifyIdentity ? 1 : 0;
    mysql_options(mysql, MYSQL_OPT_SSL_ENFORCE, &enforce);
    mysql_options(mysql, MYSQL_OPT_SSL_VERIFY_SERVER_CERT, &verify);
    if (!options.ssl_ca.empty()) mysql_options(mysql, MYSQL_OPT_SSL_CA, options.ssl_ca.c_str());
    if (!options.ssl_cert.empty()) {
      mysql_options(mysql, MYSQL_OPT_SSL_CERT, options.ssl_cert.c_str());
    }
    if (!options.ssl_key.empty()) mysql_options(mysql, MYSQL_OPT_SSL_KEY, options.ssl_key.c_str());
  }

  const bool use_socket = !options.socket.empty();
  std::string where = use_socket ? options.socket : absl::StrCat(options.host, ":", options.port);
  if (mysql_real_connect(mysql, use_socket ? "localhost" : options.host.c_str(),
                         options.user.c_str(), options.password.c_str(),
                         use_database ? options.database.c_str() : nullptr,
                         use_socket ? 0 : static_cast<unsigned int>(options.port),
                         use_socket ? options.socket.c_str() : nullptr,
                         CLIENT_FOUND_ROWS | CLIENT_MULTI_RESULTS) == nullptr) {
    if (error_code != nullptr) *error_code = mysql_errno(mysql);
    return MysqlError(absl::StrCat("connect to ", where, " as ", options.user), mysql);
  }
  // UTC keeps NOW(6) free of daylight-saving jumps; READ COMMITTED avoids gap
  // locks (two inserters of one new lock would otherwise deadlock); a short
  // lock wait fails fast into the bounded retry instead of outliving the
  // client's read timeout.
  for (absl::string_view sql :
       {"SET SESSION time_zone = '+00:00', SESSION sql_mode = "
        "'STRICT_ALL_TABLES,NO_ENGINE_SUBSTITUTION', SESSION innodb_lock_wait_timeout = 1",
        "SET SESSION TRANSACTION ISOLATION LEVEL READ COMMITTED"}) {
    MysqlOutcome o = conn->Query(sql, "session setup");
    if (!o.result.ok()) {
      if (error_code != nullptr) *error_code = o.error_code;
      return o.result.status();
    }
  }
  return conn;
}

MysqlConnection::~MysqlConnection() { mysql_close(mysql_); }

MysqlOutcome MysqlConnection::Query(absl::string_view sql, absl::string_view context) {
  MysqlOutcome out;
  auto fail = [&]() {
    out.error_code = mysql_errno(mysql_);
    out.result = MysqlError(context, mysql_);
    if (IsConnectionError(out.error_code)) broken_ = true;
    return std::move(out);
  };
  if (mysql_real_query(mysql_, sql.data(), static_cast<unsigned long>(sql.size())) != 0) {
    return fail();
  }
  MysqlResult result;
  while (true) {
    MYSQL_RES* res = mysql_store_result(mysql_);
    if (res != nullptr) {
      unsigned int fields = mysql_num_fields(res);
      while (MYSQL_ROW row = mysql_fetch_row(res)) {
        unsigned long* lengths = mysql_fetch_lengths(res);
        MysqlRow r(fields);
        for (unsigned int i = 0; i < fields; ++i) {
          if (row[i] != nullptr) r[i].emplace(row[i], lengths[i]);
        }
        result.rows.push_back(std::move(r));
      }
      mysql_free_result(res);
    } else if (mysql_field_count(mysql_) != 0) {
      return fail();  // a result set was expected but could not be read
    } else {
      result.affected_rows = mysql_affected_rows(mysql_);
    }
    int next = mysql_next_result(mysql_);
    if (next < 0) break;
    if (next > 0) return fail();
  }
  out.result = std::move(result);
  return out;
}

MysqlOutcome MysqlConnection::Ping() {
  MysqlOutcome out;
  if (mysql_ping(mysql_) == 0) {
    out.result = MysqlResult{};
    return out;
  }
  out.error_code = mysql_errno(mysql_);
  out.result = MysqlError("ping", mysql_);
  if (IsConnectionError(out.error_code)) broken_ = true;
  return out;
}

std::string MysqlConnection::TlsDescription() const {
  const char* cipher = mysql_get_ssl_cipher(mysql_);
  return cipher == nullptr ? "" : cipher;
}

std::string SqlBytes(absl::string_view bytes) {
  static constexpr char kHex[] = "0123456789ABCDEF";
  std::string out;
  out.reserve(bytes.size() * 2 + 3);
  out += "X'";
  for (unsigned char c : bytes) {
    out += kHex[c >> 4];
    out += kHex[c & 0xf];
  }
  out += '\'';
  return out;
}

std::string EscapeLike(absl::string_view text) {
  std::string out;
  out.reserve(text.size());
  for (char c : text) {
    if (c == '!' || c == '%' || c == '_') out += '!';
    out += c;
  }
  return out;
}

}  // namespace lockd
