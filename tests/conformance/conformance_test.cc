// The conformance suite's core rules (conformance.h has the fixture).

#include "tests/conformance/conformance.h"

#include <atomic>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <thread>
#include <vector>

namespace lockd::testing {
namespace {

using ::testing::HasSubstr;
using ::testing::StartsWith;

// --- Mutual exclusion and fencing under concurrency ------------------------

// Runs `clients` threads, each with its own channel to addresses[i % n], each
// doing `rounds` critical sections that increment a shared counter with a
// deliberately non-atomic read-sleep-write. Lost updates would show a broken
// lock. Tokens are recorded inside the critical section, so their order is the
// grant order.
void RunCounter(const std::vector<std::string>& addresses, int clients, int rounds,
                const std::string& name) {
  std::atomic<int64_t> counter{0};
  std::atomic<int64_t> grants{0};
  std::mutex tokens_mu;
  std::vector<uint64_t> tokens;
  std::atomic<int> errors{0};
  std::vector<std::thread> threads;
  for (int c = 0; c < clients; ++c) {
    threads.emplace_back([&, c] {
      auto stub = NewStub(addresses[c % addresses.size()]);
      std::string owner = absl::StrCat("client-", c);
      for (int r = 0; r < rounds; ++r) {
        v1::AcquireRequest req;
        req.set_name(name);
        req.set_owner(owner);
        *req.mutable_lease_ttl() = ToProtoDuration(absl::Seconds(30));
        *req.mutable_wait_timeout() = ToProtoDuration(absl::Seconds(60));
        v1::AcquireResponse resp;
        grpc::ClientContext ctx;
        ctx.set_deadline(absl::ToChronoTime(absl::Now() + absl::Seconds(90)));
        grpc::Status s = stub->Acquire(&ctx, req, &resp);
        if (!s.ok() || !resp.acquired()) {
          ++errors;
          ADD_FAILURE() << "acquire failed: " << s.error_message();
          continue;
        }
        int64_t v = counter.load(std::memory_order_relaxed);
        absl::SleepFor(absl::Microseconds(200));
        counter.store(v + 1, std::memory_order_relaxed);
        {
          std::lock_guard<std::mutex> l(tokens_mu);
          tokens.push_back(resp.fencing_token());
        }
        ++grants;
        v1::ReleaseRequest rel;
        rel.set_name(name);
        rel.set_owner(owner);
        v1::ReleaseResponse rel_resp;
        grpc::ClientContext rctx;
        rctx.set_deadline(absl::ToChronoTime(absl::Now() + absl::Seconds(30)));
        s = stub->Release(&rctx, rel, &rel_resp);
        if (!s.ok() || !rel_resp.released()) {
          ++errors;
          ADD_FAILURE() << "release failed: " << s.error_message();
        }
      }
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_EQ(errors.load(), 0);
  EXPECT_EQ(grants.load(), clients * rounds);
  EXPECT_EQ(counter.load(), grants.load()) << "lost updates: mutual exclusion was broken";
  for (size_t i = 1; i < tokens.size(); ++i) {
    ASSERT_GT(tokens[i], tokens[i - 1]) << "fencing tokens not increasing in grant order at " << i;
  }
}

TEST_P(ConformanceTest, MutualExclusionUnder16ConcurrentClients) {
  std::vector<std::string> addresses;
  for (int i = 0; i < replicas(); ++i) addresses.push_back(Server(i)->address());
  RunCounter(addresses, 16, 20, "counter");
}

TEST_P(ConformanceTest, MutualExclusionAcrossThreeLockdProcesses) {
  if (!Env().multi_replica()) GTEST_SKIP() << Env().name() << " serves a single replica";
  if (replicas() > 1) GTEST_SKIP() << "starts its own three lockd processes";
  TempDir dir;
  std::vector<std::unique_ptr<LockdProcess>> procs;
  std::vector<std::string> addresses;
  for (int i = 0; i < 3; ++i) {
    auto p = LockdProcess::Start(Flags({}), dir.path());
    ASSERT_TRUE(p.ok()) << p.status();
    addresses.push_back((*p)->address());
    procs.push_back(*std::move(p));
  }
  RunCounter(addresses, 16, 12, "shared-counter");
  for (auto& p : procs) EXPECT_EQ(p->process().Stop(), 0) << p->process().Log();
}

// --- Waiting -----------------------------------------------------------------

TEST_P(ConformanceTest, WaiterAcquiresAfterRelease) {
  uint64_t t1 = MustAcquire("w", "alice");
  v1::AcquireResponse resp;
  grpc::Status status;
  std::thread waiter([&] {
    status = Acquire({"w", "bob", absl::Seconds(30), absl::Seconds(20)}, &resp, Stub(1));
  });
  WaitForWaiters("w", 1, 1);
  v1::ReleaseResponse rel;
  ASSERT_TRUE(Release("w", "alice", &rel).ok());
  EXPECT_TRUE(rel.released());
  waiter.join();
  ASSERT_TRUE(status.ok()) << status.error_message();
  EXPECT_TRUE(resp.acquired());
  EXPECT_EQ(resp.owner(), "bob");
  EXPECT_EQ(resp.hold_count(), 1u);
  EXPECT_GT(resp.fencing_token(), t1);
  EXPECT_EQ(Describe("w").owner(), "bob");
  EXPECT_EQ(Describe("w", "", Stub(1)).waiters(), 0u);
}

TEST_P(ConformanceTest, WaiterAcquiresAfterLeaseExpiresWithoutRelease) {
  absl::Time granted = absl::Now();
  uint64_t t1 = MustAcquire("exp", "crashed-holder", absl::Milliseconds(500));
  v1::AcquireResponse resp;
  ASSERT_TRUE(Acquire({"exp", "bob", absl::Seconds(30), absl::Seconds(20)}, &resp, Stub(1)).ok());
  absl::Duration waited = absl::Now() - granted;
  ASSERT_TRUE(resp.acquired());
  EXPECT_GT(resp.fencing_token(), t1);
  EXPECT_GE(waited, absl::Milliseconds(400)) << "granted before the lease ended";
  EXPECT_LE(waited, absl::Seconds(5)) << "expired lease not noticed promptly";
}

TEST_P(ConformanceTest, WaitersOnOneReplicaAreGrantedInArrivalOrder) {
  // The holder is on another replica when there are several.
  v1::AcquireResponse held;
  ASSERT_TRUE(Acquire({"fifo", "holder"}, &held, Stub(1)).ok());
  ASSERT_TRUE(held.acquired());
  constexpr int kWaiters = 5;
  std::mutex mu;
  std::vector<int> order;
  std::vector<std::thread> threads;
  for (int i = 0; i < kWaiters; ++i) {
    threads.emplace_back([&, i] {
      auto stub = NewStub(server_->address());
      std::string owner = absl::StrCat("waiter-", i);
      v1::AcquireResponse resp;
      grpc::Status s =
          Acquire({"fifo", owner, absl::Seconds(30), absl::Seconds(30)}, &resp, stub.get());
      ASSERT_TRUE(s.ok() && resp.acquired()) << s.error_message();
      {
        std::lock_guard<std::mutex> l(mu);
        order.push_back(i);
      }
      absl::SleepFor(absl::Milliseconds(20));
      v1::ReleaseResponse rel;
      ASSERT_TRUE(Release("fifo", owner, &rel).ok());
    });
    WaitForWaiters("fifo", i + 1);
  }
  v1::ReleaseResponse rel;
  ASSERT_TRUE(Release("fifo", "holder", &rel).ok());
  for (auto& t : threads) t.join();
  EXPECT_EQ(order, std::vector<int>({0, 1, 2, 3, 4}));
}

TEST_P(ConformanceTest, TryOnceOnHeldLockAnswersNotAcquiredWithHolder) {
  uint64_t token = MustAcquire("busy", "alice");
  v1::AcquireResponse resp;
  absl::Time start = absl::Now();
  ASSERT_TRUE(Acquire({"busy", "bob"}, &resp, Stub(1)).ok());
  EXPECT_LT(absl::Now() - start, absl::Seconds(2));
  EXPECT_FALSE(resp.acquired());
  EXPECT_EQ(resp.owner(), "bob");
  EXPECT_TRUE(resp.current().held());
  EXPECT_EQ(resp.current().owner(), "alice");
  EXPECT_EQ(resp.current().hold_count(), 1u);
  EXPECT_EQ(resp.current().fencing_token(), token);
  EXPECT_EQ(resp.current().name(), "busy");
  EXPECT_EQ(resp.current().namespace_(), "default");
  EXPECT_EQ(resp.current().backend(), Env().name());
}

TEST_P(ConformanceTest, WaitEndsAtWaitTimeoutWithHolderDescribed) {
  MustAcquire("slow", "alice");
  v1::AcquireResponse resp;
  absl::Time start = absl::Now();
  ASSERT_TRUE(
      Acquire({"slow", "bob", absl::Seconds(30), absl::Milliseconds(400)}, &resp, Stub(1)).ok());
  absl::Duration waited = absl::Now() - start;
  EXPECT_FALSE(resp.acquired());
  EXPECT_EQ(resp.current().owner(), "alice");
  EXPECT_GE(waited, absl::Milliseconds(350));
  EXPECT_LT(waited, absl::Seconds(5));
  EXPECT_EQ(Describe("slow", "", Stub(1)).waiters(), 0u);
  EXPECT_EQ(Describe("slow").owner(), "alice");
}

TEST_P(ConformanceTest, WaitEndsAtGrpcDeadlineAndLeavesNoLock) {
  MustAcquire("dl", "alice");
  v1::AcquireResponse resp;
  absl::Time start = absl::Now();
  Acq a{"dl", "bob", absl::Seconds(30), absl::Seconds(30)};
  a.deadline = absl::Milliseconds(400);
  grpc::Status s = Acquire(a, &resp, Stub(1));
  EXPECT_THAT(s, StatusIs(grpc::StatusCode::DEADLINE_EXCEEDED));
  EXPECT_LT(absl::Now() - start, absl::Seconds(5));
  ASSERT_TRUE(
      WaitFor([&] { return Describe("dl", "", Stub(1)).waiters() == 0; }, absl::Seconds(10)));
  v1::ReleaseResponse rel;
  ASSERT_TRUE(Release("dl", "alice", &rel).ok());
  EXPECT_TRUE(EventuallyFree("dl"));
  absl::SleepFor(absl::Milliseconds(300));
  EXPECT_FALSE(Describe("dl").held()) << "the timed-out waiter was granted the lock";
}

TEST_P(ConformanceTest, CancelledWaitingAcquireLeavesNoLock) {
  MustAcquire("cx", "alice");
  grpc::ClientContext ctx;
  grpc::Status status;
  std::thread waiter([&] {
    v1::AcquireRequest req;
    req.set_name("cx");
    req.set_owner("bob");
    *req.mutable_wait_timeout() = ToProtoDuration(absl::Seconds(30));
    v1::AcquireResponse resp;
    status = Stub(1)->Acquire(&ctx, req, &resp);
  });
  WaitForWaiters("cx", 1, 1);
  ctx.TryCancel();
  waiter.join();
  EXPECT_THAT(status, StatusIs(grpc::StatusCode::CANCELLED));
  ASSERT_TRUE(
      WaitFor([&] { return Describe("cx", "", Stub(1)).waiters() == 0; }, absl::Seconds(10)));
  v1::ReleaseResponse rel;
  ASSERT_TRUE(Release("cx", "alice", &rel).ok());
  EXPECT_TRUE(EventuallyFree("cx"));
  absl::SleepFor(absl::Milliseconds(300));
  EXPECT_FALSE(Describe("cx").held()) << "the cancelled waiter was granted the lock";
}

TEST_P(ConformanceTest, ManyTimedOutWaitersLeaveNothingBehind) {
  MustAcquire("crowd", "alice");
  std::vector<std::thread> threads;
  std::atomic<int> not_acquired{0};
  for (int i = 0; i < 20; ++i) {
    threads.emplace_back([&, i] {
      auto stub = NewStub(Server(i)->address());
      v1::AcquireResponse resp;
      grpc::Status s =
          Acquire({"crowd", absl::StrCat("w", i), absl::Seconds(30), absl::Milliseconds(300)},
                  &resp, stub.get());
      if (s.ok() && !resp.acquired()) ++not_acquired;
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_EQ(not_acquired.load(), 20);
  for (int r = 0; r < replicas(); ++r) EXPECT_EQ(Describe("crowd", "", Stub(r)).waiters(), 0u);
  v1::ReleaseResponse rel;
  ASSERT_TRUE(Release("crowd", "alice", &rel).ok());
  EXPECT_TRUE(rel.released());
  EXPECT_TRUE(EventuallyFree("crowd"));
}

TEST_P(ConformanceTest, TooManyWaitersIsResourceExhausted) {
  if (replicas() > 1) GTEST_SKIP() << "a limit of one replica";
  std::unique_ptr<LockdServer> small = StartServer({"--max_waiters=2"});
  ASSERT_NE(small, nullptr);
  auto stub = NewStub(small->address());
  v1::AcquireResponse resp;
  ASSERT_TRUE(Acquire({"full", "alice"}, &resp, stub.get()).ok());
  ASSERT_TRUE(resp.acquired());
  std::vector<std::thread> waiters;
  for (int i = 0; i < 2; ++i) {
    waiters.emplace_back([&, i] {
      auto s2 = NewStub(small->address());
      v1::AcquireResponse r;
      Acquire({"full", absl::StrCat("w", i), absl::Seconds(30), absl::Seconds(4)}, &r, s2.get());
    });
  }
  ASSERT_TRUE(WaitFor(
      [&] {
        v1::DescribeRequest req;
        req.set_name("full");
        v1::LockInfo info;
        grpc::ClientContext ctx;
        return stub->Describe(&ctx, req, &info).ok() && info.waiters() == 2;
      },
      absl::Seconds(10)));
  grpc::Status s =
      Acquire({"full", "third", absl::Seconds(30), absl::Seconds(2)}, &resp, stub.get());
  EXPECT_THAT(s, StatusIs(grpc::StatusCode::RESOURCE_EXHAUSTED));
  for (auto& t : waiters) t.join();
}

TEST_P(ConformanceTest, ShutdownAnswersParkedWaitersUnavailable) {
  MustAcquire("sd", "alice");
  grpc::Status status;
  std::thread waiter([&] {
    v1::AcquireResponse resp;
    status = Acquire({"sd", "bob", absl::Seconds(30), absl::Seconds(30)}, &resp);
  });
  WaitForWaiters("sd", 1);
  absl::Time start = absl::Now();
  server_->Shutdown(absl::Seconds(5));
  waiter.join();
  EXPECT_THAT(status, StatusIs(grpc::StatusCode::UNAVAILABLE));
  EXPECT_LT(absl::Now() - start, absl::Seconds(5));
}

// --- Fencing tokens ------------------------------------------------------------

TEST_P(ConformanceTest, FencingTokenIncreasesAcrossGrantExpiryAndRegrant) {
  uint64_t t1 = MustAcquire("fence", "a");
  v1::ReleaseResponse rel;
  ASSERT_TRUE(Release("fence", "a", &rel).ok());
  // Each grant through another replica when there are several.
  v1::AcquireResponse r2, r3;
  ASSERT_TRUE(Acquire({"fence", "b", absl::Milliseconds(200)}, &r2, Stub(1)).ok());
  ASSERT_TRUE(r2.acquired());
  uint64_t t2 = r2.fencing_token();
  EXPECT_GT(t2, t1);
  absl::SleepFor(absl::Milliseconds(400));
  ASSERT_TRUE(Acquire({"fence", "c"}, &r3, Stub(2)).ok());
  ASSERT_TRUE(r3.acquired());
  uint64_t t3 = r3.fencing_token();
  EXPECT_GT(t3, t2);
  // Reentrant acquire and renew keep the token.
  EXPECT_EQ(MustAcquire("fence", "c"), t3);
  v1::RenewResponse renew;
  ASSERT_TRUE(Renew("fence", "c", absl::Seconds(10), &renew).ok());
  EXPECT_EQ(renew.fencing_token(), t3);
  EXPECT_EQ(Describe("fence").fencing_token(), t3);
}

TEST_P(ConformanceTest, FencingTokenIncreasesAcrossServiceRestart) {
  uint64_t t1 = MustAcquire("restart", "a");
  v1::ReleaseResponse rel;
  ASSERT_TRUE(Release("restart", "a", &rel).ok());
  server_.reset();
  server_ = StartServer({});
  ASSERT_NE(server_, nullptr);
  stub_ = NewStub(server_->address());
  EXPECT_GT(MustAcquire("restart", "b"), t1);
}

// --- Reentrancy, release, renew -----------------------------------------------------------

TEST_P(ConformanceTest, ReentrantAcquireCountsHolds) {
  v1::AcquireResponse r1, r2, r3;
  ASSERT_TRUE(Acquire({"re", "alice"}, &r1).ok());
  ASSERT_TRUE(Acquire({"re", "alice"}, &r2).ok());
  ASSERT_TRUE(Acquire({"re", "alice"}, &r3).ok());
  EXPECT_EQ(r1.hold_count(), 1u);
  EXPECT_EQ(r2.hold_count(), 2u);
  EXPECT_EQ(r3.hold_count(), 3u);
  EXPECT_EQ(r2.fencing_token(), r1.fencing_token());
  EXPECT_EQ(r3.fencing_token(), r1.fencing_token());
  EXPECT_EQ(Describe("re").hold_count(), 3u);
  v1::ReleaseResponse rel;
  ASSERT_TRUE(Release("re", "alice", &rel).ok());
  EXPECT_FALSE(rel.released());
  EXPECT_EQ(rel.hold_count(), 2u);
  ASSERT_TRUE(Release("re", "alice", &rel).ok());
  EXPECT_EQ(rel.hold_count(), 1u);
  EXPECT_TRUE(Describe("re").held());
  ASSERT_TRUE(Release("re", "alice", &rel).ok());
  EXPECT_TRUE(rel.released());
  EXPECT_EQ(rel.hold_count(), 0u);
  EXPECT_FALSE(Describe("re").held());
}

TEST_P(ConformanceTest, ReentrantAcquireResetsLease) {
  // 1.3 + 1.3 s outlives the first 2 s lease only if the second acquire reset
  // it. (Each step has 0.7 s to spare: the second acquire must land within
  // the first lease, the Describe within the second, on a loaded machine.)
  MustAcquire("re-lease", "alice", absl::Seconds(2));
  absl::SleepFor(absl::Milliseconds(1300));
  MustAcquire("re-lease", "alice", absl::Seconds(2));
  absl::SleepFor(absl::Milliseconds(1300));
  v1::LockInfo info = Describe("re-lease");
  EXPECT_TRUE(info.held()) << "reentrant acquire did not reset the lease";
  EXPECT_EQ(info.hold_count(), 2u);
}

TEST_P(ConformanceTest, ReleaseByNonOwnerIsLockNotHeldAndLeavesLockUntouched) {
  uint64_t token = MustAcquire("mine", "alice");
  v1::ReleaseResponse rel;
  grpc::Status s = Release("mine", "mallory", &rel, "", "", Stub(1));
  EXPECT_THAT(s, IsLockNotHeld()) << s.error_message();
  v1::LockInfo info = Describe("mine");
  EXPECT_TRUE(info.held());
  EXPECT_EQ(info.owner(), "alice");
  EXPECT_EQ(info.hold_count(), 1u);
  EXPECT_EQ(info.fencing_token(), token);
}

TEST_P(ConformanceTest, ReleaseOfFreeLockIsLockNotHeld) {
  v1::ReleaseResponse rel;
  EXPECT_THAT(Release("never-held", "alice", &rel), IsLockNotHeld());
  EXPECT_FALSE(Describe("never-held").held());
}

TEST_P(ConformanceTest, ReleaseAfterExpiryIsLockNotHeld) {
  MustAcquire("gone", "alice", absl::Milliseconds(200));
  absl::SleepFor(absl::Milliseconds(450));
  v1::ReleaseResponse rel;
  EXPECT_THAT(Release("gone", "alice", &rel, "", "", Stub(1)), IsLockNotHeld());
  EXPECT_FALSE(Describe("gone", "", Stub(2)).held());
}

TEST_P(ConformanceTest, RenewExtendsLease) {
  uint64_t token = MustAcquire("renew", "alice", absl::Milliseconds(800));
  absl::SleepFor(absl::Milliseconds(300));
  v1::RenewResponse resp;
  ASSERT_TRUE(Renew("renew", "alice", absl::Seconds(3), &resp).ok());
  EXPECT_EQ(FromProtoDuration(resp.lease_ttl()), absl::Seconds(3));
  EXPECT_EQ(resp.fencing_token(), token);
  absl::SleepFor(absl::Milliseconds(800));
  v1::LockInfo info = Describe("renew");
  EXPECT_TRUE(info.held()) << "renew did not extend the lease";
  EXPECT_GT(FromProtoDuration(info.ttl_remaining()), absl::Seconds(1));
  EXPECT_LE(FromProtoDuration(info.ttl_remaining()), absl::Seconds(3));
}

TEST_P(ConformanceTest, RenewWithoutTtlUsesDefaultLease) {
  MustAcquire("renew-default", "alice", absl::Seconds(2));
  v1::RenewResponse resp;
  ASSERT_TRUE(Renew("renew-default", "alice", absl::ZeroDuration(), &resp).ok());
  EXPECT_EQ(FromProtoDuration(resp.lease_ttl()), absl::Seconds(30));
}

TEST_P(ConformanceTest, RenewByNonOwnerIsLockNotHeldAndLeavesLockUntouched) {
  MustAcquire("r-mine", "alice", absl::Seconds(5));
  v1::RenewResponse resp;
  EXPECT_THAT(Renew("r-mine", "mallory", absl::Seconds(60), &resp), IsLockNotHeld());
  v1::LockInfo info = Describe("r-mine");
  EXPECT_EQ(info.owner(), "alice");
  EXPECT_LE(FromProtoDuration(info.ttl_remaining()), absl::Seconds(5));
}

TEST_P(ConformanceTest, RenewAfterExpiryIsLockNotHeld) {
  MustAcquire("r-gone", "alice", absl::Milliseconds(200));
  absl::SleepFor(absl::Milliseconds(450));
  v1::RenewResponse resp;
  EXPECT_THAT(Renew("r-gone", "alice", absl::Seconds(5), &resp, Stub(1)), IsLockNotHeld());
  EXPECT_FALSE(Describe("r-gone", "", Stub(2)).held());
}

// --- Idempotency --------------------------------------------------------------------------

TEST_P(ConformanceTest, RepeatedAcquireRequestIdChangesNothing) {
  v1::AcquireResponse first, again;
  Acq a{"idem", "alice"};
  a.request_id = "req-1";
  ASSERT_TRUE(Acquire(a, &first).ok());
  ASSERT_TRUE(Acquire(a, &again).ok());
  EXPECT_TRUE(again.acquired());
  EXPECT_EQ(again.hold_count(), 1u);
  EXPECT_EQ(again.fencing_token(), first.fencing_token());
  EXPECT_EQ(Describe("idem").hold_count(), 1u);
  // A new request id is a new, reentrant acquire.
  a.request_id = "req-2";
  ASSERT_TRUE(Acquire(a, &again).ok());
  EXPECT_EQ(again.hold_count(), 2u);
  EXPECT_EQ(Describe("idem").hold_count(), 2u);
}

TEST_P(ConformanceTest, RepeatedReleaseRequestIdChangesNothing) {
  MustAcquire("idem-rel", "alice");
  MustAcquire("idem-rel", "alice");
  v1::ReleaseResponse first, again;
  ASSERT_TRUE(Release("idem-rel", "alice", &first, "rel-1").ok());
  ASSERT_TRUE(Release("idem-rel", "alice", &again, "rel-1").ok());
  EXPECT_EQ(first.hold_count(), 1u);
  EXPECT_EQ(again.hold_count(), 1u);
  EXPECT_FALSE(again.released());
  EXPECT_EQ(Describe("idem-rel").hold_count(), 1u);
  // The release that frees the lock answers the same when retried.
  ASSERT_TRUE(Release("idem-rel", "alice", &first, "rel-2").ok());
  EXPECT_TRUE(first.released());
  ASSERT_TRUE(Release("idem-rel", "alice", &again, "rel-2").ok());
  EXPECT_TRUE(again.released());
  EXPECT_EQ(again.hold_count(), 0u);
  EXPECT_FALSE(Describe("idem-rel").held());
}

// --- Owners, namespaces, names, leases ----------------------------------------------------

TEST_P(ConformanceTest, EmptyOwnerGetsAGeneratedOwner) {
  v1::AcquireResponse a, b;
  ASSERT_TRUE(Acquire({"anon", ""}, &a).ok());
  ASSERT_TRUE(a.acquired());
  EXPECT_THAT(a.owner(), ::testing::MatchesRegex("[0-9a-f]{32}"));
  EXPECT_EQ(Describe("anon").owner(), a.owner());
  ASSERT_TRUE(Acquire({"anon2", ""}, &b).ok());
  EXPECT_NE(a.owner(), b.owner());
  v1::ReleaseResponse rel;
  ASSERT_TRUE(Release("anon", a.owner(), &rel).ok());
  EXPECT_TRUE(rel.released());
}

TEST_P(ConformanceTest, EmptyNamespaceIsDefault) {
  MustAcquire("ns-default", "alice");
  EXPECT_TRUE(Describe("ns-default", "default").held());
  EXPECT_EQ(Describe("ns-default").namespace_(), "default");
  EXPECT_FALSE(Describe("ns-default", "other").held()) << "namespaces must be separate";
}

TEST_P(ConformanceTest, AbsentLeaseTtlUsesConfiguredDefault) {
  v1::AcquireResponse resp;
  Acq a{"default-ttl", "alice"};
  a.ttl = absl::ZeroDuration();
  ASSERT_TRUE(Acquire(a, &resp).ok());
  EXPECT_EQ(FromProtoDuration(resp.lease_ttl()), absl::Seconds(30));
  absl::Duration left = FromProtoDuration(Describe("default-ttl").ttl_remaining());
  EXPECT_GT(left, absl::Seconds(25));
  EXPECT_LE(left, absl::Seconds(30));
}

TEST_P(ConformanceTest, NamesRoundTripExactly) {
  const std::vector<std::string> names = {
      "orders/42",  "orders%2F42", "orders_42", "a b",         "/",
      "//x//",      "..",          "{tag}",     "x:y",         "a*b?[c]",
      "ünïcödé/锁", "emoji 🔒",     "quote'\"`", "back\\slash", std::string(512, 'n')};
  for (size_t i = 0; i < names.size(); ++i) {
    v1::AcquireResponse resp;
    ASSERT_TRUE(
        Acquire({names[i], absl::StrCat("owner-", i), absl::Seconds(30), {}, "", "rt"}, &resp)
            .ok());
    ASSERT_TRUE(resp.acquired()) << names[i] << " collided with another name";
  }
  for (size_t i = 0; i < names.size(); ++i) {
    v1::LockInfo info = Describe(names[i], "rt");
    EXPECT_EQ(info.name(), names[i]);
    EXPECT_EQ(info.owner(), absl::StrCat("owner-", i)) << names[i];
  }
  v1::ListRequest req;
  req.set_namespace_("rt");
  req.set_page_size(1000);
  v1::ListResponse list;
  grpc::ClientContext ctx;
  ASSERT_TRUE(stub_->List(&ctx, req, &list).ok());
  std::set<std::string> listed;
  for (const auto& l : list.locks()) listed.insert(l.name());
  EXPECT_EQ(listed, std::set<std::string>(names.begin(), names.end()));
}

TEST_P(ConformanceTest, DescribeOfFreeLockIsNotHeld) {
  v1::LockInfo info = Describe("free-lock");
  EXPECT_FALSE(info.held());
  EXPECT_EQ(info.name(), "free-lock");
  EXPECT_EQ(info.namespace_(), "default");
  EXPECT_EQ(info.backend(), Env().name());
  EXPECT_EQ(info.owner(), "");
  EXPECT_EQ(info.fencing_token(), 0u);
}

TEST_P(ConformanceTest, DescribeReportsHolderAndRemainingLease) {
  uint64_t token = MustAcquire("desc", "alice", absl::Seconds(20));
  v1::LockInfo info = Describe("desc");
  EXPECT_TRUE(info.held());
  EXPECT_EQ(info.owner(), "alice");
  EXPECT_EQ(info.hold_count(), 1u);
  EXPECT_EQ(info.fencing_token(), token);
  EXPECT_GT(FromProtoDuration(info.ttl_remaining()), absl::Seconds(15));
  EXPECT_LE(FromProtoDuration(info.ttl_remaining()), absl::Seconds(20));
  EXPECT_EQ(info.backend(), Env().name());
}

TEST_P(ConformanceTest, ListPagesThroughHeldLocksByPrefix) {
  std::vector<std::string> expected;
  for (int i = 0; i < 25; ++i) {
    std::string name = absl::StrCat("p/", i < 10 ? "0" : "", i);
    MustAcquire(name, "alice");
    expected.push_back(name);
  }
  MustAcquire("q/1", "alice");
  MustAcquire("p/released", "alice");
  v1::ReleaseResponse rel;
  ASSERT_TRUE(Release("p/released", "alice", &rel).ok());

  std::vector<std::string> seen;
  std::string token;
  int pages = 0;
  do {
    v1::ListRequest req;
    req.set_prefix("p/");
    req.set_page_size(10);
    req.set_page_token(token);
    v1::ListResponse resp;
    grpc::ClientContext ctx;
    ASSERT_TRUE(stub_->List(&ctx, req, &resp).ok());
    EXPECT_LE(resp.locks_size(), 10);
    for (const auto& l : resp.locks()) {
      EXPECT_TRUE(l.held());
      EXPECT_EQ(l.owner(), "alice");
      EXPECT_EQ(l.namespace_(), "default");
      seen.push_back(l.name());
    }
    token = resp.next_page_token();
    ASSERT_LT(++pages, 10) << "paging does not end";
  } while (!token.empty());
  EXPECT_EQ(seen, expected);
}

// --- Bad input ----------------------------------------------------------------------------

struct BadAcquire {
  std::string field;
  std::function<void(v1::AcquireRequest&)> mutate;
};

TEST_P(ConformanceTest, BadAcquireInputIsRejectedNamingTheFieldAndWritesNothing) {
  const std::vector<BadAcquire> cases = {
      {"name", [](auto& r) { r.set_name(""); }},
      {"name", [](auto& r) { r.set_name(std::string(513, 'x')); }},
      {"name", [](auto& r) { r.set_name("control\x01"); }},
      {"name", [](auto& r) { r.set_name("new\nline"); }},
      {"namespace", [](auto& r) { r.set_namespace_("has space"); }},
      {"namespace", [](auto& r) { r.set_namespace_("slash/ns"); }},
      {"namespace", [](auto& r) { r.set_namespace_(std::string(65, 'n')); }},
      {"owner", [](auto& r) { r.set_owner(std::string(257, 'o')); }},
      {"owner", [](auto& r) { r.set_owner("tab\towner"); }},
      {"lease_ttl",
       [](auto& r) { *r.mutable_lease_ttl() = ToProtoDuration(absl::ZeroDuration()); }},
      {"lease_ttl", [](auto& r) { *r.mutable_lease_ttl() = ToProtoDuration(absl::Seconds(-1)); }},
      {"lease_ttl",
       [](auto& r) { *r.mutable_lease_ttl() = ToProtoDuration(absl::Milliseconds(50)); }},
      {"lease_ttl", [](auto& r) { *r.mutable_lease_ttl() = ToProtoDuration(absl::Hours(2)); }},
      {"lease_ttl",
       [](auto& r) {
         r.mutable_lease_ttl()->set_nanos(-5);
         r.mutable_lease_ttl()->set_seconds(5);
       }},
      {"wait_timeout",
       [](auto& r) { *r.mutable_wait_timeout() = ToProtoDuration(absl::Seconds(-1)); }},
      {"request_id", [](auto& r) { r.set_request_id(std::string(129, 'r')); }},
  };
  for (const BadAcquire& c : cases) {
    v1::AcquireRequest req;
    req.set_name("victim");
    req.set_owner("alice");
    *req.mutable_lease_ttl() = ToProtoDuration(absl::Seconds(10));
    c.mutate(req);
    v1::AcquireResponse resp;
    grpc::ClientContext ctx;
    grpc::Status s = stub_->Acquire(&ctx, req, &resp);
    EXPECT_THAT(s, StatusIs(grpc::StatusCode::INVALID_ARGUMENT)) << c.field;
    EXPECT_THAT(s.error_message(), StartsWith(c.field + ":")) << s.error_message();
  }
  // Invalid UTF-8 in a proto3 string field never reaches the service: the
  // protobuf layer refuses to parse it (Python and Go stubs refuse to send it).
  // It must still be refused and write nothing.
  for (std::string bad : {std::string("bad\xff utf8"), std::string("over\xc0\xaflong")}) {
    v1::AcquireRequest req;
    req.set_name(bad);
    req.set_owner("alice");
    v1::AcquireResponse resp;
    grpc::ClientContext ctx;
    EXPECT_FALSE(stub_->Acquire(&ctx, req, &resp).ok());
  }
  EXPECT_FALSE(Describe("victim").held());
  v1::ListRequest req;
  v1::ListResponse list;
  grpc::ClientContext ctx;
  ASSERT_TRUE(stub_->List(&ctx, req, &list).ok());
  EXPECT_EQ(list.locks_size(), 0) << "a rejected request wrote a lock";
}

TEST_P(ConformanceTest, BadInputToOtherCallsIsRejectedNamingTheField) {
  uint64_t token = MustAcquire("held", "alice", absl::Seconds(10));
  auto expect_invalid = [](const grpc::Status& s, const std::string& field) {
    EXPECT_THAT(s, StatusIs(grpc::StatusCode::INVALID_ARGUMENT)) << field;
    EXPECT_THAT(s.error_message(), StartsWith(field + ":")) << s.error_message();
  };
  {
    v1::ReleaseResponse resp;
    expect_invalid(Release("held", "", &resp), "owner");
    expect_invalid(Release("", "alice", &resp), "name");
    expect_invalid(Release("held", "alice", &resp, std::string(129, 'r')), "request_id");
  }
  {
    v1::RenewRequest req;
    req.set_name("held");
    req.set_owner("alice");
    *req.mutable_lease_ttl() = ToProtoDuration(absl::ZeroDuration());
    v1::RenewResponse resp;
    grpc::ClientContext ctx;
    expect_invalid(stub_->Renew(&ctx, req, &resp), "lease_ttl");
    grpc::ClientContext ctx2;
    req.clear_lease_ttl();
    req.set_owner("");
    expect_invalid(stub_->Renew(&ctx2, req, &resp), "owner");
  }
  {
    v1::DescribeRequest req;
    req.set_name("");
    v1::LockInfo info;
    grpc::ClientContext ctx;
    expect_invalid(stub_->Describe(&ctx, req, &info), "name");
  }
  {
    v1::ListRequest req;
    req.set_page_size(1001);
    v1::ListResponse resp;
    grpc::ClientContext ctx;
    expect_invalid(stub_->List(&ctx, req, &resp), "page_size");
    grpc::ClientContext ctx2;
    req.set_page_size(10);
    req.set_namespace_("no spaces");
    expect_invalid(stub_->List(&ctx2, req, &resp), "namespace");
  }
  v1::LockInfo info = Describe("held");
  EXPECT_EQ(info.owner(), "alice");
  EXPECT_EQ(info.hold_count(), 1u);
  EXPECT_EQ(info.fencing_token(), token);
  EXPECT_LE(FromProtoDuration(info.ttl_remaining()), absl::Seconds(10));
}

// One lockd, and three replicas over the same locks where the backend
// allows several.
std::vector<int> ReplicaCounts() {
  return Env().multi_replica() ? std::vector<int>{1, 3} : std::vector<int>{1};
}

INSTANTIATE_TEST_SUITE_P(Backends, ConformanceTest, ::testing::ValuesIn(ReplicaCounts()),
                         [](const auto& info) {
                           return absl::StrCat(Env().name(), info.param == 1 ? "" : "_3replicas");
                         });

}  // namespace
}  // namespace lockd::testing

int main(int argc, char** argv) {
  ::testing::InitGoogleTest(&argc, argv);
  ::testing::AddGlobalTestEnvironment(new lockd::testing::ServerEnvironment());
  return RUN_ALL_TESTS();
}
