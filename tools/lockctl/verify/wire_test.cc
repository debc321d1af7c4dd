#include "tools/lockctl/verify/wire.h"

#include <sys/socket.h>
#include <unistd.h>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/support/status_matchers.h"

namespace lockd::lockctl::verify {
namespace {

using ::lockd::testing::StatusIs;
using ::testing::ElementsAre;

TEST(WireTest, FieldsWithTabsNewlinesAndBytesRoundTrip) {
  std::vector<std::string> fields = {"enter", "a\tb", "line\nbreak", std::string("\0x", 2), ""};
  std::string line = EncodeLine(fields);
  EXPECT_EQ(line.find('\n'), std::string::npos);
  absl::StatusOr<std::vector<std::string>> back = DecodeLine(line);
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ(*back, fields);
}

TEST(WireTest, BadEscapeIsInvalidArgument) {
  EXPECT_THAT(DecodeLine("ok\tbad\\"), StatusIs(absl::StatusCode::kInvalidArgument));
}

TEST(WireTest, ChannelCarriesLinesBothWaysAndSeesTheOtherEndClose) {
  int sv[2];
  ASSERT_EQ(::socketpair(AF_UNIX, SOCK_STREAM, 0, sv), 0);
  LineChannel a(sv[0]);
  {
    LineChannel b(sv[1]);
    ASSERT_TRUE(a.Write({"read", "verify/mutex/0", "7"}).ok());
    ASSERT_TRUE(a.Write({"exit", "x"}).ok());
    EXPECT_THAT(*b.Read(), ElementsAre("read", "verify/mutex/0", "7"));
    EXPECT_THAT(*b.Read(), ElementsAre("exit", "x"));
    ASSERT_TRUE(b.Write({"value", "1", "2"}).ok());
    EXPECT_THAT(*a.Read(), ElementsAre("value", "1", "2"));
  }
  EXPECT_FALSE(a.Read().has_value());  // b closed
}

}  // namespace
}  // namespace lockd::lockctl::verify
