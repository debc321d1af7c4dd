// Unit tests of NewBackendFromConfig that need no server: option errors it
// reports before any connection is tried. Its own target, because it links
// every backend's client library (lockd_service_test does not).

#include "service/backend_factory.h"

#include <string>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "service/config.h"
#include "tests/support/temp_file.h"

namespace lockd {
namespace {

using ::lockd::testing::WriteTempFile;
using ::testing::AllOf;
using ::testing::HasSubstr;
using ::testing::Not;

std::string Message(const absl::Status& s) { return std::string(s.message()); }

TEST(BackendOptionsTest, PasswordAndPasswordFileTogetherAreAnErrorForRedisAndMysql) {
  std::string file = WriteTempFile("password", "from-file-8f3a\n");
  for (std::string backend : {"redis", "mysql"}) {
    auto parsed = ParseConfig({"--backend=" + backend, "--" + backend + ".password_file=" + file},
                              {{EnvName(backend + ".password"), "from-env-5c1d"}});
    ASSERT_TRUE(parsed.ok()) << parsed.status();
    // Refused before any connection is tried.
    auto started = NewBackendFromConfig(parsed->config);
    ASSERT_EQ(started.status().code(), absl::StatusCode::kInvalidArgument) << backend;
    EXPECT_THAT(Message(started.status()),
                AllOf(HasSubstr(backend + ".password_file: " + backend + ".password is set too"),
                      Not(HasSubstr("8f3a")), Not(HasSubstr("5c1d"))));
  }
}

}  // namespace
}  // namespace lockd
