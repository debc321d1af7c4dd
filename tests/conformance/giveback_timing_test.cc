// Conformance: the server gives back a grant whose reply the client did not
// get, whatever the mode and backend, at the timing issue 28 item 5 found:
// waiters spread over the replicas whose gRPC deadlines pass one after
// another, 10 ms apart, across the moment the holder's short lease ends, so
// that one of them is granted as its deadline passes. The waiters never undo
// anything themselves: only the server's give-back is tested.

#include <atomic>
#include <string>
#include <thread>
#include <vector>

#include "tests/conformance/conformance.h"

namespace lockd::testing {
namespace {

// o1 holds the lock with a 1 s lease; twelve waiters, round-robin over the
// replicas, wait up to 30 s for a 30 s lease, with gRPC deadlines of
// 0.95 s + 0.01 s * i after o1's grant. A waiter told acquired=true releases
// at once. 0.3 s after the last waiter returned the lock must be free, and
// stay free: a grant that raced its call's deadline and was not given back
// would hold it for 30 s for an owner who was told nothing. Four rounds, on
// four locks, started 300 ms apart (so that their lease ends do not
// coincide), run at the same time.
TEST_P(ConformanceTest, GrantToAWaiterWhoseDeadlinePassesAsTheLeaseEndsIsGivenBack) {
  constexpr int kRounds = 4;
  constexpr int kWaiters = 12;
  std::atomic<int> rounds_left_held{0};
  auto round = [&](int r) {
    const std::string name = absl::StrCat("giveback-", r);
    // Connected before o1's grant, so that the deadlines are timed from it.
    std::vector<std::unique_ptr<LockService::Stub>> stubs;
    for (int w = 0; w < kWaiters; ++w) stubs.push_back(NewStub(Server(w)->address()));
    v1::AcquireResponse held;
    ASSERT_THAT(Acquire({name, "o1", absl::Seconds(1)}, &held), StatusIs(grpc::StatusCode::OK));
    ASSERT_TRUE(held.acquired());
    const absl::Time granted = absl::Now();
    std::vector<grpc::Status> status(kWaiters);
    std::vector<v1::AcquireResponse> resp(kWaiters);
    std::vector<std::thread> waiters;
    for (int w = 0; w < kWaiters; ++w) {
      waiters.emplace_back([&, w] {
        const std::string owner = absl::StrCat("w", w);
        v1::AcquireRequest req;
        req.set_name(name);
        req.set_owner(owner);
        *req.mutable_lease_ttl() = ToProtoDuration(absl::Seconds(30));
        *req.mutable_wait_timeout() = ToProtoDuration(absl::Seconds(30));
        grpc::ClientContext ctx;
        ctx.set_deadline(absl::ToChronoTime(granted + absl::Milliseconds(950 + 10 * w)));
        status[w] = stubs[w]->Acquire(&ctx, req, &resp[w]);
        if (status[w].ok() && resp[w].acquired()) {
          v1::ReleaseResponse rel;
          grpc::Status s = Release(name, owner, &rel, "", "", stubs[w].get());
          EXPECT_TRUE(s.ok() && rel.released()) << owner << ": " << s.error_message();
        }
      });
    }
    for (auto& th : waiters) th.join();
    std::string outcomes;
    for (int w = 0; w < kWaiters; ++w) {
      absl::StrAppend(&outcomes, " w", w, ":",
                      status[w].ok() ? (resp[w].acquired() ? "granted" : "not-acquired")
                                     : std::to_string(status[w].error_code()));
    }
    absl::SleepFor(absl::Milliseconds(300));
    v1::LockInfo info = Describe(name);
    if (info.held()) {
      ++rounds_left_held;
      ADD_FAILURE() << name << " is held by " << info.owner() << " (token " << info.fencing_token()
                    << ", " << FromProtoDuration(info.ttl_remaining())
                    << " left) 0.3 s after every waiter returned; outcomes (gRPC codes):"
                    << outcomes;
      return;
    }
    // And it stays free: no grant still on its way takes it later.
    absl::SleepFor(absl::Milliseconds(700));
    info = Describe(name);
    EXPECT_FALSE(info.held()) << name << " is held by " << info.owner()
                              << " 1 s after every waiter returned; outcomes (gRPC codes):"
                              << outcomes;
  };
  std::vector<std::thread> rounds;
  for (int r = 0; r < kRounds; ++r) {
    if (r > 0) absl::SleepFor(absl::Milliseconds(300));
    rounds.emplace_back(round, r);
  }
  for (auto& th : rounds) th.join();
  EXPECT_EQ(rounds_left_held.load(), 0) << "of " << kRounds << " rounds left a hold behind";
}

}  // namespace
}  // namespace lockd::testing
