#include "tests/support/lockd_process.h"

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "grpcpp/create_channel.h"
#include "grpcpp/security/credentials.h"

namespace lockd::testing {

std::string LockdBinary() { return LOCKD_BINARY; }

absl::StatusOr<std::unique_ptr<LockdProcess>> LockdProcess::Start(
    const std::vector<std::string>& flags, const std::string& log_dir, absl::Duration timeout) {
  // A free port can be taken by another process before lockd binds it (tests
  // run in parallel); lockd then exits with "cannot listen on", and a new
  // port is tried.
  for (int attempt = 1;; ++attempt) {
    auto p = std::unique_ptr<LockdProcess>(new LockdProcess());
    p->port_ = FreePort();
    std::vector<std::string> argv = {LockdBinary()};
    argv.insert(argv.end(), flags.begin(), flags.end());
    argv.push_back(absl::StrCat("--listen=127.0.0.1:", p->port_));
    absl::StatusOr<std::unique_ptr<Subprocess>> sp =
        Subprocess::Start(argv, absl::StrCat(log_dir, "/lockd-", p->port_, ".log"));
    if (!sp.ok()) return sp.status();
    p->process_ = *std::move(sp);
    bool up = WaitFor(
        [&] {
          return !p->process_->Running() ||
                 absl::StrContains(p->process_->Log(), "lockd serving on");
        },
        timeout);
    if (up && p->process_->Running()) return p;
    std::string log = p->process_->Log();
    p->process_->Kill();
    if (attempt < 5 && absl::StrContains(log, "cannot listen on")) continue;
    return absl::UnavailableError(absl::StrCat("lockd did not start; its log:\n", log));
  }
}

std::string LockdProcess::address() const { return absl::StrCat("127.0.0.1:", port_); }

std::shared_ptr<grpc::Channel> LockdProcess::NewChannel() const {
  return grpc::CreateChannel(address(), grpc::InsecureChannelCredentials());
}

}  // namespace lockd::testing
