#include "backends/redis/sentinel.h"

#include <hiredis/read.h>

#include <string>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/support/status_matchers.h"

namespace lockd::redis {
namespace {

using ::lockd::testing::StatusIs;
using ::testing::HasSubstr;

// The reply that hiredis parses from `resp`, the protocol text a server
// would send.
ReplyPtr Reply(const std::string& resp) {
  redisReader* reader = redisReaderCreate();
  redisReaderFeed(reader, resp.data(), resp.size());
  void* reply = nullptr;
  int rc = redisReaderGetReply(reader, &reply);
  redisReaderFree(reader);
  EXPECT_EQ(rc, REDIS_OK);
  EXPECT_NE(reply, nullptr) << "incomplete reply: " << resp;
  return ReplyPtr(static_cast<redisReply*>(reply));
}

TEST(ParseMasterAddressTest, HostAndPort) {
  ReplyPtr r = Reply("*2\r\n$9\r\n127.0.0.1\r\n$4\r\n6380\r\n");
  absl::StatusOr<std::optional<Endpoint>> e = ParseMasterAddress("ask", r.get());
  ASSERT_THAT(e.status(), StatusIs(absl::StatusCode::kOk));
  ASSERT_TRUE(e->has_value());
  EXPECT_EQ((*e)->host, "127.0.0.1");
  EXPECT_EQ((*e)->port, 6380);
}

TEST(ParseMasterAddressTest, NilMeansTheMasterSetIsUnknown) {
  ReplyPtr r = Reply("*-1\r\n");
  absl::StatusOr<std::optional<Endpoint>> e = ParseMasterAddress("ask", r.get());
  ASSERT_THAT(e.status(), StatusIs(absl::StatusCode::kOk));
  EXPECT_FALSE(e->has_value());
  r = Reply("$-1\r\n");
  e = ParseMasterAddress("ask", r.get());
  ASSERT_THAT(e.status(), StatusIs(absl::StatusCode::kOk));
  EXPECT_FALSE(e->has_value());
}

TEST(ParseMasterAddressTest, MalformedRepliesAreInternalErrors) {
  for (std::string resp :
       {"*1\r\n$9\r\n127.0.0.1\r\n", "*2\r\n$9\r\n127.0.0.1\r\n$1\r\n0\r\n",
        "*2\r\n$9\r\n127.0.0.1\r\n$5\r\n70000\r\n", "*2\r\n$9\r\n127.0.0.1\r\n$2\r\nab\r\n",
        "*2\r\n$0\r\n\r\n$2\r\n80\r\n", "*2\r\n$9\r\n127.0.0.1\r\n:6379\r\n", ":1\r\n"}) {
    ReplyPtr r = Reply(resp);
    EXPECT_THAT(ParseMasterAddress("ask s1", r.get()).status(),
                StatusIs(absl::StatusCode::kInternal, HasSubstr("ask s1")))
        << resp;
  }
}

TEST(ParseMasterAddressTest, ErrorReplyKeepsItsText) {
  ReplyPtr r = Reply("-NOAUTH Authentication required.\r\n");
  EXPECT_THAT(ParseMasterAddress("ask", r.get()).status(),
              StatusIs(absl::StatusCode::kUnavailable, HasSubstr("NOAUTH")));
}

TEST(ParseRoleTest, MasterIsAPrimary) {
  ReplyPtr r = Reply("*3\r\n$6\r\nmaster\r\n:3129659\r\n*0\r\n");
  EXPECT_THAT(ParseRole("redis 127.0.0.1:6379", r.get()), StatusIs(absl::StatusCode::kOk));
}

TEST(ParseRoleTest, ReplicaIsUnavailable) {
  ReplyPtr r =
      Reply("*5\r\n$5\r\nslave\r\n$9\r\n127.0.0.1\r\n:9753\r\n$9\r\nconnected\r\n:3167038\r\n");
  EXPECT_THAT(ParseRole("redis 127.0.0.1:6380", r.get()),
              StatusIs(absl::StatusCode::kUnavailable,
                       ::testing::AllOf(HasSubstr("127.0.0.1:6380"), HasSubstr("slave"))));
}

TEST(ParseRoleTest, SentinelIsUnavailable) {
  ReplyPtr r = Reply("*2\r\n$8\r\nsentinel\r\n*1\r\n$8\r\nmymaster\r\n");
  EXPECT_THAT(ParseRole("x", r.get()), StatusIs(absl::StatusCode::kUnavailable));
}

TEST(ParseRoleTest, MalformedIsInternal) {
  ReplyPtr r = Reply("*0\r\n");
  EXPECT_THAT(ParseRole("x", r.get()), StatusIs(absl::StatusCode::kInternal));
  r = Reply("+OK\r\n");
  EXPECT_THAT(ParseRole("x", r.get()), StatusIs(absl::StatusCode::kInternal));
}

TEST(ParseSwitchMasterTest, NameOldAndNewAddress) {
  std::optional<SwitchMaster> sw = ParseSwitchMaster("mymaster 127.0.0.1 6379 127.0.0.1 6380");
  ASSERT_TRUE(sw.has_value());
  EXPECT_EQ(sw->master_name, "mymaster");
  EXPECT_EQ(sw->from.host, "127.0.0.1");
  EXPECT_EQ(sw->from.port, 6379);
  EXPECT_EQ(sw->to.host, "127.0.0.1");
  EXPECT_EQ(sw->to.port, 6380);
}

TEST(ParseSwitchMasterTest, MalformedPayloadsAreRejected) {
  for (const char* m :
       {"", "mymaster", "mymaster 127.0.0.1 6379 127.0.0.1",
        "mymaster 127.0.0.1 6379 127.0.0.1 port", "mymaster 127.0.0.1 0 127.0.0.1 6380",
        "mymaster 127.0.0.1 6379 127.0.0.1 6380 extra"}) {
    EXPECT_FALSE(ParseSwitchMaster(m).has_value()) << m;
  }
}

RedisOptions SentinelMode() {
  RedisOptions o;
  o.mode = RedisMode::kSentinel;
  return o;
}

TEST(SentinelOptionsOfTest, DefaultsToMymasterWithoutCredentials) {
  absl::StatusOr<SentinelOptions> s = SentinelOptionsOf(SentinelMode());
  ASSERT_THAT(s.status(), StatusIs(absl::StatusCode::kOk));
  EXPECT_EQ(s->master_name, "mymaster");
  EXPECT_EQ(s->username, "");
  EXPECT_EQ(s->password, "");
}

TEST(SentinelOptionsOfTest, InvalidOptionsNameTheOption) {
  RedisOptions o = SentinelMode();
  o.sentinel_master = "";
  EXPECT_THAT(SentinelOptionsOf(o).status(),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("redis.sentinel_master")));
  o.sentinel_master = "my master";
  EXPECT_THAT(SentinelOptionsOf(o).status(),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("redis.sentinel_master")));
  o = SentinelMode();
  o.sentinel_username = "watcher";
  EXPECT_THAT(SentinelOptionsOf(o).status(),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("redis.sentinel_username")));
  o.sentinel_password = "secret";
  EXPECT_THAT(SentinelOptionsOf(o).status(), StatusIs(absl::StatusCode::kOk));
}

}  // namespace
}  // namespace lockd::redis
