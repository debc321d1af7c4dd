// Test helper: a lockd process on a fixed free port that can be stopped and
// started again on the same port (the memory backend forgets every hold on a
// restart, which is how these tests make a held lease get lost).
// Not thread-safe: used by one test thread.

#ifndef LOCKD_TESTS_INTEGRATION_CLIENTS_RESTARTABLE_LOCKD_H_
#define LOCKD_TESTS_INTEGRATION_CLIENTS_RESTARTABLE_LOCKD_H_

#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "tests/support/lockd_process.h"
#include "tests/support/process.h"

namespace lockd::testing {

class RestartableLockd {
 public:
  // `flags` are added to --listen; --lease.min=100ms lets tests use short leases.
  explicit RestartableLockd(std::string dir, std::vector<std::string> flags = {"--lease.min=100ms"})
      : dir_(std::move(dir)), flags_(std::move(flags)), port_(FreePort()) {}

  absl::Status Start() {
    absl::StatusOr<std::unique_ptr<LockdProcess>> p =
        LockdProcess::StartOnPort(port_, flags_, dir_);
    if (!p.ok()) return p.status();
    lockd_ = *std::move(p);
    return absl::OkStatus();
  }

  void Kill() {
    if (lockd_ != nullptr) lockd_->process().Kill();
  }

  absl::Status Restart() {
    Kill();
    return Start();
  }

  std::string address() const { return absl::StrCat("127.0.0.1:", port_); }
  int port() const { return port_; }

 private:
  std::string dir_;
  std::vector<std::string> flags_;
  int port_;
  std::unique_ptr<LockdProcess> lockd_;
};

}  // namespace lockd::testing

#endif  // LOCKD_TESTS_INTEGRATION_CLIENTS_RESTARTABLE_LOCKD_H_
