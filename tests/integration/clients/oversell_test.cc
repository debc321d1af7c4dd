// The oversell example (clients/examples/oversell) against a real Redis and a
// real lockd: without the lock it oversells, with the lock it sells exactly
// the stock.

#include <sys/wait.h>

#include <memory>
#include <string>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/support/lockd_process.h"
#include "tests/support/process.h"

namespace lockd {
namespace {

using ::lockd::testing::CanConnect;
using ::lockd::testing::FindExecutable;
using ::lockd::testing::FreePort;
using ::lockd::testing::LockdProcess;
using ::lockd::testing::Subprocess;
using ::lockd::testing::TempDir;
using ::lockd::testing::WaitFor;

// The number after "oversold " on the line starting with `prefix`; -1 if none.
int64_t Oversold(const std::string& output, absl::string_view prefix) {
  for (absl::string_view line : absl::StrSplit(output, '\n')) {
    if (!absl::StartsWith(line, prefix)) continue;
    size_t at = line.rfind("oversold ");
    int64_t n;
    if (at != absl::string_view::npos && absl::SimpleAtoi(line.substr(at + 9), &n)) return n;
  }
  return -1;
}

TEST(OversellExampleTest, OversellsWithoutTheLockAndNeverWithIt) {
  std::string redis_server = FindExecutable({"redis-server"});
  if (redis_server.empty()) GTEST_SKIP() << "redis-server is not installed";
  TempDir tmp;
  int redis_port = FreePort();
  absl::StatusOr<std::unique_ptr<Subprocess>> redis =
      Subprocess::Start({redis_server, "--port", absl::StrCat(redis_port), "--bind", "127.0.0.1",
                         "--save", "", "--appendonly", "no", "--dir", tmp.path()},
                        absl::StrCat(tmp.path(), "/redis.log"));
  ASSERT_TRUE(redis.ok()) << redis.status();
  ASSERT_TRUE(WaitFor([&] { return CanConnect(redis_port); }, absl::Seconds(20)))
      << (*redis)->Log();
  absl::StatusOr<std::unique_ptr<LockdProcess>> lockd = LockdProcess::Start({}, tmp.path());
  ASSERT_TRUE(lockd.ok()) << lockd.status();

  std::string output;
  int64_t unlocked = -1;
  // The unlocked race is all but certain with 8 workers; allow two retries.
  for (int attempt = 0; attempt < 3 && unlocked <= 0; ++attempt) {
    std::string log = absl::StrCat(tmp.path(), "/oversell-", attempt, ".log");
    absl::StatusOr<std::unique_ptr<Subprocess>> run =
        Subprocess::Start({OVERSELL_BINARY, "--redis", absl::StrCat("127.0.0.1:", redis_port),
                           "--lockd", (*lockd)->address(), "--stock", "100", "--workers", "8"},
                          log);
    ASSERT_TRUE(run.ok()) << run.status();
    int status = (*run)->Wait(absl::Seconds(60));
    output = (*run)->Log();
    ASSERT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << output;
    EXPECT_EQ(Oversold(output, "with lock:"), 0) << output;
    EXPECT_THAT(output, ::testing::HasSubstr("sold 100 of 100"));
    unlocked = Oversold(output, "without lock:");
  }
  EXPECT_GT(unlocked, 0) << output;
}

}  // namespace
}  // namespace lockd
