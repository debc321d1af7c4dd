// Test support: real ZooKeeper servers (Debian's `zookeeper` package) on free
// loopback ports with their data in temporary directories, for the
// conformance and integration tests of the zookeeper backend:
//   - ZooKeeperServer: one standalone server (`java ...
//     org.apache.zookeeper.server.ZooKeeperServerMain`);
//   - ZooKeeperEnsemble: a three-server quorum (`java ...
//     org.apache.zookeeper.server.quorum.QuorumPeerMain`), whose members are
//     ZooKeeperServers and can be killed and restarted one by one.
//
// The server runs with a small tickTime so that short session timeouts
// (down to 2 ticks) are allowed and expire quickly, the admin HTTP server
// off, and every four-letter-word command enabled (ruok, srvr, wchs, dump...).
//
// Not thread-safe: one test thread drives it. The server is killed if the
// test process dies, and stopped when the object is destroyed.

#ifndef LOCKD_TESTS_SUPPORT_ZOOKEEPER_SERVER_H_
#define LOCKD_TESTS_SUPPORT_ZOOKEEPER_SERVER_H_

#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

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
  friend class ZooKeeperEnsemble;

  ZooKeeperServer(const Options& options, std::string main_class)
      : options_(options), main_class_(std::move(main_class)) {}
  // Finds Java and the jars, picks the client port. kNotFound, kInternal.
  absl::Status Prepare();
  // zoo.cfg lines every server gets (dataDir, client port, timeouts...).
  std::string BaseConfig() const;
  // Spawn() then AwaitAnswer().
  absl::Status Launch();
  // Starts the Java process without waiting for it.
  absl::Status Spawn();
  // Waits until the server answers "ruok" (kUnavailable with its log if it
  // exits or does not answer within options_.start_timeout).
  absl::Status AwaitAnswer();

  Options options_;
  std::string main_class_;
  std::vector<std::string> jvm_flags_;  // added to the java command line
  TempDir dir_;
  int port_ = 0;
  std::string java_;
  std::string classpath_;
  std::unique_ptr<Subprocess> process_;
  int launches_ = 0;
};

// Three ZooKeeper servers forming one quorum on loopback:
// `server.N=127.0.0.1:<peer port>:<election port>` lines, a `myid` file each,
// every port free, each server's data and log in its own temporary
// directory. With the default tickTime of 100 ms a leader election after a
// member dies takes about a second.
//
// Not thread-safe: one test thread drives it (as for ZooKeeperServer, start
// it from a thread that outlives it). Every member is killed if the test
// process dies, and stopped when the object is destroyed.
class ZooKeeperEnsemble {
 public:
  struct Options {
    // Per server, as for ZooKeeperServer (start_timeout also bounds the wait
    // for the first quorum).
    ZooKeeperServer::Options server;
    // Ticks a follower may take to connect and sync to a leader, and to fall
    // behind it before it is dropped. Generous: Java on a loaded machine.
    int init_limit = 50;
    int sync_limit = 20;
  };

  static constexpr int kSize = 3;

  // Starts the three servers at once and waits until a quorum serves (a
  // leader and a majority of followers). kUnavailable (with every log) if it
  // does not within options.server.start_timeout; kNotFound if Java or the
  // ZooKeeper jars are missing.
  static absl::StatusOr<std::unique_ptr<ZooKeeperEnsemble>> Start(const Options& options);
  static absl::StatusOr<std::unique_ptr<ZooKeeperEnsemble>> Start() { return Start(Options()); }

  // Stops the three members at once (SIGTERM, SIGKILL after 10 s).
  ~ZooKeeperEnsemble();
  ZooKeeperEnsemble(const ZooKeeperEnsemble&) = delete;
  ZooKeeperEnsemble& operator=(const ZooKeeperEnsemble&) = delete;

  // The connect string of all three: "127.0.0.1:a,127.0.0.1:b,127.0.0.1:c".
  std::string hosts() const;
  // Member i (0..kSize-1): its port, Command(), Log(), Pause()...
  ZooKeeperServer& server(int i) { return *servers_[i]; }
  const ZooKeeperServer& server(int i) const { return *servers_[i]; }

  // What member i says it is in its "srvr" answer ("leader", "follower"), or
  // "" if it is down or not serving (no quorum).
  std::string Mode(int i) const;
  // The index of the member that is leader, or -1 if none is.
  int Leader() const;
  // The index of the member a client with ZooKeeper session `session_id` is
  // connected to (from the members' "cons" answers), or -1 if none.
  int ServerOf(int64_t session_id) const;

  // SIGKILL member i (no shutdown at all). Its data directory is kept.
  void Kill(int i) { servers_[i]->Kill(); }
  // Starts member i again on its ports and data and waits until it answers
  // "ruok" (not until it has joined a quorum: see WaitForQuorum).
  absl::Status Restart(int i) { return servers_[i]->Restart(); }

  // Waits until a leader and enough followers to make a majority serve
  // clients. kUnavailable with every member's mode and log if they do not
  // within `timeout`.
  absl::Status WaitForQuorum(absl::Duration timeout);

  // Every member's log, headed by its index and port.
  std::string Logs() const;

 private:
  ZooKeeperEnsemble() = default;

  std::vector<std::unique_ptr<ZooKeeperServer>> servers_;
};

}  // namespace lockd::testing

#endif  // LOCKD_TESTS_SUPPORT_ZOOKEEPER_SERVER_H_
