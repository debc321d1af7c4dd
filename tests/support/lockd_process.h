// Test support: a `lockd` binary running as a child process on a loopback
// port, for multi-process and end-to-end tests. The one way tests start
// lockd and wait until it serves.
//
// Not thread-safe: each object is used by one test thread.

#ifndef LOCKD_TESTS_SUPPORT_LOCKD_PROCESS_H_
#define LOCKD_TESTS_SUPPORT_LOCKD_PROCESS_H_

#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "grpcpp/channel.h"
#include "tests/support/process.h"

namespace lockd::testing {

// Path of the lockd binary built with the tests.
std::string LockdBinary();

class LockdProcess {
 public:
  // Starts lockd with `flags` plus --listen=127.0.0.1:<free port>, logging to
  // <log_dir>/lockd-<port>.log, and waits (up to `timeout`) until it logs
  // that it is serving. If another process takes the port first, retries on
  // another. On failure (kUnavailable) the error includes the log.
  static absl::StatusOr<std::unique_ptr<LockdProcess>> Start(
      const std::vector<std::string>& flags, const std::string& log_dir,
      absl::Duration timeout = absl::Seconds(30));

  // As Start, on `port` (no retry on another port): for a lockd that is
  // restarted where its clients expect it.
  static absl::StatusOr<std::unique_ptr<LockdProcess>> StartOnPort(
      int port, const std::vector<std::string>& flags, const std::string& log_dir,
      absl::Duration timeout = absl::Seconds(30));

  // Starts lockd on `port` (0: a free port) without waiting for it to serve,
  // so that several start-ups can overlap; call WaitUntilServing() next.
  // Each start logs to a file of its own (lockd-<port>[-<n>].log).
  static absl::StatusOr<std::unique_ptr<LockdProcess>> Launch(const std::vector<std::string>& flags,
                                                              const std::string& log_dir,
                                                              int port = 0);

  // Waits up to `timeout` until lockd logs that it is serving. kUnavailable
  // (with the log) if it exits or does not serve in time.
  absl::Status WaitUntilServing(absl::Duration timeout = absl::Seconds(30));

  int port() const { return port_; }
  std::string address() const;
  Subprocess& process() { return *process_; }
  std::shared_ptr<grpc::Channel> NewChannel() const;

 private:
  int port_ = 0;
  std::unique_ptr<Subprocess> process_;
};

}  // namespace lockd::testing

#endif  // LOCKD_TESTS_SUPPORT_LOCKD_PROCESS_H_
