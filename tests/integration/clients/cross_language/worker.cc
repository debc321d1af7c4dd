// The C++ worker of cross_language_test.py: TARGET NAME COUNTER_FILE
// ITERATIONS. Each iteration takes the lockd lock NAME (through
// lockd::Lockable and std::lock_guard), checks its fencing token against the
// largest the counter file has seen, and writes the count + 1 with its token.
// Exit 0 when done, 3 on a token not larger than the last one written (a fencing
// violation), 1 on any other error.

#include <unistd.h>

#include <cstdio>
#include <fstream>
#include <iostream>
#include <mutex>
#include <string>

#include "lockd/client.h"
#include "lockd/lockable.h"

int main(int argc, char** argv) {
  if (argc != 5) {
    std::cerr << "usage: worker TARGET NAME COUNTER_FILE ITERATIONS\n";
    return 1;
  }
  const std::string file = argv[3];
  absl::StatusOr<lockd::Client> client = lockd::Client::Connect(argv[1]);
  if (!client.ok()) {
    std::cerr << client.status() << "\n";
    return 1;
  }
  lockd::AcquireOptions options;
  options.wait = absl::Seconds(60);
  lockd::Lockable counter(*client, argv[2], options);
  try {
    for (int i = 0, n = std::stoi(argv[4]); i < n; ++i) {
      std::lock_guard<lockd::Lockable> held(counter);
      const uint64_t token = counter.lease()->fencing_token();
      uint64_t count = 0, seen = 0;
      std::ifstream(file) >> count >> seen;
      if (token <= seen) {
        std::cerr << "fencing violation: token " << token << " after " << seen << "\n";
        return 3;
      }
      usleep(2000);
      std::ofstream(file + ".cpp") << count + 1 << " " << token << "\n";
      std::rename((file + ".cpp").c_str(), file.c_str());
    }
  } catch (const lockd::LockError& e) {
    std::cerr << e.what() << "\n";
    return 1;
  }
  return 0;
}
