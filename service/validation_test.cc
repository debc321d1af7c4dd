#include "service/validation.h"

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/support/status_matchers.h"

namespace lockd {
namespace {

using ::lockd::testing::StatusIs;
using ::testing::StartsWith;

google::protobuf::Duration Dur(int64_t seconds, int32_t nanos = 0) {
  google::protobuf::Duration d;
  d.set_seconds(seconds);
  d.set_nanos(nanos);
  return d;
}

std::string Msg(const absl::Status& s) { return std::string(s.message()); }

v1::AcquireRequest GoodAcquire() {
  v1::AcquireRequest r;
  r.set_name("orders/42");
  r.set_owner("alice");
  return r;
}

TEST(ValidationTest, Utf8CheckerAcceptsTextAndRejectsMalformedOrControl) {
  EXPECT_TRUE(IsCleanUtf8("plain ascii/with spaces"));
  EXPECT_TRUE(IsCleanUtf8("ünïcödé 锁 🔒"));
  EXPECT_FALSE(IsCleanUtf8("\xff"));
  EXPECT_FALSE(IsCleanUtf8("\xc0\xaf"));          // overlong "/"
  EXPECT_FALSE(IsCleanUtf8("\xed\xa0\x80"));      // surrogate
  EXPECT_FALSE(IsCleanUtf8("\xf4\x90\x80\x80"));  // above U+10FFFF
  EXPECT_FALSE(IsCleanUtf8("\xe2\x82"));          // truncated
  EXPECT_FALSE(IsCleanUtf8(std::string("nul\0", 4)));
  EXPECT_FALSE(IsCleanUtf8("del\x7f"));
  EXPECT_FALSE(IsCleanUtf8("c1\xc2\x85"));  // U+0085
}

TEST(ValidationTest, AcquireDefaultsNamespaceLeaseAndWait) {
  LeaseBounds lease;
  auto p = ToAcquireParams(GoodAcquire(), lease);
  ASSERT_TRUE(p.ok()) << p.status();
  EXPECT_EQ(p->key.ns, "default");
  EXPECT_EQ(p->key.name, "orders/42");
  EXPECT_EQ(p->ttl, absl::Seconds(30));
  EXPECT_EQ(p->wait, absl::ZeroDuration());
}

TEST(ValidationTest, AcquireKeepsEmptyOwnerForTheServiceToFill) {
  v1::AcquireRequest r = GoodAcquire();
  r.clear_owner();
  auto p = ToAcquireParams(r, LeaseBounds{});
  ASSERT_TRUE(p.ok());
  EXPECT_EQ(p->owner, "");
}

TEST(ValidationTest, LeaseBoundsAreInclusive) {
  LeaseBounds lease;
  v1::AcquireRequest r = GoodAcquire();
  *r.mutable_lease_ttl() = Dur(1);
  EXPECT_TRUE(ToAcquireParams(r, lease).ok());
  *r.mutable_lease_ttl() = Dur(3600);
  EXPECT_TRUE(ToAcquireParams(r, lease).ok());
  *r.mutable_lease_ttl() = Dur(3600, 1);
  EXPECT_THAT(Msg(ToAcquireParams(r, lease).status()), StartsWith("lease_ttl:"));
  *r.mutable_lease_ttl() = Dur(0, 999999999);
  EXPECT_THAT(Msg(ToAcquireParams(r, lease).status()), StartsWith("lease_ttl:"));
}

TEST(ValidationTest, MalformedDurationsAreRejected) {
  v1::AcquireRequest r = GoodAcquire();
  *r.mutable_wait_timeout() = Dur(1, -1);
  EXPECT_THAT(Msg(ToAcquireParams(r, LeaseBounds{}).status()), StartsWith("wait_timeout:"));
  *r.mutable_wait_timeout() = Dur(0, 1000000000);
  EXPECT_THAT(Msg(ToAcquireParams(r, LeaseBounds{}).status()), StartsWith("wait_timeout:"));
}

TEST(ValidationTest, NamespaceCharacterSetAndLength) {
  v1::AcquireRequest r = GoodAcquire();
  r.set_namespace_("Team-A.prod_1");
  EXPECT_TRUE(ToAcquireParams(r, LeaseBounds{}).ok());
  r.set_namespace_(std::string(64, 'a'));
  EXPECT_TRUE(ToAcquireParams(r, LeaseBounds{}).ok());
  for (std::string bad :
       {std::string(65, 'a'), std::string("a b"), std::string("a/b"), std::string("ü")}) {
    r.set_namespace_(bad);
    auto p = ToAcquireParams(r, LeaseBounds{});
    EXPECT_THAT(p, StatusIs(absl::StatusCode::kInvalidArgument)) << bad;
    EXPECT_THAT(Msg(p.status()), StartsWith("namespace:")) << bad;
  }
}

TEST(ValidationTest, NameLengthLimitsAreInBytes) {
  v1::AcquireRequest r = GoodAcquire();
  std::string name;
  while (name.size() + 3 <= 512) name += "锁";  // 3 bytes each
  r.set_name(name);
  EXPECT_TRUE(ToAcquireParams(r, LeaseBounds{}).ok()) << name.size();
  r.set_name(name + "锁");
  EXPECT_THAT(Msg(ToAcquireParams(r, LeaseBounds{}).status()), StartsWith("name:"));
}

TEST(ValidationTest, ReleaseAndRenewRequireAnOwner) {
  v1::ReleaseRequest rel;
  rel.set_name("x");
  EXPECT_THAT(Msg(ToReleaseParams(rel).status()), StartsWith("owner:"));
  v1::RenewRequest renew;
  renew.set_name("x");
  EXPECT_THAT(Msg(ToRenewParams(renew, LeaseBounds{}).status()), StartsWith("owner:"));
}

TEST(ValidationTest, ListPageSizeDefaultsAndCaps) {
  v1::ListRequest r;
  auto p = ToListParams(r);
  ASSERT_TRUE(p.ok());
  EXPECT_EQ(p->page_size, kDefaultPageSize);
  EXPECT_EQ(p->ns, "default");
  r.set_page_size(1000);
  EXPECT_TRUE(ToListParams(r).ok());
  r.set_page_size(1001);
  EXPECT_THAT(Msg(ToListParams(r).status()), StartsWith("page_size:"));
}

}  // namespace
}  // namespace lockd
