// Unit tests of ResolveChannelTarget: which lockd addresses pass to gRPC
// unchanged and how an address list becomes one multi-address target.

#include "clients/cpp/src/target.h"

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/support/status_matchers.h"

namespace lockd::client_internal {
namespace {

using ::lockd::testing::StatusIs;
using ::testing::AnyOf;
using ::testing::HasSubstr;

TEST(ResolveChannelTargetTest, SingleAddressesAndGrpcUrisPassUnchanged) {
  for (const char* target :
       {"127.0.0.1:7411", "lockd.example:7411", "dns:///lockd-headless:7411",
        "ipv4:127.0.0.1:1,127.0.0.1:2", "ipv6:[::1]:1,[::1]:2", "unix:/run/lockd.sock"}) {
    absl::StatusOr<ChannelTarget> t = ResolveChannelTarget(target);
    ASSERT_TRUE(t.ok()) << target << ": " << t.status();
    EXPECT_EQ(t->target, target);
    EXPECT_EQ(t->authority, "");
  }
}

TEST(ResolveChannelTargetTest, IpListBecomesOneIpv4TargetWithTheFirstEntryAsAuthority) {
  absl::StatusOr<ChannelTarget> t =
      ResolveChannelTarget("127.0.0.1:7411, 127.0.0.2:7412 ,10.1.2.3:7413");
  ASSERT_TRUE(t.ok()) << t.status();
  EXPECT_EQ(t->target, "ipv4:127.0.0.1:7411,127.0.0.2:7412,10.1.2.3:7413");
  EXPECT_EQ(t->authority, "127.0.0.1:7411");
}

TEST(ResolveChannelTargetTest, RepeatedAddressesAreListedOnce) {
  absl::StatusOr<ChannelTarget> t = ResolveChannelTarget("127.0.0.1:1,127.0.0.1:1,127.0.0.1:2");
  ASSERT_TRUE(t.ok()) << t.status();
  EXPECT_EQ(t->target, "ipv4:127.0.0.1:1,127.0.0.1:2");
}

TEST(ResolveChannelTargetTest, AnyIpv6AddressMakesAnIpv6TargetWithMappedIpv4) {
  absl::StatusOr<ChannelTarget> t = ResolveChannelTarget("[::1]:7411,127.0.0.1:7412");
  ASSERT_TRUE(t.ok()) << t.status();
  EXPECT_EQ(t->target, "ipv6:[::1]:7411,[::ffff:127.0.0.1]:7412");
  EXPECT_EQ(t->authority, "[::1]:7411");
}

TEST(ResolveChannelTargetTest, HostNamesAreResolvedToTheirAddresses) {
  absl::StatusOr<ChannelTarget> t = ResolveChannelTarget("localhost:7411,127.0.0.1:7412");
  ASSERT_TRUE(t.ok()) << t.status();
  // localhost may resolve to ::1 as well as 127.0.0.1.
  EXPECT_THAT(t->target, AnyOf(HasSubstr("127.0.0.1:7411,"), HasSubstr("[::ffff:127.0.0.1]:7411")));
  EXPECT_EQ(t->authority, "localhost:7411");
}

TEST(ResolveChannelTargetTest, MalformedEntriesAreInvalidArgumentsNamingThem) {
  EXPECT_THAT(ResolveChannelTarget("127.0.0.1:1,,127.0.0.1:2"),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("empty entry")));
  EXPECT_THAT(ResolveChannelTarget("127.0.0.1:1,127.0.0.1"),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("\"127.0.0.1\"")));
  EXPECT_THAT(ResolveChannelTarget("127.0.0.1:1,127.0.0.1:99999"),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("port")));
  EXPECT_THAT(ResolveChannelTarget("127.0.0.1:1,::1:7411"),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("brackets")));
  EXPECT_THAT(ResolveChannelTarget("127.0.0.1:1,no-such-host.invalid:7411"),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("\"no-such-host.invalid:7411\": cannot resolve")));
}

}  // namespace
}  // namespace lockd::client_internal
