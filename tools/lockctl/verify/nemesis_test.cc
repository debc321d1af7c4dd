#include "tools/lockctl/verify/nemesis.h"

#include "gtest/gtest.h"
#include "tests/support/status_matchers.h"

namespace lockd::lockctl::verify {
namespace {

using ::lockd::testing::StatusIs;

TEST(NemesisTest, NamesRoundTripAndUnknownNamesTheFlag) {
  for (NemesisKind k : {NemesisKind::kNone, NemesisKind::kKillHolders, NemesisKind::kAbandon,
                        NemesisKind::kPauseHolders}) {
    EXPECT_EQ(*ParseNemesis(NemesisName(k)), k);
  }
  absl::StatusOr<NemesisKind> bad = ParseNemesis("partition");
  EXPECT_THAT(bad, StatusIs(absl::StatusCode::kInvalidArgument));
  EXPECT_NE(bad.status().message().find("--nemesis"), std::string::npos);
}

TEST(NemesisTest, StrikesOncePerIntervalAndOnlyCandidates) {
  NemesisPolicy p(NemesisKind::kKillHolders, absl::Seconds(2), 1);
  const absl::Time t0 = absl::FromUnixSeconds(1000);
  p.Start(t0);
  EXPECT_FALSE(p.Pick(t0 + absl::Seconds(1), {1, 2}).has_value());  // not due yet
  EXPECT_FALSE(p.Pick(t0 + absl::Seconds(2), {}).has_value());      // due, nobody holds
  std::optional<int> v = p.Pick(t0 + absl::Seconds(3), {4, 7});
  ASSERT_TRUE(v.has_value());
  EXPECT_TRUE(*v == 4 || *v == 7);
  EXPECT_FALSE(p.Pick(t0 + absl::Seconds(4), {4}).has_value());  // next due at 5 s
  EXPECT_TRUE(p.Pick(t0 + absl::Seconds(5), {4}).has_value());
}

TEST(NemesisTest, NoneNeverStrikes) {
  NemesisPolicy p(NemesisKind::kNone, absl::Milliseconds(1), 1);
  p.Start(absl::UnixEpoch());
  EXPECT_FALSE(p.Pick(absl::UnixEpoch() + absl::Hours(1), {1}).has_value());
}

}  // namespace
}  // namespace lockd::lockctl::verify
