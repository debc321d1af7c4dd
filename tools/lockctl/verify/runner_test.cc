#include "tools/lockctl/verify/runner.h"

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/support/status_matchers.h"

namespace lockd::lockctl::verify {
namespace {

using ::lockd::testing::StatusIs;
using ::testing::ElementsAre;
using ::testing::HasSubstr;

TEST(RunnerFlagsTest, WorkloadListsParseInOrder) {
  EXPECT_THAT(*ParseWorkloads("rw,mutex"), ElementsAre(Workload::kRw, Workload::kMutex));
  EXPECT_THAT(
      *ParseWorkloads("mutex,rw,semaphore,acquire-all"),
      ElementsAre(Workload::kMutex, Workload::kRw, Workload::kSemaphore, Workload::kAcquireAll));
}

TEST(RunnerFlagsTest, UnknownOrRepeatedWorkloadIsNamed) {
  absl::StatusOr<std::vector<Workload>> bad = ParseWorkloads("mutex,queue");
  EXPECT_THAT(bad, StatusIs(absl::StatusCode::kInvalidArgument));
  EXPECT_THAT(bad.status().message(), HasSubstr("\"queue\""));
  EXPECT_THAT(ParseWorkloads("mutex,mutex"), StatusIs(absl::StatusCode::kInvalidArgument));
  EXPECT_THAT(ParseWorkloads(""), StatusIs(absl::StatusCode::kInvalidArgument));
}

TEST(RunnerFlagsTest, ApiMode) {
  EXPECT_EQ(*ParseApiMode("session"), ApiMode::kSession);
  EXPECT_EQ(*ParseApiMode("unary"), ApiMode::kUnary);
  EXPECT_EQ(*ParseApiMode("both"), ApiMode::kBoth);
  EXPECT_THAT(ParseApiMode("grpc"), StatusIs(absl::StatusCode::kInvalidArgument));
}

}  // namespace
}  // namespace lockd::lockctl::verify
