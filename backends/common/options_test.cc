#include "backends/common/options.h"

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace lockd {
namespace {

using ::testing::HasSubstr;

enum class Color { kRed, kBlue };

struct Inner {
  absl::Duration wait = absl::Milliseconds(200);
};

struct Outer {
  std::string name = "x";
  int count = 4;
  bool on = false;
  Color color = Color::kBlue;
  Inner inner;
};

const OptionSet<Outer>& Keys() {
  static const auto* keys = [] {
    auto* s = new OptionSet<Outer>;
    s->String("name", &Outer::name, "a name");
    s->Int("count", &Outer::count, 1, 10, "a count");
    s->Bool("on", &Outer::on, "a switch");
    s->Enum("color", &Outer::color, {{"red", Color::kRed}, {"blue", Color::kBlue}}, "a color");
    s->Include(&Outer::inner, OptionSet<Inner>().Duration("inner.wait", &Inner::wait, "a wait"));
    return s;
  }();
  return *keys;
}

std::string Get(const std::string& key, const Outer& o) { return Keys().Find(key)->get(o); }

absl::Status Set(const std::string& key, Outer& o, const std::string& v) {
  return Keys().Find(key)->set(o, v);
}

TEST(OptionSetTest, BindingsKeepTheirOrderAndShowTheInitializers) {
  std::vector<std::string> keys;
  for (const auto& b : Keys().bindings()) keys.push_back(b.key);
  EXPECT_THAT(keys, ::testing::ElementsAre("name", "count", "on", "color", "inner.wait"));
  Outer o;
  EXPECT_EQ(Get("name", o), "x");
  EXPECT_EQ(Get("count", o), "4");
  EXPECT_EQ(Get("on", o), "false");
  EXPECT_EQ(Get("color", o), "blue");
  EXPECT_EQ(Get("inner.wait", o), "200ms");
  EXPECT_EQ(Keys().Find("nope"), nullptr);
}

TEST(OptionSetTest, ValuesParseIntoTheirMembers) {
  Outer o;
  ASSERT_TRUE(Set("count", o, "10").ok());
  ASSERT_TRUE(Set("on", o, "true").ok());
  ASSERT_TRUE(Set("color", o, "red").ok());
  ASSERT_TRUE(Set("inner.wait", o, "1m30s").ok());
  EXPECT_EQ(o.count, 10);
  EXPECT_TRUE(o.on);
  EXPECT_EQ(o.color, Color::kRed);
  EXPECT_EQ(o.inner.wait, absl::Seconds(90));
}

TEST(OptionSetTest, MalformedValuesAreErrorsAndLeaveTheMemberAlone) {
  Outer o;
  absl::Status s = Set("count", o, "11");
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(s.message()), HasSubstr("expected an integer in [1, 10], got \"11\""));
  EXPECT_THAT(std::string(Set("on", o, "yes").message()), HasSubstr("expected true or false"));
  EXPECT_THAT(std::string(Set("color", o, "green").message()),
              HasSubstr("expected one of red, blue, got \"green\""));
  EXPECT_THAT(std::string(Set("inner.wait", o, "inf").message()), HasSubstr("duration"));
  EXPECT_THAT(std::string(Set("inner.wait", o, "-1s").message()), HasSubstr("duration"));
  EXPECT_EQ(o.count, 4);
  EXPECT_FALSE(o.on);
  EXPECT_EQ(o.color, Color::kBlue);
  EXPECT_EQ(o.inner.wait, absl::Milliseconds(200));
}

struct Ranged {
  int count = 4;
  size_t limit = 8;
  absl::Duration any = absl::Seconds(1);
  absl::Duration timeout = absl::Seconds(1);
  absl::Duration session = absl::Seconds(1);
  absl::Duration memory = absl::Seconds(1);
};

const OptionSet<Ranged>& RangedKeys() {
  static const auto* keys = [] {
    auto* s = new OptionSet<Ranged>;
    s->Int("count", &Ranged::count, 1, 10, "a count");
    s->UnkeyedInt("limit", &Ranged::limit, 1, 100);
    s->Duration("any", &Ranged::any, "any duration");
    s->PositiveDuration("timeout", &Ranged::timeout, "a positive duration");
    s->DurationAtLeast("session", &Ranged::session, absl::Milliseconds(100), "at least 100ms");
    s->UnkeyedDuration("memory", &Ranged::memory);
    return s;
  }();
  return *keys;
}

TEST(OptionSetTest, DurationBindersRefuseWhatTheirRangeExcludes) {
  Ranged r;
  auto set = [&](const std::string& key, const std::string& v) {
    return std::string(RangedKeys().Find(key)->set(r, v).message());
  };
  EXPECT_EQ(set("any", "0s"), "");
  EXPECT_THAT(set("timeout", "0s"), HasSubstr("expected a positive duration like"));
  EXPECT_EQ(set("timeout", "1ms"), "");
  EXPECT_THAT(set("session", "99ms"), HasSubstr("expected a duration of at least 100ms, like"));
  EXPECT_EQ(set("session", "100ms"), "");
  EXPECT_EQ(r.timeout, absl::Milliseconds(1));
  EXPECT_EQ(r.session, absl::Milliseconds(100));
}

TEST(OptionSetTest, UnkeyedMembersHaveNoKeyButAreChecked) {
  std::vector<std::string> keys;
  for (const auto& b : RangedKeys().bindings()) keys.push_back(b.key);
  EXPECT_THAT(keys, ::testing::ElementsAre("count", "any", "timeout", "session"));
  EXPECT_TRUE(RangedKeys().Check(Ranged{}).ok());
}

TEST(OptionSetTest, CheckNamesTheFirstMemberOutOfItsRange) {
  auto message = [](const Ranged& r) {
    absl::Status s = RangedKeys().Check(r);
    EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
    return std::string(s.message());
  };
  Ranged r;
  r.count = 11;
  EXPECT_EQ(message(r), "count: expected an integer in [1, 10], got \"11\"");
  r = Ranged{};
  r.limit = 0;
  EXPECT_EQ(message(r), "limit: expected an integer in [1, 100], got \"0\"");
  r = Ranged{};
  r.any = -absl::Seconds(1);
  EXPECT_EQ(message(r), "any: expected a duration like 250ms, 30s, 5m or 1h, got \"-1s\"");
  r = Ranged{};
  r.timeout = absl::ZeroDuration();
  EXPECT_THAT(message(r), HasSubstr("timeout: expected a positive duration"));
  r = Ranged{};
  r.session = absl::Milliseconds(50);
  EXPECT_THAT(message(r), HasSubstr("session: expected a duration of at least 100ms"));
  r = Ranged{};
  r.memory = absl::InfiniteDuration();
  EXPECT_THAT(message(r), HasSubstr("memory: expected a duration"));
}

TEST(OptionSetTest, IncludedPartsKeepTheirChecks) {
  struct Whole {
    Ranged part;
  };
  OptionSet<Whole> whole;
  whole.Include(&Whole::part, RangedKeys());
  Whole w;
  EXPECT_TRUE(whole.Check(w).ok());
  w.part.limit = 101;
  EXPECT_THAT(std::string(whole.Check(w).message()), HasSubstr("limit: expected an integer"));
}

}  // namespace
}  // namespace lockd
