// A file with given contents for a test to read back (configuration files,
// password files), for unit tests too: header-only, needs only GoogleTest.

#ifndef LOCKD_TESTS_SUPPORT_TEMP_FILE_H_
#define LOCKD_TESTS_SUPPORT_TEMP_FILE_H_

#include <unistd.h>

#include <cstdio>
#include <fstream>
#include <set>
#include <string>

#include "gtest/gtest.h"

namespace lockd::testing {

namespace temp_file_internal {
// The files written so far; removed when the process exits normally.
class Written {
 public:
  static Written& Get() {
    static Written written;
    return written;
  }
  void Add(const std::string& path) { paths_.insert(path); }
  ~Written() {
    for (const std::string& p : paths_) std::remove(p.c_str());
  }

 private:
  std::set<std::string> paths_;
};
}  // namespace temp_file_internal

// Writes `contents` to a file named after `name` in GoogleTest's temporary
// directory (::testing::TempDir()) and returns its path. The path includes
// this process's id, so test binaries running at the same time never share a
// file; within one process the same `name` is the same file (overwritten).
// The file is removed when the process exits normally.
// A write that fails is a test failure (ADD_FAILURE), and the path is still
// returned.
// Not thread-safe: call it from the test's main thread.
inline std::string WriteTempFile(const std::string& name, const std::string& contents) {
  std::string path = ::testing::TempDir() + "/lockd-" + std::to_string(::getpid()) + "-" + name;
  temp_file_internal::Written::Get().Add(path);
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out << contents;
  out.close();
  if (!out) ADD_FAILURE() << "cannot write " << path;
  return path;
}

}  // namespace lockd::testing

#endif  // LOCKD_TESTS_SUPPORT_TEMP_FILE_H_
