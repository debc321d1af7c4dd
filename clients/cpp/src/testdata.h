// Test-only: the shared test vectors every client's tests read,
// clients/testdata/*.json (LOCKD_CLIENT_TESTDATA_DIR is set by CMake), as
// protobuf Structs. Not installed.

#ifndef LOCKD_CLIENTS_CPP_SRC_TESTDATA_H_
#define LOCKD_CLIENTS_CPP_SRC_TESTDATA_H_

#include <fstream>
#include <sstream>
#include <string>

#include "google/protobuf/struct.pb.h"
#include "google/protobuf/util/json_util.h"
#include "gtest/gtest.h"

namespace lockd::client_internal {

// The whole of clients/testdata/`file` (a test failure if it does not parse).
inline google::protobuf::Struct LoadTestdata(const std::string& file) {
  const std::string path = std::string(LOCKD_CLIENT_TESTDATA_DIR) + "/" + file;
  std::ifstream in(path);
  std::stringstream json;
  json << in.rdbuf();
  google::protobuf::Struct all;
  EXPECT_TRUE(google::protobuf::util::JsonStringToMessage(json.str(), &all).ok()) << path;
  return all;
}

}  // namespace lockd::client_internal

#endif  // LOCKD_CLIENTS_CPP_SRC_TESTDATA_H_
