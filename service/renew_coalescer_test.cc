// RenewCoalescer over a backend whose RenewMany calls the test completes by
// hand: when rounds go alone, when they are joined, and that each round gets
// exactly its own results.

#include "service/renew_coalescer.h"

#include <deque>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/support/status_matchers.h"

namespace lockd {
namespace {

using ::lockd::testing::StatusIs;
using ::testing::ElementsAre;

absl::Status NotForTheCoalescer(absl::string_view method) {
  ADD_FAILURE() << "RenewCoalescer called Backend::" << method;
  return absl::InternalError(absl::StrCat("unexpected ", method));
}

// Records each RenewMany; the test answers them in any order.
class HeldRenewalsBackend final : public Backend {
 public:
  struct Call {
    std::vector<RenewParams> params;
    RenewManyCallback done;
  };

  absl::string_view name() const override { return "held"; }
  // The coalescer calls RenewMany only: any other call fails the test.
  void Acquire(AcquireParams, std::shared_ptr<CancelSignal>,
               Callback<AcquireResult> done) override {
    std::move(done)(NotForTheCoalescer("Acquire"));
  }
  void Release(ReleaseParams, Callback<ReleaseResult> done) override {
    std::move(done)(NotForTheCoalescer("Release"));
  }
  void Renew(RenewParams, Callback<RenewResult> done) override {
    std::move(done)(NotForTheCoalescer("Renew"));
  }
  void RenewMany(std::vector<RenewParams> params, RenewManyCallback done) override {
    absl::MutexLock l(&mu_);
    calls_.push_back(Call{std::move(params), std::move(done)});
  }
  void Describe(LockKey, Callback<LockState> done) override {
    std::move(done)(NotForTheCoalescer("Describe"));
  }
  void List(ListParams, Callback<ListResult> done) override {
    std::move(done)(NotForTheCoalescer("List"));
  }
  void ForceRelease(ForceReleaseParams, Callback<ForceReleaseResult> done) override {
    std::move(done)(NotForTheCoalescer("ForceRelease"));
  }
  absl::Status Health() const override { return absl::OkStatus(); }
  void Shutdown() override {}

  size_t calls() {
    absl::MutexLock l(&mu_);
    return calls_.size();
  }
  // The names renewed by call `i`.
  std::vector<std::string> Names(size_t i) {
    absl::MutexLock l(&mu_);
    std::vector<std::string> out;
    for (const RenewParams& p : calls_[i].params) out.push_back(p.key.name);
    return out;
  }
  // Answers call `i`: each renewal's token is its name's length, except
  // names starting with "x", which are not held.
  void Answer(size_t i) {
    Call c;
    {
      absl::MutexLock l(&mu_);
      c = std::move(calls_[i]);
    }
    std::vector<absl::StatusOr<RenewResult>> results;
    for (const RenewParams& p : c.params) {
      if (p.key.name[0] == 'x') {
        results.push_back(LockNotHeldError(p.key, "test"));
      } else {
        results.push_back(RenewResult{p.ttl, p.key.name.size()});
      }
    }
    std::move(c.done)(std::move(results));
  }

 private:
  absl::Mutex mu_;
  std::deque<Call> calls_ ABSL_GUARDED_BY(mu_);
};

std::vector<RenewParams> Round(std::vector<std::string> names) {
  std::vector<RenewParams> out;
  for (std::string& n : names)
    out.push_back(RenewParams{{"ns", std::move(n)}, "o", absl::Seconds(3)});
  return out;
}

// Collects one round's results.
struct Results {
  bool answered = false;
  std::vector<absl::StatusOr<RenewResult>> r;
  RenewManyCallback Callback() {
    return [this](std::vector<absl::StatusOr<RenewResult>> got) {
      answered = true;
      r = std::move(got);
    };
  }
  std::vector<uint64_t> Tokens() const {
    std::vector<uint64_t> out;
    for (const auto& x : r) out.push_back(x.ok() ? x->fencing_token : 0);
    return out;
  }
};

TEST(RenewCoalescerTest, RoundsGoAtOnceWhileBatchSlotsAreFree) {
  HeldRenewalsBackend backend;
  RenewCoalescer c(&backend, /*max_in_flight=*/2, /*max_batch=*/100);
  Results a, b;
  c.RenewMany(Round({"a"}), a.Callback());
  c.RenewMany(Round({"bb", "ccc"}), b.Callback());
  ASSERT_EQ(backend.calls(), 2u);
  EXPECT_THAT(backend.Names(1), ElementsAre("bb", "ccc"));
  backend.Answer(1);
  EXPECT_TRUE(b.answered);
  EXPECT_FALSE(a.answered);
  EXPECT_THAT(b.Tokens(), ElementsAre(2, 3));
}

TEST(RenewCoalescerTest, RoundsThatWaitGoTogetherAndEachGetsItsOwnResults) {
  HeldRenewalsBackend backend;
  RenewCoalescer c(&backend, /*max_in_flight=*/1, /*max_batch=*/100);
  Results first, r1, r2, r3;
  c.RenewMany(Round({"a"}), first.Callback());
  c.RenewMany(Round({"bb", "x1"}), r1.Callback());
  c.RenewMany(Round({"ccc"}), r2.Callback());
  c.RenewMany(Round({"x22", "dddd", "eeeee"}), r3.Callback());
  ASSERT_EQ(backend.calls(), 1u) << "the others wait for the batch in flight";

  backend.Answer(0);
  EXPECT_THAT(first.Tokens(), ElementsAre(1));
  ASSERT_EQ(backend.calls(), 2u);
  EXPECT_THAT(backend.Names(1), ElementsAre("bb", "x1", "ccc", "x22", "dddd", "eeeee"));
  EXPECT_FALSE(r1.answered);

  backend.Answer(1);
  ASSERT_TRUE(r1.answered && r2.answered && r3.answered);
  EXPECT_THAT(r1.Tokens(), ElementsAre(2, 0));
  EXPECT_THAT(r1.r[1], StatusIs(absl::StatusCode::kFailedPrecondition));
  EXPECT_THAT(r2.Tokens(), ElementsAre(3));
  EXPECT_THAT(r3.Tokens(), ElementsAre(0, 4, 5));
  EXPECT_THAT(r3.r[0], StatusIs(absl::StatusCode::kFailedPrecondition));

  // The slot is free again: the next round goes at once.
  Results later;
  c.RenewMany(Round({"ffffff"}), later.Callback());
  ASSERT_EQ(backend.calls(), 3u);
  backend.Answer(2);
  EXPECT_THAT(later.Tokens(), ElementsAre(6));
}

TEST(RenewCoalescerTest, ABatchHoldsAtMostMaxBatchRenewalsButNeverSplitsARound) {
  HeldRenewalsBackend backend;
  RenewCoalescer c(&backend, /*max_in_flight=*/1, /*max_batch=*/3);
  Results first, r1, r2, r3;
  c.RenewMany(Round({"a"}), first.Callback());
  c.RenewMany(Round({"b1", "b2"}), r1.Callback());
  c.RenewMany(Round({"c1", "c2"}), r2.Callback());
  c.RenewMany(Round({"d1", "d2", "d3", "d4"}), r3.Callback());

  backend.Answer(0);
  ASSERT_EQ(backend.calls(), 2u);
  EXPECT_THAT(backend.Names(1), ElementsAre("b1", "b2"));
  backend.Answer(1);
  ASSERT_EQ(backend.calls(), 3u);
  EXPECT_THAT(backend.Names(2), ElementsAre("c1", "c2"));
  backend.Answer(2);
  ASSERT_EQ(backend.calls(), 4u);
  EXPECT_THAT(backend.Names(3), ElementsAre("d1", "d2", "d3", "d4"))
      << "a round larger than a batch goes whole";
  backend.Answer(3);
  EXPECT_TRUE(r3.answered);
  EXPECT_THAT(r3.Tokens(), ElementsAre(2, 2, 2, 2));
}

TEST(RenewCoalescerTest, BatchesInFlightCompleteAfterTheCoalescerIsGone) {
  HeldRenewalsBackend backend;
  Results a, b;
  {
    RenewCoalescer c(&backend, /*max_in_flight=*/1, /*max_batch=*/100);
    c.RenewMany(Round({"a"}), a.Callback());
    c.RenewMany(Round({"bb"}), b.Callback());
  }
  backend.Answer(0);
  ASSERT_EQ(backend.calls(), 2u);
  backend.Answer(1);
  EXPECT_THAT(a.Tokens(), ElementsAre(1));
  EXPECT_THAT(b.Tokens(), ElementsAre(2));
}

}  // namespace
}  // namespace lockd
