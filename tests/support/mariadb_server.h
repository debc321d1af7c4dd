// Test support: a private MariaDB server for one test binary. It is
// initialized with `mariadb-install-db` in a fresh temporary directory and
// runs `mariadbd` as the current user on a free loopback port with its own
// socket and pid files, small InnoDB buffers and relaxed log flushing (fast
// start, fast commits; a killed server still keeps every committed row,
// because the log is written to the OS at each commit).
//
// The server gets a database and a password-authenticated user with all
// privileges on that database only, which is what lockd needs in
// production. Root (no password, Unix socket only) is used for setup and
// for Query().
//
// Not thread-safe: used by one test thread (lockd processes and backends
// connect to it concurrently, of course).

#ifndef LOCKD_TESTS_SUPPORT_MARIADB_SERVER_H_
#define LOCKD_TESTS_SUPPORT_MARIADB_SERVER_H_

#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "tests/support/process.h"

namespace lockd::testing {

class MariadbServer {
 public:
  struct Options {
    std::string database = "lockd";
    std::string user = "lockd";
    // Also serve TLS with a self-signed certificate for 127.0.0.1 (needs the
    // `openssl` command); tls_ca() is then the certificate to trust.
    bool tls = false;
  };

  // Initializes the data directory, starts the server, waits until it
  // answers (up to 60 s), creates the database and user. Errors:
  // kFailedPrecondition if the MariaDB binaries are not installed; otherwise
  // the failure with the server's log.
  static absl::StatusOr<std::unique_ptr<MariadbServer>> Start(const Options& options);
  static absl::StatusOr<std::unique_ptr<MariadbServer>> Start() { return Start(Options()); }

  // Kills the server and removes its directory.
  ~MariadbServer();

  MariadbServer(const MariadbServer&) = delete;
  MariadbServer& operator=(const MariadbServer&) = delete;

  const std::string& host() const { return host_; }  // "127.0.0.1"
  int port() const { return port_; }
  const std::string& socket() const { return socket_; }
  const std::string& database() const { return options_.database; }
  const std::string& user() const { return options_.user; }
  const std::string& password() const { return password_; }
  // A file holding the password (for --mysql.password_file).
  const std::string& password_file() const { return password_file_; }
  // The CA certificate to trust when Options::tls is set.
  const std::string& tls_ca() const { return tls_ca_; }
  // A scratch directory removed with the server (for lockd logs etc.).
  const std::string& dir() const { return dir_.path(); }

  // lockd flags that select this server over TCP as the lockd user:
  // --backend=mysql --mysql.host=... --mysql.port=... --mysql.user=...
  // --mysql.password_file=... --mysql.database=... --mysql.table_prefix=...
  std::vector<std::string> LockdFlags(const std::string& table_prefix) const;

  // Clean shutdown (SIGTERM); waits until the process is gone.
  absl::Status Stop();
  // Crash (SIGKILL); waits until the process is gone.
  void Kill();
  // Starts the server again on the same port and data directory and waits
  // until it answers. REQUIRES: stopped or killed.
  absl::Status Restart();
  bool running();

  // Runs `sql` as root in the database with the `mariadb` command-line
  // client and returns its tab-separated output (no column names).
  absl::StatusOr<std::string> Query(const std::string& sql);

  // The server's log so far.
  std::string Log() const;

 private:
  explicit MariadbServer(const Options& options) : options_(options) {}
  absl::Status Launch();
  absl::Status WaitReady(absl::Duration timeout);
  absl::StatusOr<std::string> RunClient(const std::string& sql, bool use_database);

  Options options_;
  TempDir dir_;
  std::string host_ = "127.0.0.1";
  int port_ = 0;
  std::string datadir_;
  std::string socket_;
  std::string password_;
  std::string password_file_;
  std::string tls_ca_, tls_cert_, tls_key_;
  std::string mariadbd_, client_;
  int launches_ = 0;
  std::unique_ptr<Subprocess> process_;
};

}  // namespace lockd::testing

#endif  // LOCKD_TESTS_SUPPORT_MARIADB_SERVER_H_
