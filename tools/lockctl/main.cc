// lockctl: command-line client of lockd. See `lockctl --help`.

#include <cstdlib>
#include <iostream>
#include <map>
#include <string>
#include <vector>

#include "tools/lockctl/lockctl.h"
#include "util/version.h"

int main(int argc, char** argv) {
  std::vector<std::string> args(argv + 1, argv + argc);
  std::map<std::string, std::string> env;
  for (const char* key : {"LOCKD_SERVER", "LOCKD_NAMESPACE"}) {
    if (const char* v = std::getenv(key)) env[key] = v;
  }
  absl::StatusOr<lockd::lockctl::Invocation> inv = lockd::lockctl::ParseArgs(args, env);
  if (!inv.ok()) {
    std::cerr << "lockctl: " << inv.status().message() << "\n"
              << "Run `lockctl --help` for usage.\n";
    return lockd::lockctl::kExitUsage;
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
