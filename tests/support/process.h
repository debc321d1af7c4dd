// Test support: child processes, free loopback ports and temporary
// directories, so that tests start the real servers they need themselves
// (never on fixed ports, never depending on a server started by hand).
//
// Not thread-safe: each object is used by one test thread.

#ifndef LOCKD_TESTS_SUPPORT_PROCESS_H_
#define LOCKD_TESTS_SUPPORT_PROCESS_H_

#include <sys/types.h>

#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"

namespace lockd::testing {

// A child process whose stdout and stderr go to a log file. It receives
// SIGKILL if the test process dies, and on destruction if still running.
// The death signal (PR_SET_PDEATHSIG) follows the *thread* that called
// Start(): start children from a thread that outlives them (normally the
// test's main thread), never from a short-lived std::thread.
class Subprocess {
 public:
  // Starts argv[0] (looked up in PATH) with `env` added to this process's
  // environment. kInternal if fork/exec fails.
  static absl::StatusOr<std::unique_ptr<Subprocess>> Start(
      const std::vector<std::string>& argv, const std::string& log_path,
      const std::map<std::string, std::string>& env = {});

  ~Subprocess();

  pid_t pid() const { return pid_; }
  const std::string& log_path() const { return log_path_; }
  // The log so far.
  std::string Log() const;

  // True while the child has not exited (reaps it if it has).
  bool Running();
  // Sends `sig` (no effect once exited).
  void Signal(int sig);
  // Waits up to `timeout` for the child to exit; returns its wait status
  // (as from waitpid) or -1 on timeout.
  int Wait(absl::Duration timeout);
  // SIGTERM, then SIGKILL after `grace`; returns the wait status.
  int Stop(absl::Duration grace = absl::Seconds(10));
  // SIGKILL and reap.
  void Kill();

 private:
  Subprocess() = default;
  pid_t pid_ = -1;
  bool exited_ = false;
  int status_ = 0;
  std::string log_path_;
};

// A loopback TCP port that was free a moment ago.
int FreePort();

// True if a TCP connection to 127.0.0.1:port succeeds.
bool CanConnect(int port);

// Polls `cond` every `step` until it is true (returns true) or `timeout`
// passes (returns false).
bool WaitFor(const std::function<bool()>& cond, absl::Duration timeout,
             absl::Duration step = absl::Milliseconds(20));

// A fresh directory under $TMPDIR (or /tmp), removed with its contents on
// destruction.
class TempDir {
 public:
  TempDir();
  ~TempDir();
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

std::string ReadFileOrEmpty(const std::string& path);
absl::Status WriteFile(const std::string& path, const std::string& contents);

// The first existing executable among `candidates` (absolute paths or names
// looked up in PATH), or "" if none.
std::string FindExecutable(const std::vector<std::string>& candidates);

}  // namespace lockd::testing

#endif  // LOCKD_TESTS_SUPPORT_PROCESS_H_
