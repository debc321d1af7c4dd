#include "backends/redis/redis_client.h"

#include <cstdlib>
#include <string>

#include "backends/common/errors.h"
#include "backends/redis/replies.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/support/status_matchers.h"

namespace lockd::redis {
namespace {

using ::lockd::testing::StatusIs;
using ::testing::HasSubstr;
using ::testing::Not;

redisReply ErrorReply(std::string& text) {
  redisReply r{};
  r.type = REDIS_REPLY_ERROR;
  r.str = text.data();
  r.len = text.size();
  return r;
}

TEST(RedisErrorTest, ConnectionFailuresAreUnavailableAndNameTheOperation) {
  absl::Status s = RedisError("acquire of lock \"a\" in namespace \"b\"", nullptr, nullptr);
  EXPECT_THAT(s, StatusIs(absl::StatusCode::kUnavailable));
  EXPECT_THAT(s.message(), HasSubstr("acquire of lock \"a\" in namespace \"b\""));
}

TEST(RedisErrorTest, RetryableServerStatesAreUnavailable) {
  for (std::string text :
       {"LOADING Redis is loading the dataset in memory", "BUSY Redis is busy running a script",
        "READONLY You can't write", "MASTERDOWN Link with MASTER is down", "TRYAGAIN",
        "CLUSTERDOWN x", "MOVED 3999 127.0.0.1:6381", "NOAUTH Authentication required.",
        "OOM command not allowed"}) {
    redisReply r = ErrorReply(text);
    absl::Status s = RedisError("release of lock \"x\"", nullptr, &r);
    EXPECT_THAT(s, StatusIs(absl::StatusCode::kUnavailable)) << text;
    EXPECT_THAT(s.message(), HasSubstr("release of lock \"x\"")) << text;
    EXPECT_THAT(s.message(), HasSubstr(text));
  }
}

TEST(RedisErrorTest, OtherErrorsAreInternal) {
  std::string text = "WRONGTYPE Operation against a key holding the wrong kind of value";
  redisReply r = ErrorReply(text);
  EXPECT_THAT(RedisError("renew", nullptr, &r), StatusIs(absl::StatusCode::kInternal));
  std::string script = "ERR user_script:1: Script attempted to access nonexistent global";
  r = ErrorReply(script);
  EXPECT_THAT(RedisError("renew", nullptr, &r), StatusIs(absl::StatusCode::kInternal));
}

TEST(RedisErrorTest, UnexpectedReplyTypeIsInternal) {
  redisReply r{};
  r.type = REDIS_REPLY_INTEGER;
  absl::Status s = RedisError("describe of lock \"x\"", nullptr, &r);
  EXPECT_THAT(s, StatusIs(absl::StatusCode::kInternal));
  EXPECT_THAT(s.message(), HasSubstr("unexpected"));
}

TEST(RedisErrorTest, ReplyErrorsNameTheOperationAndLockAsTheOtherBackendsDo) {
  absl::StatusOr<ReplyPtr> reply(ReplyPtr(static_cast<redisReply*>(calloc(1, sizeof(redisReply)))));
  (*reply)->type = REDIS_REPLY_INTEGER;  // a release reply is an array
  uint64_t freed = 0;
  absl::StatusOr<ReleaseResult> r = ParseRelease(LockKey{"orders", "a/b"}, reply, &freed);
  EXPECT_THAT(r, StatusIs(absl::StatusCode::kInternal));
  EXPECT_THAT(r.status().message(),
              HasSubstr("release of lock " + LockName(LockKey{"orders", "a/b"})));
}

TEST(IsConnectionErrorTest, ReplicaAndLoadingDropTheConnection) {
  std::string ro = "READONLY You can't write against a read only replica.";
  redisReply r = ErrorReply(ro);
  EXPECT_TRUE(IsConnectionError(&r));
  std::string other = "ERR something";
  r = ErrorReply(other);
  EXPECT_FALSE(IsConnectionError(&r));
  EXPECT_FALSE(IsConnectionError(nullptr));
}

TEST(ParseAddressesTest, ParsesLists) {
  absl::StatusOr<std::vector<Endpoint>> a =
      ParseAddresses("127.0.0.1:6379, redis.example:7000,[::1]:6380");
  ASSERT_TRUE(a.ok()) << a.status();
  ASSERT_EQ(a->size(), 3u);
  EXPECT_EQ((*a)[0].host, "127.0.0.1");
  EXPECT_EQ((*a)[0].port, 6379);
  EXPECT_EQ((*a)[1].host, "redis.example");
  EXPECT_EQ((*a)[1].port, 7000);
  EXPECT_EQ((*a)[2].host, "::1");
  EXPECT_EQ((*a)[2].port, 6380);
}

TEST(ParseAddressesTest, RejectsMalformedNamingTheOption) {
  for (std::string bad :
       {"", "localhost", ":6379", "host:0", "host:70000", "host:x", "[::1:6379"}) {
    absl::StatusOr<std::vector<Endpoint>> a = ParseAddresses(bad);
    EXPECT_THAT(a, StatusIs(absl::StatusCode::kInvalidArgument)) << bad;
    EXPECT_THAT(a.status().message(), HasSubstr("redis.addresses")) << bad;
  }
}

TEST(ConnectTest, UnreachableServerIsUnavailable) {
  ConnectionOptions o;
  o.addresses = {Endpoint{"127.0.0.1", 1}};
  o.connect_timeout = absl::Milliseconds(200);
  size_t next = 0;
  absl::StatusOr<ContextPtr> c = Connect(o, {}, &next);
  EXPECT_THAT(c, StatusIs(absl::StatusCode::kUnavailable));
  EXPECT_THAT(c.status().message(), HasSubstr("127.0.0.1:1"));
}

TEST(ConnectTest, ErrorsNeverContainThePassword) {
  ConnectionOptions o;
  o.addresses = {Endpoint{"127.0.0.1", 1}};
  o.password = "s3cret-pa55";
  o.connect_timeout = absl::Milliseconds(200);
  size_t next = 0;
  absl::StatusOr<ContextPtr> c = Connect(o, {}, &next);
  EXPECT_THAT(c.status().message(), Not(HasSubstr("s3cret-pa55")));
}

}  // namespace
}  // namespace lockd::redis
