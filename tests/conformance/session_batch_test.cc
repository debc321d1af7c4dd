// Batches on a Session (docs/api.md "Batches on a Session") in the
// conformance suite, through raw session streams: a batch is only an
// envelope (each op handled as if it had come alone, in order, each
// answered by its own result), and a bad batch is a protocol error that
// handles none of its ops and ends the stream as a broken stream does.
//
// The server starts a batch's ops in order; like separate messages, an op
// does not wait for the result of the one before it, so a test asserts an
// order only where the op before is still waiting (a cancel after an
// acquire that waits), and otherwise what any backend order gives.

#include <memory>
#include <optional>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "gmock/gmock.h"
#include "google/rpc/error_details.pb.h"
#include "gtest/gtest.h"
#include "tests/conformance/conformance.h"
#include "tests/conformance/session_client.h"
#include "tests/support/status_matchers.h"

namespace lockd::testing {
namespace {

using ::testing::AllOf;
using ::testing::HasSubstr;

constexpr absl::Duration kLong = absl::Seconds(30);
constexpr absl::Duration kWindow = absl::Milliseconds(300);
constexpr int kOk = 0;
constexpr int kCancelled = 1;
constexpr int kFailedPrecondition = 9;

// An acquire_all of `names` (exclusive locks of the session's namespace).
v1::SessionRequest AcquireAllOp(uint64_t op_id, const std::vector<std::string>& names,
                                absl::Duration wait = absl::ZeroDuration()) {
  v1::SessionRequest req;
  req.mutable_acquire_all()->set_op_id(op_id);
  v1::AcquireAllRequest* all = req.mutable_acquire_all()->mutable_request();
  for (const std::string& name : names) all->add_locks()->set_name(name);
  if (wait != absl::ZeroDuration()) *all->mutable_wait_timeout() = ToProtoDuration(wait);
  return req;
}

v1::SessionRequest OpenOp(const std::string& owner) {
  v1::SessionRequest req;
  req.mutable_open()->set_owner(owner);
  return req;
}

// The ErrorInfo reason of a result's status, or "".
std::string ReasonOf(const v1::SessionResult& r) {
  for (const auto& any : r.status().details()) {
    google::rpc::ErrorInfo info;
    if (any.UnpackTo(&info)) return info.reason();
  }
  return "";
}

class SessionBatchRules : public ConformanceTest {
 protected:
  // A session of `owner` on replica 0 that received `opened`; nullptr, with
  // a failure, otherwise.
  std::unique_ptr<SessionClient> Open(const std::string& owner, bool keep = false) {
    auto s = std::make_unique<SessionClient>(Stub(0));
    Opening o;
    o.owner = owner;
    o.keep_on_disconnect = keep;
    if (!s->Open(o, kLong)) {
      ADD_FAILURE() << "no opened: " << s->WaitEnd(absl::Seconds(1)).error_message();
      return nullptr;
    }
    return s;
  }

  // The result of `op_id`; a failure when none comes.
  v1::SessionResult ResultOf(SessionClient& s, uint64_t op_id) {
    std::optional<v1::SessionResult> r = s.WaitResult(op_id, kLong);
    EXPECT_TRUE(r.has_value()) << "no result for op " << op_id;
    return r.value_or(v1::SessionResult());
  }

  // The grant of `op_id`, which must be OK and acquired.
  v1::AcquireResponse GrantOf(SessionClient& s, uint64_t op_id) {
    v1::SessionResult r = ResultOf(s, op_id);
    EXPECT_EQ(r.status().code(), kOk) << r.DebugString();
    EXPECT_TRUE(r.acquire().acquired()) << "op " << op_id << ": " << r.DebugString();
    return r.acquire();
  }

  bool HeldBy(const std::string& name, const std::string& owner) {
    v1::LockInfo info = Describe(name, "", Stub(1));
    return info.held() && info.owner() == owner;
  }
};

TEST_P(SessionBatchRules, ACancelAfterAWaitingAcquireInTheSameBatchEndsIt) {
  v1::AcquireResponse held;
  ASSERT_TRUE(Acquire({"cx", "bob"}, &held, Stub(1)).ok());
  auto s = Open("alice");
  ASSERT_NE(s, nullptr);
  // In order, the cancel finds the acquire waiting; the other way round it
  // would be ignored and the acquire would wait its minute.
  ASSERT_TRUE(s->Send(Batch({AcquireOp(1, "cx", absl::Seconds(60)), CancelOp(1)})));
  v1::SessionResult r = ResultOf(*s, 1);
  EXPECT_EQ(r.status().code(), kCancelled) << r.DebugString();
  EXPECT_FALSE(r.acquire().acquired()) << r.DebugString();
  ASSERT_TRUE(WaitFor([&] { return Describe("cx").waiters() == 0; }, kLong));
  v1::ReleaseResponse rel;
  ASSERT_TRUE(Release("cx", "bob", &rel, "", "", Stub(1)).ok());
  // Nothing of the cancelled acquire is left: the session's next acquire
  // is a first grant, not a reentrant one.
  ASSERT_TRUE(s->Acquire(2, "cx", kLong));
  EXPECT_EQ(GrantOf(*s, 2).hold_count(), 1u);
}

TEST_P(SessionBatchRules, AcquireAndReleaseOfOneLockInOneBatchAreEachAnswered) {
  auto s = Open("alice");
  ASSERT_NE(s, nullptr);
  ASSERT_TRUE(s->Send(Batch({AcquireOp(1, "ar"), ReleaseOp(2, "ar")})));
  EXPECT_EQ(GrantOf(*s, 1).hold_count(), 1u);
  v1::SessionResult rel = ResultOf(*s, 2);
  if (rel.status().code() == kOk) {
    // The release reached the backend after the grant: the lock is free.
    EXPECT_TRUE(rel.release().released()) << rel.DebugString();
    EXPECT_FALSE(Describe("ar", "", Stub(1)).held());
  } else {
    // It overtook the acquire (as a release sent right behind an acquire
    // in its own message may): nothing was released, the session holds it.
    EXPECT_EQ(rel.status().code(), kFailedPrecondition) << rel.DebugString();
    EXPECT_EQ(ReasonOf(rel), "LOCK_NOT_HELD") << rel.DebugString();
    EXPECT_TRUE(HeldBy("ar", "alice"));
    ASSERT_TRUE(s->Send(Batch({ReleaseOp(3, "ar")})));
    EXPECT_TRUE(ResultOf(*s, 3).release().released());
  }
  EXPECT_FALSE(Describe("ar", "", Stub(1)).held());
  EXPECT_EQ(s->ResultCount(), rel.status().code() == kOk ? 2 : 3);
}

TEST_P(SessionBatchRules, TwoAcquiresOfOneNameInABatchAreOneReentrantHold) {
  auto s = Open("alice");
  ASSERT_NE(s, nullptr);
  ASSERT_TRUE(s->Send(Batch({AcquireOp(1, "re"), AcquireOp(2, "re")})));
  v1::AcquireResponse a = GrantOf(*s, 1);
  v1::AcquireResponse b = GrantOf(*s, 2);
  EXPECT_EQ(a.fencing_token(), b.fencing_token());
  EXPECT_EQ(std::set<uint32_t>({a.hold_count(), b.hold_count()}), std::set<uint32_t>({1, 2}));
  EXPECT_EQ(Describe("re", "", Stub(1)).hold_count(), 2u);
  ASSERT_TRUE(s->Send(Batch({ReleaseOp(3, "re"), ReleaseOp(4, "re")})));
  v1::SessionResult r3 = ResultOf(*s, 3);
  v1::SessionResult r4 = ResultOf(*s, 4);
  EXPECT_EQ(r3.status().code(), kOk) << r3.DebugString();
  EXPECT_EQ(r4.status().code(), kOk) << r4.DebugString();
  EXPECT_NE(r3.release().released(), r4.release().released()) << "exactly one ends the hold";
  EXPECT_FALSE(Describe("re", "", Stub(1)).held());
}

TEST_P(SessionBatchRules, EveryOpOfABatchGetsExactlyOneResultWithItsOpId) {
  auto s = Open("alice");
  ASSERT_NE(s, nullptr);
  constexpr int kLocks = 40;
  std::vector<v1::SessionRequest> ops;
  for (int i = 0; i < kLocks; ++i) {
    ops.push_back(AcquireOp(100 + i, absl::StrCat("lock-", i)));
    ops.push_back(ReleaseOp(200 + i, absl::StrCat("never-", i)));
  }
  ASSERT_TRUE(s->Send(Batch(std::move(ops))));
  for (int i = 0; i < kLocks; ++i) {
    EXPECT_EQ(GrantOf(*s, 100 + i).owner(), "alice");
    v1::SessionResult rel = ResultOf(*s, 200 + i);
    EXPECT_EQ(rel.op_id(), 200u + i);
    EXPECT_EQ(ReasonOf(rel), "LOCK_NOT_HELD") << rel.DebugString();
  }
  EXPECT_TRUE(HeldBy("lock-0", "alice"));
  EXPECT_TRUE(HeldBy(absl::StrCat("lock-", kLocks - 1), "alice"));
  ops.clear();
  for (int i = 0; i < kLocks; ++i) ops.push_back(ReleaseOp(300 + i, absl::StrCat("lock-", i)));
  ASSERT_TRUE(s->Send(Batch(std::move(ops))));
  for (int i = 0; i < kLocks; ++i) {
    v1::SessionResult rel = ResultOf(*s, 300 + i);
    EXPECT_EQ(rel.status().code(), kOk) << rel.DebugString();
    EXPECT_TRUE(rel.release().released()) << rel.DebugString();
  }
  EXPECT_FALSE(Describe("lock-0", "", Stub(1)).held());
  absl::SleepFor(kWindow);
  EXPECT_EQ(s->ResultCount(), 3 * kLocks) << "an op was answered more than once";
  EXPECT_TRUE(s->HalfCloseAndFinish(kLong).ok());
}

TEST_P(SessionBatchRules, AcquireAllAndItsCancelInABatchAreHandledAsIfAlone) {
  v1::AcquireResponse held;
  ASSERT_TRUE(Acquire({"b2", "bob"}, &held, Stub(1)).ok());
  auto s = Open("alice");
  ASSERT_NE(s, nullptr);
  ASSERT_TRUE(s->Send(Batch({AcquireAllOp(1, {"a1", "b2"}, absl::Seconds(60)),
                             AcquireAllOp(2, {"c2", "c1"}), CancelOp(1)})));
  v1::SessionResult cancelled = ResultOf(*s, 1);
  EXPECT_EQ(cancelled.status().code(), kCancelled) << cancelled.DebugString();
  v1::SessionResult all = ResultOf(*s, 2);
  ASSERT_EQ(all.status().code(), kOk) << all.DebugString();
  ASSERT_TRUE(all.acquire_all().acquired()) << all.DebugString();
  ASSERT_EQ(all.acquire_all().locks_size(), 2);
  EXPECT_EQ(all.acquire_all().locks(0).fencing_token(),
            Describe("c2", "", Stub(1)).fencing_token());
  EXPECT_TRUE(HeldBy("c1", "alice"));
  EXPECT_TRUE(WaitFor([&] { return !Describe("a1", "", Stub(1)).held(); }, kLong))
      << "the cancelled acquire_all left a1 held";
  EXPECT_TRUE(HeldBy("b2", "bob"));
  // The acquire_all's holds are the session's: released at half-close.
  EXPECT_TRUE(s->HalfCloseAndFinish(kLong).ok());
  EXPECT_FALSE(Describe("c1", "", Stub(1)).held());
  EXPECT_FALSE(Describe("c2", "", Stub(1)).held());
}

TEST_P(SessionBatchRules, OpenInABatchEndsTheStreamAndHandlesNoneOfItsOps) {
  auto s = Open("alice");
  ASSERT_NE(s, nullptr);
  ASSERT_TRUE(s->Acquire(1, "before"));
  GrantOf(*s, 1);
  ASSERT_TRUE(s->Send(Batch({AcquireOp(2, "x"), OpenOp("alice"), AcquireOp(3, "y")})));
  EXPECT_THAT(s->WaitEnd(kLong), StatusIs(grpc::StatusCode::INVALID_ARGUMENT,
                                          AllOf(HasSubstr("batch.ops[1]"), HasSubstr("open"))));
  EXPECT_FALSE(s->HasResult(2));
  EXPECT_FALSE(s->HasResult(3));
  EXPECT_FALSE(Describe("x", "", Stub(1)).held());
  EXPECT_FALSE(Describe("y", "", Stub(1)).held());
  // Ended as a broken stream ends: the session's holds are released.
  EXPECT_TRUE(WaitFor([&] { return !Describe("before", "", Stub(1)).held(); }, kLong));
}

TEST_P(SessionBatchRules, ABadBatchKeepsTheHoldsOfAKeepOnDisconnectSession) {
  auto s = Open("carol", /*keep=*/true);
  ASSERT_NE(s, nullptr);
  ASSERT_TRUE(s->Acquire(1, "kept"));
  uint64_t token = GrantOf(*s, 1).fencing_token();
  ASSERT_TRUE(s->Send(Batch({AcquireOp(2, "x"), Batch({AcquireOp(3, "y")})})));
  EXPECT_THAT(s->WaitEnd(kLong), StatusIs(grpc::StatusCode::INVALID_ARGUMENT,
                                          AllOf(HasSubstr("batch.ops[1]"), HasSubstr("nested"))));
  absl::SleepFor(kWindow);
  v1::LockInfo kept = Describe("kept", "", Stub(1));
  EXPECT_TRUE(kept.held());
  EXPECT_EQ(kept.fencing_token(), token);
  EXPECT_FALSE(Describe("x", "", Stub(1)).held());
  EXPECT_FALSE(Describe("y", "", Stub(1)).held());
}

TEST_P(SessionBatchRules, ABatchEntryWithoutKindEndsTheStream) {
  auto s = Open("alice");
  ASSERT_NE(s, nullptr);
  ASSERT_TRUE(s->Send(Batch({AcquireOp(1, "x"), v1::SessionRequest()})));
  EXPECT_THAT(s->WaitEnd(kLong),
              StatusIs(grpc::StatusCode::INVALID_ARGUMENT, HasSubstr("batch.ops[1]")));
  EXPECT_FALSE(Describe("x", "", Stub(1)).held());
}

TEST_P(SessionBatchRules, ABatchOf1000OpsIsHandledAndOneOf1001EndsTheStream) {
  auto s = Open("alice");
  ASSERT_NE(s, nullptr);
  // Cancels of op_ids not in flight do nothing, so the 1,000 cost no
  // backend call; the acquire at the end shows the batch was handled.
  std::vector<v1::SessionRequest> ops;
  for (int i = 0; i < 999; ++i) ops.push_back(CancelOp(5000 + i));
  ops.push_back(AcquireOp(1, "last-of-1000"));
  ASSERT_TRUE(s->Send(Batch(ops)));
  GrantOf(*s, 1);
  ops.back() = CancelOp(1);
  ops.push_back(AcquireOp(2, "last-of-1001"));
  ASSERT_EQ(ops.size(), 1001u);
  ASSERT_TRUE(s->Send(Batch(std::move(ops))));
  EXPECT_THAT(s->WaitEnd(kLong),
              StatusIs(grpc::StatusCode::INVALID_ARGUMENT,
                       AllOf(HasSubstr("batch.ops"), HasSubstr("1001"), HasSubstr("1000"))));
  EXPECT_FALSE(s->HasResult(2));
  EXPECT_FALSE(Describe("last-of-1001", "", Stub(1)).held());
}

TEST_P(SessionBatchRules, AnOpIdReusedInABatchEndsTheStreamAfterTheOpsBeforeIt) {
  MustAcquire("busy", "bob");
  auto s = Open("alice");
  ASSERT_NE(s, nullptr);
  ASSERT_TRUE(s->Send(Batch(
      {AcquireOp(7, "busy", absl::Seconds(60)), AcquireOp(8, "free"), AcquireOp(7, "other")})));
  EXPECT_THAT(s->WaitEnd(kLong), StatusIs(grpc::StatusCode::INVALID_ARGUMENT, HasSubstr("op_id")));
  // The acquire before the bad op was handled (then given up with the
  // stream); the bad one and nothing after it was.
  std::optional<v1::SessionResult> free = s->WaitResult(8, absl::ZeroDuration());
  if (free.has_value()) {  // granted, or given back as the stream ended
    EXPECT_THAT(free->status().code(), ::testing::AnyOf(kOk, kCancelled)) << free->DebugString();
  }
  EXPECT_FALSE(Describe("other", "", Stub(1)).held());
  EXPECT_TRUE(WaitFor([&] { return !Describe("free", "", Stub(1)).held(); }, kLong));
  EXPECT_TRUE(HeldBy("busy", "bob"));
}

TEST_P(SessionBatchRules, ASessionThatNeverSentABatchGetsNoResponseBatch) {
  auto s = Open("alice");
  ASSERT_NE(s, nullptr);
  constexpr int kOps = 100;
  for (int i = 0; i < kOps; ++i) ASSERT_TRUE(s->Acquire(i, absl::StrCat("one-", i)));
  for (int i = 0; i < kOps; ++i) GrantOf(*s, i);
  EXPECT_EQ(s->ResponseBatches(), 0) << "a client of 0.1.0 cannot read a response batch";
  EXPECT_TRUE(s->HalfCloseAndFinish(kLong).ok());
}

INSTANTIATE_TEST_SUITE_P(Backends, SessionBatchRules, ::testing::ValuesIn(ReplicaCountsOfEnv()),
                         ReplicaCountName);

}  // namespace
}  // namespace lockd::testing
