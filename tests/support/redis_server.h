// Test support: a real `redis-server` child process on a free loopback port,
// in its own temporary directory, for the redis backend's tests.
//
// Not thread-safe: each object is used by one test thread.

#ifndef LOCKD_TESTS_SUPPORT_REDIS_SERVER_H_
#define LOCKD_TESTS_SUPPORT_REDIS_SERVER_H_

#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "tests/support/process.h"

namespace lockd::testing {

class RedisServer {
 public:
  struct Options {
    // requirepass: AUTH <password> is needed (the default user's password).
    std::string password;
    // An extra ACL user with all permissions (needs acl_password).
    std::string acl_user;
    std::string acl_password;
    // Append-only file with fsync on every write, so that Restart() keeps the
    // data. Off by default: no RDB snapshots, no AOF, a restart loses all.
    bool persistence = false;
    // Extra redis-server arguments, e.g. {"--maxclients", "100"}.
    std::vector<std::string> extra_args;
  };

  // Starts redis-server (found in PATH or /usr/bin, /usr/sbin) and waits up to
  // `timeout` until it answers PING (or NOAUTH, when a password is set).
  // kNotFound if there is no redis-server binary; kUnavailable, with the
  // server's log, if it does not come up.
  static absl::StatusOr<std::unique_ptr<RedisServer>> Start(
      Options options, absl::Duration timeout = absl::Seconds(20));
  static absl::StatusOr<std::unique_ptr<RedisServer>> Start() { return Start(Options()); }

  // Stops the server (SIGTERM, SIGKILL after 10 s) if it runs.
  ~RedisServer();
  RedisServer(const RedisServer&) = delete;
  RedisServer& operator=(const RedisServer&) = delete;

  int port() const { return port_; }
  // "127.0.0.1:<port>".
  std::string address() const;
  const std::string& dir() const { return dir_.path(); }
  const Options& options() const { return options_; }
  bool running() const;
  // The server's log so far (all runs).
  std::string Log() const;

  // SIGTERM and wait (SIGKILL after `grace`). No-op if not running.
  void Stop(absl::Duration grace = absl::Seconds(10));
  // SIGKILL (no shutdown save, clients see the connection reset).
  void Kill();
  // Stops the server if it runs, then starts it again on the same port with
  // the same options, and waits until it answers.
  absl::Status Restart(absl::Duration timeout = absl::Seconds(20));
  // Stops (SIGSTOP) / resumes (SIGCONT) the process: a hung server.
  void Pause();
  void Resume();

 private:
  explicit RedisServer(Options options);
  absl::Status Launch(absl::Duration timeout);

  Options options_;
  TempDir dir_;
  int port_ = 0;
  std::string binary_;
  std::unique_ptr<Subprocess> process_;
};

// True if a RESP PING to 127.0.0.1:port is answered (+PONG, or -NOAUTH from
// a server that wants a password) within `timeout`.
bool RedisAnswersPing(int port, absl::Duration timeout = absl::Seconds(1));

}  // namespace lockd::testing

#endif  // LOCKD_TESTS_SUPPORT_REDIS_SERVER_H_
