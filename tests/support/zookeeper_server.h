// Test support: a real, standalone ZooKeeper server (Debian's `zookeeper`
// package, run as `java ... org.apache.zookeeper.server.ZooKeeperServerMain`)
// on a free loopback port with its data in a temporary directory, for the
// conformance and integration tests of the zookeeper backend.
//
// The server runs with a small tickTime so that short session timeouts
// (down to 2 ticks) are allowed and expire quickly, the admin HTTP server
// off, and every four-letter-word command enabled (ruok, srvr, wchs, dump...).
//
// Not thread-safe: one test thread drives it. The server is killed if the
// test process dies, and stopped when the object is destroyed.

#ifndef LOCKD_TESTS_SUPPORT_ZOOKEEPER_SERVER_H_
#define LOCKD_TESTS_SUPPORT_ZOOKEEPER_SERVER_H_

#include <memory>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "tests/support/process.h"

namespace lockd::testing {

class ZooKeeperServer {
 public:
  struct Options {
    // ZooKeeper's time unit; sessions may be as short as 2 ticks.
    absl::Duration tick_time = absl::Milliseconds(100);
    absl::Duration max_session_timeout = absl::Seconds(60);
    // fsync the transaction log on every write (ZooKeeper's default). Off by
    // default here: tests need no durability across a power cut, and a
    // restart with SIGTERM or SIGKILL keeps the data either way.
    bool force_sync = false;
    // How often the server deletes empty container nodes (lockd's lock and
    // namespace nodes). ZooKeeper's default is one minute.
    absl::Duration container_check_interval = absl::Seconds(60);
    // How long Start()/Restart() wait for the server to answer "ruok".
    absl::Duration start_timeout = absl::Seconds(120);
  };

  // Starts a server and waits until it answers. kUnavailable (with the
  // server's log) if it does not; kNotFound if Java or the ZooKeeper jars are
  // missing.
  static absl::StatusOr<std::unique_ptr<ZooKeeperServer>> Start(const Options& options);
  static absl::StatusOr<std::unique_ptr<ZooKeeperServer>> Start() { return Start(Options()); }

  ~ZooKeeperServer();
  ZooKeeperServer(const ZooKeeperServer&) = delete;
  ZooKeeperServer& operator=(const ZooKeeperServer&) = delete;

  int port() const { return port_; }
  // The connect string for clients: "127.0.0.1:<port>".
  std::string hosts() const;

  // Stops the server with SIGTERM (SIGKILL after 10 s) and waits for it to
  // exit. The data directory is kept. No-op if not running.
  void Stop();
  // Kills the server with SIGKILL (no shutdown at all).
  void Kill();
  // Starts the server again on the same port and data directory (sessions
  // and znodes survive, as in a real restart) and waits until it answers.
  absl::Status Restart();
  // SIGSTOP / SIGCONT: the process keeps its socket but answers nothing, so
  // clients time out and, if paused longer than their session timeout, their
  // sessions expire when it resumes.
  void Pause();
  void Resume();
  bool running();

  // Sends a four-letter-word command ("ruok", "srvr", "wchs", "dump", ...)
  // and returns the answer.
  absl::StatusOr<std::string> Command(absl::string_view word) const;

  std::string Log() const;
  const std::string& dir() const { return dir_.path(); }

 private:
  explicit ZooKeeperServer(const Options& options) : options_(options) {}
  absl::Status Launch();

  Options options_;
  TempDir dir_;
  int port_ = 0;
  std::string java_;
  std::string classpath_;
  std::unique_ptr<Subprocess> process_;
  int launches_ = 0;
};

}  // namespace lockd::testing

#endif  // LOCKD_TESTS_SUPPORT_ZOOKEEPER_SERVER_H_
