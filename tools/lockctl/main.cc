// lockctl: command-line client of lockd. See `lockctl --help`.

#include <cstdlib>
#include <iostream>
#include <map>
#include <string>
#include <vector>

#include "tools/lockctl/lockctl.h"
#include "tools/lockctl/verify/checker.h"
#include "tools/lockctl/verify/worker.h"
#include "util/version.h"

int main(int argc, char** argv) {
  std::vector<std::string> args(argv + 1, argv + argc);
  // A worker of `lockctl verify` (hidden: verify starts it).
  if (args.size() == 1 && args[0] == lockd::lockctl::verify::kWorkerCommand) {
    return lockd::lockctl::verify::RunWorker();
  }
  std::map<std::string, std::string> env;
  for (const char* key : {"LOCKD_SERVER", "LOCKD_NAMESPACE"}) {
    if (const char* v = std::getenv(key)) env[key] = v;
  }
  absl::StatusOr<lockd::lockctl::Invocation> inv = lockd::lockctl::ParseArgs(args, env);
  if (!inv.ok()) {
    const bool verify = lockd::lockctl::CommandOf(args) == "verify";
    std::cerr << "lockctl: " << inv.status().message() << "\n"
              << "Run `lockctl " << (verify ? "verify " : "") << "--help` for usage.\n";
    return verify ? int{lockd::lockctl::verify::kVerifyUsage} : int{lockd::lockctl::kExitUsage};
  }
  if (inv->version) {
    std::cout << lockd::VersionLine("lockctl") << "\n";
    return lockd::lockctl::kExitOk;
  }
  if (inv->help) {
    std::cout << lockd::lockctl::Usage(inv->command);
    return lockd::lockctl::kExitOk;
  }
  return lockd::lockctl::Execute(*inv, std::cout, std::cerr);
}
