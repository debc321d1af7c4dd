#include "service/validation.h"

#include "absl/strings/str_cat.h"
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

TEST(ValidationTest, KindDefaultsToAnExclusiveLock) {
  absl::StatusOr<LockKind> k = CheckKind(v1::LOCK_MODE_EXCLUSIVE, 0, 0);
  ASSERT_TRUE(k.ok());
  EXPECT_EQ(k->mode, LockMode::kExclusive);
  EXPECT_EQ(k->limit, 0u);
  EXPECT_EQ(k->permits, 0u);
  k = CheckKind(v1::LOCK_MODE_SHARED, 0, 0);
  ASSERT_TRUE(k.ok());
  EXPECT_EQ(k->mode, LockMode::kShared);
}

TEST(ValidationTest, SemaphorePermitsDefaultToOneAndStayWithinTheLimit) {
  absl::StatusOr<LockKind> k = CheckKind(v1::LOCK_MODE_EXCLUSIVE, 4, 0);
  ASSERT_TRUE(k.ok());
  EXPECT_EQ(k->limit, 4u);
  EXPECT_EQ(k->permits, 1u);
  EXPECT_EQ(CheckKind(v1::LOCK_MODE_EXCLUSIVE, 4, 4)->permits, 4u);
  EXPECT_TRUE(CheckKind(v1::LOCK_MODE_EXCLUSIVE, kMaxSemaphoreLimit, 1).ok());
}

TEST(ValidationTest, KindMistakesNameTheirField) {
  struct Case {
    int mode;
    uint32_t limit, permits;
    const char* field;
  } cases[] = {
      {v1::LOCK_MODE_SHARED, 3, 0, "limit: "},         // a semaphore has no mode
      {v1::LOCK_MODE_EXCLUSIVE, 0, 2, "permits: "},    // permits without limit
      {v1::LOCK_MODE_EXCLUSIVE, 3, 4, "permits: "},    // permits above limit
      {v1::LOCK_MODE_EXCLUSIVE, 10001, 1, "limit: "},  // limit above 10,000
      {7, 0, 0, "mode: "},                             // no such mode
  };
  for (const Case& c : cases) {
    absl::Status s = CheckKind(static_cast<v1::LockMode>(c.mode), c.limit, c.permits).status();
    EXPECT_THAT(s, StatusIs(absl::StatusCode::kInvalidArgument));
    EXPECT_THAT(Msg(s), StartsWith(c.field)) << c.mode << " " << c.limit << " " << c.permits;
  }
  EXPECT_THAT(Msg(CheckKind(v1::LOCK_MODE_EXCLUSIVE, 3, 4, "locks[2].").status()),
              StartsWith("locks[2].permits: "));
}

TEST(ValidationTest, AcquireChecksItsKind) {
  v1::AcquireRequest r = GoodAcquire();
  r.set_limit(5);
  r.set_permits(2);
  absl::StatusOr<AcquireParams> p = ToAcquireParams(r, LeaseBounds{});
  ASSERT_TRUE(p.ok()) << p.status();
  EXPECT_EQ(p->limit, 5u);
  EXPECT_EQ(p->permits, 2u);
  r.set_permits(6);
  EXPECT_THAT(Msg(ToAcquireParams(r, LeaseBounds{}).status()), StartsWith("permits: "));
}

v1::AcquireAllRequest GoodAcquireAll() {
  v1::AcquireAllRequest r;
  r.set_owner("alice");
  r.add_locks()->set_name("accounts/1");
  v1::LockSpec* reader = r.add_locks();
  reader->set_name("accounts/2");
  reader->set_mode(v1::LOCK_MODE_SHARED);
  v1::LockSpec* sem = r.add_locks();
  sem->set_namespace_("pools");
  sem->set_name("db");
  sem->set_limit(4);
  return r;
}

TEST(ValidationTest, AcquireAllKeepsRequestOrderAndEachKind) {
  absl::StatusOr<AcquireAllParams> p = ToAcquireAllParams(GoodAcquireAll(), LeaseBounds{});
  ASSERT_TRUE(p.ok()) << p.status();
  ASSERT_EQ(p->locks.size(), 3u);
  EXPECT_EQ(p->locks[0].key, (LockKey{"default", "accounts/1"}));
  EXPECT_EQ(p->locks[1].kind.mode, LockMode::kShared);
  EXPECT_EQ(p->locks[2].key, (LockKey{"pools", "db"}));
  EXPECT_EQ(p->locks[2].kind.limit, 4u);
  EXPECT_EQ(p->locks[2].kind.permits, 1u);
  EXPECT_EQ(p->owner, "alice");
  EXPECT_EQ(p->ttl, absl::Seconds(30));
  EXPECT_EQ(p->wait, absl::ZeroDuration());
}

TEST(ValidationTest, AcquireAllNeedsOneToSixtyFourLocks) {
  v1::AcquireAllRequest r = GoodAcquireAll();
  r.clear_locks();
  EXPECT_THAT(ToAcquireAllParams(r, LeaseBounds{}).status(),
              StatusIs(absl::StatusCode::kInvalidArgument, StartsWith("locks: ")));
  for (int i = 0; i < 64; ++i) r.add_locks()->set_name(absl::StrCat("n", i));
  EXPECT_TRUE(ToAcquireAllParams(r, LeaseBounds{}).ok());
  r.add_locks()->set_name("n64");
  EXPECT_THAT(ToAcquireAllParams(r, LeaseBounds{}).status(),
              StatusIs(absl::StatusCode::kInvalidArgument, StartsWith("locks: ")));
}

TEST(ValidationTest, AcquireAllNamesTheSecondOfTwoSameLocks) {
  v1::AcquireAllRequest r = GoodAcquireAll();
  v1::LockSpec* again = r.add_locks();
  again->set_namespace_("default");  // the same as the first's empty namespace
  again->set_name("accounts/1");
  absl::Status s = ToAcquireAllParams(r, LeaseBounds{}).status();
  EXPECT_THAT(s, StatusIs(absl::StatusCode::kInvalidArgument, StartsWith("locks[3]: ")));
  EXPECT_THAT(Msg(s), ::testing::HasSubstr("locks[0]"));
}

TEST(ValidationTest, AcquireAllPrefixesEachLocksFields) {
  v1::AcquireAllRequest r = GoodAcquireAll();
  r.mutable_locks(1)->set_name("");
  EXPECT_THAT(Msg(ToAcquireAllParams(r, LeaseBounds{}).status()), StartsWith("locks[1].name: "));
  r = GoodAcquireAll();
  r.mutable_locks(2)->set_namespace_("bad ns");
  EXPECT_THAT(Msg(ToAcquireAllParams(r, LeaseBounds{}).status()),
              StartsWith("locks[2].namespace: "));
  r = GoodAcquireAll();
  r.mutable_locks(2)->set_permits(5);
  EXPECT_THAT(Msg(ToAcquireAllParams(r, LeaseBounds{}).status()), StartsWith("locks[2].permits: "));
}

TEST(ValidationTest, AcquireAllChecksOwnerLeaseWaitAndRequestIdAsAcquireDoes) {
  v1::AcquireAllRequest r = GoodAcquireAll();
  r.set_owner(std::string(257, 'o'));
  EXPECT_THAT(Msg(ToAcquireAllParams(r, LeaseBounds{}).status()), StartsWith("owner: "));
  r = GoodAcquireAll();
  *r.mutable_lease_ttl() = Dur(0, 1000);
  EXPECT_THAT(Msg(ToAcquireAllParams(r, LeaseBounds{}).status()), StartsWith("lease_ttl: "));
  r = GoodAcquireAll();
  *r.mutable_wait_timeout() = Dur(-1);
  EXPECT_THAT(Msg(ToAcquireAllParams(r, LeaseBounds{}).status()), StartsWith("wait_timeout: "));
  r = GoodAcquireAll();
  r.set_request_id(std::string(129, 'r'));
  EXPECT_THAT(Msg(ToAcquireAllParams(r, LeaseBounds{}).status()), StartsWith("request_id: "));
  r = GoodAcquireAll();
  *r.mutable_wait_timeout() = Dur(5);
  r.set_request_id("req-1");
  absl::StatusOr<AcquireAllParams> p = ToAcquireAllParams(r, LeaseBounds{});
  ASSERT_TRUE(p.ok());
  EXPECT_EQ(p->wait, absl::Seconds(5));
  EXPECT_EQ(p->request_id, "req-1");
}

TEST(ValidationTest, Utf8CheckerRejectsControlAndMalformedBytesAfterPrintableAscii) {
  EXPECT_FALSE(IsCleanUtf8("a long printable ascii prefix\x1f"));
  EXPECT_FALSE(IsCleanUtf8("a long printable ascii prefix\xc3"));
  EXPECT_TRUE(IsCleanUtf8("a long printable ascii prefix ~ \xc3\xa9"));
}

// The session path moves the request's strings: the same params and the
// same first error as the copying overloads.
TEST(ValidationTest, MovingOverloadsCheckAndFillAsTheCopyingOnesDo) {
  v1::AcquireRequest a = GoodAcquire();
  a.set_namespace_("jobs");
  a.set_request_id("a-request-id-longer-than-fifteen-bytes");
  absl::StatusOr<AcquireParams> copied = ToAcquireParams(a, LeaseBounds{});
  v1::AcquireRequest moved_from = a;
  absl::StatusOr<AcquireParams> moved = ToAcquireParams(std::move(moved_from), LeaseBounds{});
  ASSERT_TRUE(copied.ok() && moved.ok());
  EXPECT_EQ(moved->key, copied->key);
  EXPECT_EQ(moved->key.ns, "jobs");
  EXPECT_EQ(moved->owner, "alice");
  EXPECT_EQ(moved->request_id, "a-request-id-longer-than-fifteen-bytes");
  EXPECT_EQ(moved->ttl, copied->ttl);
  a.set_request_id(std::string(129, 'r'));
  EXPECT_THAT(ToAcquireParams(v1::AcquireRequest(a), LeaseBounds{}).status(),
              StatusIs(absl::StatusCode::kInvalidArgument));
  EXPECT_THAT(Msg(ToAcquireParams(v1::AcquireRequest(a), LeaseBounds{}).status()),
              StartsWith("request_id: "));

  v1::ReleaseRequest r;
  r.set_name("orders/42");
  r.set_owner("alice");
  r.set_acquire_request_id("an-acquire-request-id");
  r.set_fencing_token(7);
  absl::StatusOr<ReleaseParams> rel = ToReleaseParams(v1::ReleaseRequest(r));
  ASSERT_TRUE(rel.ok());
  EXPECT_EQ(rel->key.ns, std::string(kDefaultNamespace));
  EXPECT_EQ(rel->key.name, "orders/42");
  EXPECT_EQ(rel->owner, "alice");
  EXPECT_EQ(rel->acquire_request_id, "an-acquire-request-id");
  EXPECT_EQ(rel->fencing_token, 7u);
  r.set_request_id("r");
  EXPECT_THAT(Msg(ToReleaseParams(v1::ReleaseRequest(r)).status()),
              StartsWith("acquire_request_id: "));
  r.clear_owner();
  EXPECT_THAT(Msg(ToReleaseParams(v1::ReleaseRequest(r)).status()), StartsWith("owner: "));
}

}  // namespace
}  // namespace lockd
