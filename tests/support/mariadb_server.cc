#include "tests/support/mariadb_server.h"

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <random>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/strip.h"
#include "absl/time/clock.h"

namespace lockd::testing {
namespace {

std::string RandomHex(int bytes) {
  std::random_device rd;
  std::string out;
  for (int i = 0; i < bytes; ++i) absl::StrAppendFormat(&out, "%02x", rd() & 0xff);
  return out;
}

// Runs argv to completion (up to `timeout`); returns its output, or an error
// with the output if it failed.
absl::StatusOr<std::string> RunToEnd(const std::vector<std::string>& argv,
                                     const std::string& log_path, absl::Duration timeout) {
  ::unlink(log_path.c_str());
  absl::StatusOr<std::unique_ptr<Subprocess>> p = Subprocess::Start(argv, log_path);
  if (!p.ok()) return p.status();
  int status = (*p)->Wait(timeout);
  std::string out = ReadFileOrEmpty(log_path);
  if (status == -1) {
    (*p)->Kill();
    return absl::DeadlineExceededError(absl::StrCat(argv[0], " timed out:\n", out));
  }
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
    return absl::InternalError(absl::StrCat(argv[0], " failed (status ", status, "):\n", out));
  }
  return out;
}

// Small InnoDB buffers for a fast start; the log is written to the OS at each
// commit but synced once a second, and no doublewrite: fast commits on a
// shared CI machine, and a killed server (the test's "crash") still keeps
// every committed transaction, since the OS keeps running.
const std::vector<std::string>& InnodbFlags() {
  static const auto* flags = new std::vector<std::string>{
      "--innodb-buffer-pool-size=32M", "--innodb-log-file-size=16M",
      "--innodb-log-buffer-size=4M",   "--innodb-flush-log-at-trx-commit=2",
      "--innodb-doublewrite=0",        "--innodb-use-native-aio=0",
      "--skip-name-resolve",
  };
  return *flags;
}

}  // namespace

absl::StatusOr<std::unique_ptr<MariadbServer>> MariadbServer::Start(const Options& options) {
  std::unique_ptr<MariadbServer> s(new MariadbServer(options));
  if (s->dir_.path().empty()) return absl::InternalError("cannot create a temporary directory");
  s->mariadbd_ = FindExecutable({"mariadbd", "mysqld"});
  std::string install = FindExecutable({"mariadb-install-db", "mysql_install_db"});
  s->client_ = FindExecutable({"mariadb", "mysql"});
  if (s->mariadbd_.empty() || install.empty() || s->client_.empty()) {
    return absl::FailedPreconditionError(
        "MariaDB is not installed (need mariadbd, mariadb-install-db and mariadb; Debian: "
        "apt-get install mariadb-server mariadb-client)");
  }
  const std::string& dir = s->dir_.path();
  s->datadir_ = absl::StrCat(dir, "/data");
  s->socket_ = absl::StrCat(dir, "/mysqld.sock");
  s->password_ = RandomHex(12);
  s->password_file_ = absl::StrCat(dir, "/password");
  absl::Status w = WriteFile(s->password_file_, s->password_ + "\n");
  if (!w.ok()) return w;

  // --tmpdir: the bootstrap server's temporary tables go to this server's own
  // directory, not /tmp, where parallel tests' bootstraps collided
  // ("Error on delete of '/tmp/#sql-temptable-...'").
  std::vector<std::string> argv = {install,
                                   "--no-defaults",
                                   absl::StrCat("--datadir=", s->datadir_),
                                   absl::StrCat("--tmpdir=", dir),
                                   "--auth-root-authentication-method=normal",
                                   "--skip-test-db"};
  if (::geteuid() == 0) argv.push_back("--user=root");
  argv.insert(argv.end(), InnodbFlags().begin(), InnodbFlags().end());
  absl::StatusOr<std::string> installed =
      RunToEnd(argv, absl::StrCat(dir, "/install-db.log"), absl::Seconds(120));
  if (!installed.ok()) return installed.status();

  if (options.tls) {
    std::string openssl = FindExecutable({"openssl"});
    if (openssl.empty()) return absl::FailedPreconditionError("TLS needs the openssl command");
    s->tls_cert_ = absl::StrCat(dir, "/server-cert.pem");
    s->tls_key_ = absl::StrCat(dir, "/server-key.pem");
    absl::StatusOr<std::string> made =
        RunToEnd({openssl, "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "2", "-subj",
                  "/CN=127.0.0.1", "-addext", "subjectAltName=IP:127.0.0.1", "-keyout", s->tls_key_,
                  "-out", s->tls_cert_},
                 absl::StrCat(dir, "/openssl.log"), absl::Seconds(60));
    if (!made.ok()) return made.status();
    s->tls_ca_ = s->tls_cert_;  // self-signed
  }

  s->port_ = FreePort();
  absl::Status launched = s->Launch();
  if (!launched.ok()) return launched;

  // TCP clients match '%', socket clients 'localhost'; both get the password.
  const std::string& db = options.database;
  const std::string& user = options.user;
  std::string setup = absl::StrCat("CREATE DATABASE IF NOT EXISTS `", db, "`;");
  for (const char* host : {"%", "localhost"}) {
    absl::StrAppend(&setup, "CREATE USER IF NOT EXISTS '", user, "'@'", host, "' IDENTIFIED BY '",
                    s->password_, "'; GRANT ALL PRIVILEGES ON `", db, "`.* TO '", user, "'@'", host,
                    "';");
  }
  absl::StatusOr<std::string> created = s->RunClient(setup, /*use_database=*/false);
  if (!created.ok()) return created.status();
  return s;
}

MariadbServer::~MariadbServer() {
  // The data directory is deleted next: no need for a clean shutdown.
  Kill();
}

absl::Status MariadbServer::Launch() {
  std::vector<std::string> argv = {mariadbd_,
                                   "--no-defaults",
                                   absl::StrCat("--datadir=", datadir_),
                                   absl::StrCat("--port=", port_),
                                   "--bind-address=127.0.0.1",
                                   absl::StrCat("--socket=", socket_),
                                   absl::StrCat("--pid-file=", dir_.path(), "/mysqld.pid"),
                                   absl::StrCat("--tmpdir=", dir_.path()),
                                   "--max-connections=1000",
                                   "--performance-schema=OFF",
                                   "--skip-log-bin"};
  if (::geteuid() == 0) argv.push_back("--user=root");
  argv.insert(argv.end(), InnodbFlags().begin(), InnodbFlags().end());
  if (!tls_cert_.empty()) {
    argv.push_back(absl::StrCat("--ssl-cert=", tls_cert_));
    argv.push_back(absl::StrCat("--ssl-key=", tls_key_));
    argv.push_back(absl::StrCat("--ssl-ca=", tls_ca_));
  }
  ++launches_;
  absl::StatusOr<std::unique_ptr<Subprocess>> p =
      Subprocess::Start(argv, absl::StrCat(dir_.path(), "/mariadbd.log"));
  if (!p.ok()) return p.status();
  process_ = *std::move(p);
  return WaitReady(absl::Seconds(60));
}

absl::Status MariadbServer::WaitReady(absl::Duration timeout) {
  // "ready for connections" is logged once per start; count them.
  auto ready = [this] {
    std::string log = Log();
    int n = 0;
    for (size_t pos = 0; (pos = log.find("ready for connections", pos)) != std::string::npos;
         ++pos) {
      ++n;
    }
    return n >= launches_;
  };
  bool up =
      WaitFor([&] { return !process_->Running() || ready(); }, timeout, absl::Milliseconds(10));
  if (!up || !process_->Running()) {
    process_->Kill();
    return absl::UnavailableError(absl::StrCat("mariadbd did not start; its log:\n", Log()));
  }
  return absl::OkStatus();
}

std::vector<std::string> MariadbServer::LockdFlags(const std::string& table_prefix) const {
  std::vector<std::string> flags = {
      "--backend=mysql",
      absl::StrCat("--mysql.host=", host_),
      absl::StrCat("--mysql.port=", port_),
      absl::StrCat("--mysql.user=", options_.user),
      absl::StrCat("--mysql.password_file=", password_file_),
      absl::StrCat("--mysql.database=", options_.database),
      absl::StrCat("--mysql.table_prefix=", table_prefix),
  };
  return flags;
}

absl::Status MariadbServer::Stop() {
  if (process_ == nullptr || !process_->Running()) return absl::OkStatus();
  int status = process_->Stop(absl::Seconds(30));
  if (!WIFEXITED(status)) {
    return absl::InternalError(absl::StrCat("mariadbd did not stop cleanly (status ", status, ")"));
  }
  return absl::OkStatus();
}

void MariadbServer::Kill() {
  if (process_ != nullptr) process_->Kill();
}

absl::Status MariadbServer::Restart() {
  if (running()) return absl::FailedPreconditionError("mariadbd is still running");
  return Launch();
}

bool MariadbServer::running() { return process_ != nullptr && process_->Running(); }

absl::StatusOr<std::string> MariadbServer::Query(const std::string& sql) {
  return RunClient(sql, /*use_database=*/true);
}

absl::StatusOr<std::string> MariadbServer::RunClient(const std::string& sql, bool use_database) {
  std::vector<std::string> argv = {client_,
                                   "--no-defaults",
                                   "--protocol=socket",
                                   absl::StrCat("--socket=", socket_),
                                   "--user=root",
                                   "--batch",
                                   "--skip-column-names",
                                   "-e",
                                   sql};
  if (use_database) argv.push_back(options_.database);
  absl::StatusOr<std::string> out =
      RunToEnd(argv, absl::StrCat(dir_.path(), "/client.log"), absl::Seconds(60));
  if (!out.ok()) return out.status();
  return std::string(absl::StripTrailingAsciiWhitespace(*out));
}

std::string MariadbServer::Log() const {
  return ReadFileOrEmpty(absl::StrCat(dir_.path(), "/mariadbd.log"));
}

}  // namespace lockd::testing
