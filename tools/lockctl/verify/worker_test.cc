#include "tools/lockctl/verify/worker.h"

#include "gtest/gtest.h"
#include "tests/support/status_matchers.h"

namespace lockd::lockctl::verify {
namespace {

using ::lockd::testing::StatusIs;

TEST(WorkerConfigTest, EveryFieldRoundTrips) {
  WorkerConfig c;
  c.server = "a:1,b:2";
  c.ns = "lockd-verify";
  c.owner = "lockd-verify-1-p3";
  c.session = false;
  c.ttl = absl::Milliseconds(1500);
  c.wait = absl::Seconds(3);
  c.rpc_timeout = absl::Seconds(4);
  c.tls = {true, "/ca.pem", "/c.pem", "/k.pem", "lockd.example"};
  c.auth = {"tok\ten", "/token"};
  absl::StatusOr<WorkerConfig> back = DecodeConfig(EncodeConfig(c));
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ(back->server, c.server);
  EXPECT_EQ(back->owner, c.owner);
  EXPECT_FALSE(back->session);
  EXPECT_EQ(back->ttl, c.ttl);
  EXPECT_EQ(back->wait, c.wait);
  EXPECT_EQ(back->rpc_timeout, c.rpc_timeout);
  EXPECT_TRUE(back->tls.enabled);
  EXPECT_EQ(back->tls.server_name, "lockd.example");
  EXPECT_EQ(back->tls.key_file, "/k.pem");
  EXPECT_EQ(back->auth.bearer_token, "tok\ten");
  EXPECT_EQ(back->auth.bearer_token_file, "/token");
}

TEST(WorkerConfigTest, UnknownKeyIsNamed) {
  absl::StatusOr<WorkerConfig> c = DecodeConfig({"config", "colour", "red"});
  EXPECT_THAT(c, StatusIs(absl::StatusCode::kInvalidArgument));
  EXPECT_NE(c.status().message().find("colour"), std::string::npos);
}

TEST(TaskTest, AcquireAllOpRoundTrips) {
  Task op;
  op.id = 42;
  op.kind = TaskKind::kAll;
  op.hold = absl::Microseconds(12345);
  op.locks = {{"verify/all/2", 0, 0}, {"verify/all/0", 0, 0}};
  absl::StatusOr<Task> back = DecodeTask(EncodeTask(op));
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ(back->id, 42u);
  EXPECT_EQ(back->kind, TaskKind::kAll);
  EXPECT_EQ(back->hold, op.hold);
  ASSERT_EQ(back->locks.size(), 2u);
  EXPECT_EQ(back->locks[0].name, "verify/all/2");
  EXPECT_TRUE(TaskWrites(*back));
}

TEST(TaskTest, SemaphoreOpKeepsLimitAndPermitsAndDoesNotWrite) {
  Task op;
  op.kind = TaskKind::kSemaphore;
  op.locks = {{"verify/semaphore", 3, 2}};
  absl::StatusOr<Task> back = DecodeTask(EncodeTask(op));
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ(back->locks[0].limit, 3u);
  EXPECT_EQ(back->locks[0].permits, 2u);
  EXPECT_FALSE(TaskWrites(*back));
  EXPECT_FALSE(TaskWrites(Task{1, TaskKind::kShared, absl::ZeroDuration(), {{"r", 0, 0}}}));
}

TEST(TaskTest, MalformedOpsAreRejected) {
  EXPECT_THAT(DecodeTask({"task", "1", "lock", "10"}),
              StatusIs(absl::StatusCode::kInvalidArgument));
  EXPECT_THAT(DecodeTask({"task", "1", "mutex", "10", "n", "0", "0"}),
              StatusIs(absl::StatusCode::kInvalidArgument));
  EXPECT_THAT(DecodeTask({"task", "x", "lock", "10", "n", "0", "0"}),
              StatusIs(absl::StatusCode::kInvalidArgument));
}

TEST(CodeNameTest, RoundTrips) {
  EXPECT_EQ(CodeName(absl::StatusCode::kDeadlineExceeded), "DEADLINE_EXCEEDED");
  EXPECT_EQ(CodeFromName("FAILED_PRECONDITION"), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(CodeFromName("nonsense"), absl::StatusCode::kUnknown);
}

}  // namespace
}  // namespace lockd::lockctl::verify
