#include "backends/redis/cluster_slots.h"

#include <hiredis/hiredis.h>

#include <string>

#include "absl/strings/str_cat.h"
#include "backends/redis/scripts.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/support/status_matchers.h"

namespace lockd::redis {
namespace {

using ::lockd::testing::StatusIs;

// A reply parsed from the Redis protocol, as a server sent it.
ReplyPtr Parse(absl::string_view resp) {
  redisReader* reader = redisReaderCreate();
  redisReaderFeed(reader, resp.data(), resp.size());
  void* reply = nullptr;
  EXPECT_EQ(redisReaderGetReply(reader, &reply), REDIS_OK);
  redisReaderFree(reader);
  EXPECT_NE(reply, nullptr) << "incomplete reply: " << resp;
  return ReplyPtr(static_cast<redisReply*>(reply));
}

std::string Bulk(absl::string_view s) { return absl::StrCat("$", s.size(), "\r\n", s, "\r\n"); }

// One CLUSTER SLOTS range as Redis 7.0 sends it: the primary, then one replica.
std::string Range(int first, int last, absl::string_view host, int port, int replica_port) {
  return absl::StrCat("*4\r\n:", first, "\r\n:", last, "\r\n", "*4\r\n", Bulk(host), ":", port,
                      "\r\n", Bulk("0123456789abcdef0123456789abcdef01234567"), "*0\r\n", "*4\r\n",
                      Bulk(host), ":", replica_port, "\r\n",
                      Bulk("fedcba9876543210fedcba9876543210fedcba98"), "*0\r\n");
}

TEST(Crc16Test, MatchesTheClusterSpecificationVector) {
  EXPECT_EQ(Crc16("123456789"), 0x31C3);
  EXPECT_EQ(Crc16(""), 0);
}

TEST(HashSlotTest, HashesTheWholeKeyWithoutATag) {
  EXPECT_EQ(HashSlot("123456789"), 12739);
  EXPECT_EQ(HashSlot("foo"), 12182);  // redis-cli: CLUSTER KEYSLOT foo
  EXPECT_EQ(HashSlot("bar"), 5061);
}

TEST(HashSlotTest, KeysWithTheSameTagShareASlot) {
  EXPECT_EQ(HashSlot("{user1000}.following"), HashSlot("{user1000}.followers"));
  EXPECT_EQ(HashSlot("{user1000}.following"), HashSlot("user1000"));
}

TEST(HashSlotTest, AnEmptyTagHashesTheWholeKey) {
  EXPECT_EQ(HashSlot("foo{}{bar}"), Crc16("foo{}{bar}") % kClusterSlots);
  EXPECT_NE(HashSlot("foo{}{bar}"), HashSlot("bar"));
}

TEST(HashSlotTest, TheTagEndsAtTheFirstClosingBrace) {
  EXPECT_EQ(HashSlot("foo{{bar}}zap"), HashSlot("{bar"));
  EXPECT_EQ(HashSlot("foo{{bar}}zap"), Crc16("{bar") % kClusterSlots);
  EXPECT_EQ(HashSlot("foo{bar}{zap}"), HashSlot("bar"));
  // An opening brace without a closing one: the whole key.
  EXPECT_EQ(HashSlot("foo{bar"), Crc16("foo{bar") % kClusterSlots);
}

TEST(HashSlotTest, AllKeysOfOneLockShareTheirChannelsSlot) {
  // The key layout of keys.h: everything between the braces is the tag.
  int slot = HashSlot("lockd:{ns:name}:lock");
  EXPECT_EQ(HashSlot("lockd:{ns:name}:fence"), slot);
  EXPECT_EQ(HashSlot("lockd:{ns:name}:freed"), slot);
  EXPECT_EQ(HashSlot("lockd:{ns:name}:rel"), slot);
  EXPECT_EQ(slot, HashSlot("ns:name"));
}

TEST(ClusterSlotsTest, ParsesThePrimaryOfEveryRange) {
  ReplyPtr r = Parse(absl::StrCat("*3\r\n", Range(0, 5460, "127.0.0.1", 7000, 7003),
                                  Range(5461, 10922, "127.0.0.1", 7001, 7004),
                                  Range(10923, 16383, "127.0.0.1", 7002, 7005)));
  absl::StatusOr<SlotMap> map = ParseClusterSlots(r.get(), {"10.0.0.1", 7000}, "test");
  ASSERT_TRUE(map.ok()) << map.status();
  ASSERT_EQ(map->primaries().size(), 3u);
  EXPECT_EQ(NodeName(map->primaries()[0]), "127.0.0.1:7000");
  EXPECT_EQ(NodeName(map->primaries()[2]), "127.0.0.1:7002");
  EXPECT_TRUE(map->complete());
  EXPECT_EQ(map->owner(0), 0);
  EXPECT_EQ(map->owner(5460), 0);
  EXPECT_EQ(map->owner(5461), 1);
  EXPECT_EQ(map->owner(16383), 2);
  EXPECT_EQ(map->FirstSlots(), (std::vector<int>{0, 5461, 10923}));
}

TEST(ClusterSlotsTest, ANodeWithSeveralRangesIsOnePrimary) {
  ReplyPtr r = Parse(absl::StrCat("*3\r\n", Range(0, 99, "127.0.0.1", 7000, 7003),
                                  Range(100, 199, "127.0.0.1", 7001, 7004),
                                  Range(200, 16383, "127.0.0.1", 7000, 7003)));
  absl::StatusOr<SlotMap> map = ParseClusterSlots(r.get(), {"127.0.0.1", 7000}, "test");
  ASSERT_TRUE(map.ok()) << map.status();
  EXPECT_EQ(map->primaries().size(), 2u);
  EXPECT_EQ(map->owner(150), 1);
  EXPECT_EQ(map->owner(200), 0);
  EXPECT_TRUE(map->complete());
}

TEST(ClusterSlotsTest, UncoveredSlotsHaveNoOwner) {
  ReplyPtr r = Parse(absl::StrCat("*1\r\n", Range(0, 16000, "127.0.0.1", 7000, 7003)));
  absl::StatusOr<SlotMap> map = ParseClusterSlots(r.get(), {"127.0.0.1", 7000}, "test");
  ASSERT_TRUE(map.ok()) << map.status();
  EXPECT_FALSE(map->complete());
  EXPECT_EQ(map->unassigned(), 383);
  EXPECT_EQ(map->owner(16001), -1);
}

TEST(ClusterSlotsTest, AnUnknownHostIsTheQueriedNodesHost) {
  ReplyPtr r = Parse("*1\r\n*3\r\n:0\r\n:16383\r\n*3\r\n$0\r\n\r\n:7000\r\n$2\r\nid\r\n");
  absl::StatusOr<SlotMap> map = ParseClusterSlots(r.get(), {"10.1.2.3", 7009}, "test");
  ASSERT_TRUE(map.ok()) << map.status();
  EXPECT_EQ(NodeName(map->primaries()[0]), "10.1.2.3:7000");

  r = Parse("*1\r\n*3\r\n:0\r\n:16383\r\n*2\r\n$1\r\n?\r\n:7000\r\n");
  map = ParseClusterSlots(r.get(), {"10.1.2.3", 7009}, "test");
  ASSERT_TRUE(map.ok()) << map.status();
  EXPECT_EQ(NodeName(map->primaries()[0]), "10.1.2.3:7000");
}

TEST(ClusterSlotsTest, AnEmptyReplyIsAnEmptyMap) {
  ReplyPtr r = Parse("*0\r\n");
  absl::StatusOr<SlotMap> map = ParseClusterSlots(r.get(), {"127.0.0.1", 7000}, "test");
  ASSERT_TRUE(map.ok()) << map.status();
  EXPECT_TRUE(map->primaries().empty());
  EXPECT_EQ(map->unassigned(), kClusterSlots);
}

TEST(ClusterSlotsTest, RejectsMalformedReplies) {
  ReplyPtr r = Parse("*1\r\n*3\r\n:10\r\n:5\r\n*2\r\n$1\r\nh\r\n:7000\r\n");
  EXPECT_THAT(ParseClusterSlots(r.get(), {"h", 1}, "cluster slots").status(),
              StatusIs(absl::StatusCode::kInternal, ::testing::HasSubstr("cluster slots")));
  r = Parse("*1\r\n*3\r\n:0\r\n:16384\r\n*2\r\n$1\r\nh\r\n:7000\r\n");
  EXPECT_THAT(ParseClusterSlots(r.get(), {"h", 1}, "x").status(),
              StatusIs(absl::StatusCode::kInternal));
  r = Parse("*1\r\n*3\r\n:0\r\n:100\r\n*1\r\n$1\r\nh\r\n");
  EXPECT_THAT(ParseClusterSlots(r.get(), {"h", 1}, "x").status(),
              StatusIs(absl::StatusCode::kInternal));
}

TEST(ClusterSlotsTest, AnErrorReplyIsAnError) {
  ReplyPtr r = Parse("-ERR This instance has cluster support disabled\r\n");
  EXPECT_THAT(ParseClusterSlots(r.get(), {"h", 1}, "cluster slots").status(),
              StatusIs(absl::StatusCode::kInternal, ::testing::HasSubstr("cluster support")));
  r = Parse("-CLUSTERDOWN The cluster is down\r\n");
  EXPECT_THAT(ParseClusterSlots(r.get(), {"h", 1}, "x").status(),
              StatusIs(absl::StatusCode::kUnavailable));
}

TEST(RedirectTest, ParsesMoved) {
  std::optional<Redirect> r = ParseRedirect("MOVED 3999 127.0.0.1:6381");
  ASSERT_TRUE(r.has_value());
  EXPECT_EQ(r->kind, Redirect::Kind::kMoved);
  EXPECT_EQ(r->slot, 3999);
  EXPECT_EQ(r->target.host, "127.0.0.1");
  EXPECT_EQ(r->target.port, 6381);
}

TEST(RedirectTest, ParsesAsk) {
  std::optional<Redirect> r = ParseRedirect("ASK 0 redis-2.example:7002");
  ASSERT_TRUE(r.has_value());
  EXPECT_EQ(r->kind, Redirect::Kind::kAsk);
  EXPECT_EQ(r->slot, 0);
  EXPECT_EQ(NodeName(r->target), "redis-2.example:7002");
}

TEST(RedirectTest, ParsesIpv6Targets) {
  std::optional<Redirect> r = ParseRedirect("MOVED 16383 [::1]:7000");
  ASSERT_TRUE(r.has_value());
  EXPECT_EQ(r->target.host, "::1");
  EXPECT_EQ(NodeName(r->target), "[::1]:7000");
}

TEST(RedirectTest, RejectsOtherErrors) {
  EXPECT_FALSE(ParseRedirect("ERR unknown command").has_value());
  EXPECT_FALSE(
      ParseRedirect("TRYAGAIN Multiple keys request during rehashing of slot").has_value());
  EXPECT_FALSE(ParseRedirect("MOVED 16384 127.0.0.1:7000").has_value());
  EXPECT_FALSE(ParseRedirect("MOVED x 127.0.0.1:7000").has_value());
  EXPECT_FALSE(ParseRedirect("MOVED 1 127.0.0.1").has_value());
  EXPECT_FALSE(ParseRedirect("MOVED 1 127.0.0.1:0").has_value());
  EXPECT_FALSE(ParseRedirect("ASK 1").has_value());
}

TEST(ShardedScriptsTest, PublishBecomesSpublishEverywhere) {
  for (const char* script : {kAcquireScript, kReleaseScript, kForceReleaseScript}) {
    std::string sharded = Sharded(script);
    EXPECT_THAT(sharded, ::testing::HasSubstr("redis.call('SPUBLISH',"));
    EXPECT_THAT(sharded, ::testing::Not(::testing::HasSubstr("'PUBLISH'")));
  }
}

}  // namespace
}  // namespace lockd::redis
