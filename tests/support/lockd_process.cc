#include "tests/support/lockd_process.h"

#include <sys/stat.h>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "grpcpp/create_channel.h"
#include "grpcpp/security/credentials.h"

namespace lockd::testing {
namespace {

bool Exists(const std::string& path) {
  struct stat st;
  return ::stat(path.c_str(), &st) == 0;
}

}  // namespace

std::string LockdBinary() { return LOCKD_BINARY; }

absl::StatusOr<std::unique_ptr<LockdProcess>> LockdProcess::Launch(
    const std::vector<std::string>& flags, const std::string& log_dir, int port) {
  auto p = std::unique_ptr<LockdProcess>(new LockdProcess());
  p->port_ = port != 0 ? port : FreePort();
  std::vector<std::string> argv = {LockdBinary()};
  argv.insert(argv.end(), flags.begin(), flags.end());
  argv.push_back(absl::StrCat("--listen=", p->address()));
  // Logs are appended to: a restart on the same port gets a new file, so
  // that the previous run's "serving" line does not count.
  std::string log = absl::StrCat(log_dir, "/lockd-", p->port_, ".log");
  for (int n = 2; Exists(log); ++n)
    log = absl::StrCat(log_dir, "/lockd-", p->port_, "-", n, ".log");
  absl::StatusOr<std::unique_ptr<Subprocess>> sp = Subprocess::Start(argv, log);
  if (!sp.ok()) return sp.status();
  p->process_ = *std::move(sp);
  return p;
}

absl::Status LockdProcess::WaitUntilServing(absl::Duration timeout) {
  bool up = WaitFor(
      [&] {
        return !process_->Running() || absl::StrContains(process_->Log(), "lockd serving on");
      },
      timeout);
  if (up && process_->Running()) return absl::OkStatus();
  return absl::UnavailableError(absl::StrCat("lockd did not start; its log:\n", process_->Log()));
}

absl::StatusOr<std::unique_ptr<LockdProcess>> LockdProcess::StartOnPort(
    int port, const std::vector<std::string>& flags, const std::string& log_dir,
    absl::Duration timeout) {
  absl::StatusOr<std::unique_ptr<LockdProcess>> p = Launch(flags, log_dir, port);
  if (!p.ok()) return p.status();
  absl::Status up = (*p)->WaitUntilServing(timeout);
  if (!up.ok()) return up;
  return p;
}

absl::StatusOr<std::unique_ptr<LockdProcess>> LockdProcess::Start(
    const std::vector<std::string>& flags, const std::string& log_dir, absl::Duration timeout) {
  // A free port can be taken by another process before lockd binds it (tests
  // run in parallel); lockd then exits with "cannot listen on", and a new
  // port is tried.
  for (int attempt = 1;; ++attempt) {
    absl::StatusOr<std::unique_ptr<LockdProcess>> p = Launch(flags, log_dir);
    if (!p.ok()) return p.status();
    absl::Status up = (*p)->WaitUntilServing(timeout);
    if (up.ok()) return p;
    (*p)->process_->Kill();
    if (attempt < 5 && absl::StrContains(up.message(), "cannot listen on")) continue;
    return up;
  }
}

std::string LockdProcess::address() const { return absl::StrCat("127.0.0.1:", port_); }

std::shared_ptr<grpc::Channel> LockdProcess::NewChannel() const {
  return grpc::CreateChannel(address(), grpc::InsecureChannelCredentials());
}

}  // namespace lockd::testing
