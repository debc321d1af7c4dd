// lockd processes sharing one ZooKeeper server. A hold acquired through a
// replica that is killed (SIGKILL) or stopped (SIGTERM) lasts until its lease
// ends, however soon the replica's ZooKeeper session ends; its holder renews
// it through another replica meanwhile.
// A waiter of a killed or cut-off replica that reaches the head of a queue
// never holds the lock (its grant is never confirmed), and a waiting Acquire whose
// own owner comes to hold the lock through another replica is granted at
// once.

#include <signal.h>

#include <iostream>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "grpcpp/create_channel.h"
#include "grpcpp/security/credentials.h"
#include "gtest/gtest.h"
#include "lockd/v1/lock.grpc.pb.h"
#include "tests/support/lockd_process.h"
#include "tests/support/lockd_rpc.h"
#include "tests/support/process.h"
#include "tests/support/status_matchers.h"
#include "tests/support/zookeeper_server.h"

namespace lockd::testing {
namespace {

using v1::LockService;

// A 60 s lease, waiting up to `wait`; the call's deadline is 30 s past it.
grpc::Status Acquire(LockService::Stub& stub, const std::string& name, const std::string& owner,
                     absl::Duration wait, v1::AcquireResponse* resp) {
  return AcquireRpc(stub, name, owner, absl::Seconds(60), wait, wait + absl::Seconds(30), resp);
}

std::vector<std::string> ReplicaFlags(const ZooKeeperServer& server, absl::string_view root) {
  return {
      "--backend=zookeeper",
      absl::StrCat("--zookeeper.hosts=", server.hosts()),
      absl::StrCat("--zookeeper.root=", root),
      // Longer than each test: nothing here is freed by a session's end.
      "--zookeeper.session_timeout=30s",
      "--zookeeper.reap_interval=200ms",
  };
}

// Waits until Describe of `name` through `stub` shows `waiters` waiters.
bool WaitForWaiters(LockService::Stub& stub, const std::string& name, uint32_t waiters) {
  return WaitFor(
      [&] {
        v1::LockInfo info;
        return DescribeRpc(stub, name, &info).ok() && info.waiters() == waiters;
      },
      absl::Seconds(20));
}

// Issue 28, item 6: owner A holds x through r1; O waits through r0, then B
// and O again through r1; r0 is killed; A releases. O's node from r0 reaches
// the head with no call behind it: it must not make the lock "held by O"
// (O's second call used to answer acquired=false with current.owner=O, and B
// to wait out its wait), nor last until r0's session expires.
TEST(ZooKeeperReplicasTest, WaiterOfAKilledReplicaNeverHoldsTheLock) {
  auto server = ZooKeeperServer::Start();
  ASSERT_TRUE(server.ok()) << server.status();
  std::vector<std::string> flags = ReplicaFlags(**server, "/orphans");
  TempDir dir;
  auto r0 = LockdProcess::Start(flags, dir.path());
  ASSERT_TRUE(r0.ok()) << r0.status();
  auto r1 = LockdProcess::Start(flags, dir.path());
  ASSERT_TRUE(r1.ok()) << r1.status();
  auto stub0 = LockService::NewStub((*r0)->NewChannel());
  auto stub1 = LockService::NewStub((*r1)->NewChannel());
  const std::string x = "x";

  v1::AcquireResponse a;
  ASSERT_TRUE(Acquire(*stub1, x, "A", absl::ZeroDuration(), &a).ok());
  ASSERT_TRUE(a.acquired());

  v1::AcquireResponse o1, b, o2;
  grpc::Status o1_status, b_status, o2_status;
  absl::Time b_done;
  std::thread o1_call([&] { o1_status = Acquire(*stub0, x, "O", absl::Seconds(20), &o1); });
  ASSERT_TRUE(WaitForWaiters(*stub1, x, 1));
  std::thread b_call([&] {
    auto stub = LockService::NewStub((*r1)->NewChannel());
    b_status = Acquire(*stub, x, "B", absl::Seconds(8), &b);
    b_done = absl::Now();
  });
  ASSERT_TRUE(WaitForWaiters(*stub1, x, 2));
  std::thread o2_call([&] {
    auto stub = LockService::NewStub((*r1)->NewChannel());
    o2_status = Acquire(*stub, x, "O", absl::Seconds(6), &o2);
  });
  ASSERT_TRUE(WaitForWaiters(*stub1, x, 3));

  (*r0)->process().Kill();  // SIGKILL: its session (and O's node) lives on
  o1_call.join();
  EXPECT_THAT(o1_status, StatusIs(grpc::StatusCode::UNAVAILABLE));
  absl::Time released = absl::Now();
  v1::ReleaseResponse rel;
  ASSERT_TRUE(ReleaseRpc(*stub1, x, "A", &rel).ok());
  ASSERT_TRUE(rel.released());

  b_call.join();
  o2_call.join();
  // B was next after the dead call: granted once the unconfirmed grant to
  // r0's node is reaped (observer_grace, 1 s, plus a reaper pass), not when
  // its own wait ends.
  ASSERT_TRUE(b_status.ok()) << b_status.error_message();
  EXPECT_TRUE(b.acquired());
  EXPECT_LT(b_done - released, absl::Seconds(4));
  // O's second call waited behind B: not acquired, and the lock is B's, never
  // O's.
  ASSERT_TRUE(o2_status.ok()) << o2_status.error_message();
  EXPECT_FALSE(o2.acquired());
  EXPECT_EQ(o2.current().owner(), "B");
  // No hold of O was left behind: O's try-once is refused, B holds once.
  v1::AcquireResponse o3;
  ASSERT_TRUE(Acquire(*stub1, x, "O", absl::ZeroDuration(), &o3).ok());
  EXPECT_FALSE(o3.acquired());
  EXPECT_EQ(o3.current().owner(), "B");
  EXPECT_EQ(o3.current().hold_count(), 1u);
  EXPECT_EQ((*r1)->process().Stop(), 0) << (*r1)->process().Log();
}

// A replica cut off from ZooKeeper (here: stopped with SIGSTOP; its session
// outlives the test) whose waiter reaches the head of the queue must not
// stall the lock until its session expires or that waiter's lease ends: the
// grant it cannot confirm is reaped and the next waiter gets the lock. When
// the replica runs again, its waiter queues anew and is granted in turn.
TEST(ZooKeeperReplicasTest, WaiterOfACutOffReplicaDoesNotStallTheLock) {
  auto server = ZooKeeperServer::Start();
  ASSERT_TRUE(server.ok()) << server.status();
  std::vector<std::string> flags = ReplicaFlags(**server, "/cutoff");
  TempDir dir;
  auto r0 = LockdProcess::Start(flags, dir.path());
  ASSERT_TRUE(r0.ok()) << r0.status();
  auto r1 = LockdProcess::Start(flags, dir.path());
  ASSERT_TRUE(r1.ok()) << r1.status();
  auto stub0 = LockService::NewStub((*r0)->NewChannel());
  auto stub1 = LockService::NewStub((*r1)->NewChannel());
  const std::string x = "x";

  v1::AcquireResponse a;
  ASSERT_TRUE(Acquire(*stub1, x, "A", absl::ZeroDuration(), &a).ok());
  ASSERT_TRUE(a.acquired());
  v1::AcquireResponse p, q;
  grpc::Status p_status, q_status;
  absl::Time q_done;
  std::thread p_call([&] { p_status = Acquire(*stub0, x, "P", absl::Seconds(20), &p); });
  ASSERT_TRUE(WaitForWaiters(*stub1, x, 1));
  std::thread q_call([&] {
    auto stub = LockService::NewStub((*r1)->NewChannel());
    q_status = Acquire(*stub, x, "Q", absl::Seconds(8), &q);
    q_done = absl::Now();
  });
  ASSERT_TRUE(WaitForWaiters(*stub1, x, 2));

  (*r0)->process().Signal(SIGSTOP);
  absl::Time released = absl::Now();
  v1::ReleaseResponse rel;
  ASSERT_TRUE(ReleaseRpc(*stub1, x, "A", &rel).ok());
  q_call.join();
  (*r0)->process().Signal(SIGCONT);
  ASSERT_TRUE(q_status.ok()) << q_status.error_message();
  ASSERT_TRUE(q.acquired()) << "current owner " << q.current().owner();
  EXPECT_LT(q_done - released, absl::Seconds(4));

  // P, on the replica that runs again, is granted after Q.
  ASSERT_TRUE(ReleaseRpc(*stub1, x, "Q", &rel).ok());
  EXPECT_TRUE(rel.released());
  p_call.join();
  ASSERT_TRUE(p_status.ok()) << p_status.error_message();
  EXPECT_TRUE(p.acquired());
  EXPECT_GT(p.fencing_token(), q.fencing_token());
  EXPECT_EQ((*r0)->process().Stop(), 0) << (*r0)->process().Log();
  EXPECT_EQ((*r1)->process().Stop(), 0) << (*r1)->process().Log();
}

// docs/api.md "Waiting" (reentrant waiters), across replicas: A holds x; O waits through r0,
// then B and O again through r1. When A releases, O's first call is granted
// through r0, and O's second call (behind B) must be granted at once as a
// reentrant acquire, not wait behind B for O itself.
TEST(ZooKeeperReplicasTest, WaiterIsGrantedWhenItsOwnerComesToHoldTheLock) {
  auto server = ZooKeeperServer::Start();
  ASSERT_TRUE(server.ok()) << server.status();
  std::vector<std::string> flags = ReplicaFlags(**server, "/reentrant");
  TempDir dir;
  auto r0 = LockdProcess::Start(flags, dir.path());
  ASSERT_TRUE(r0.ok()) << r0.status();
  auto r1 = LockdProcess::Start(flags, dir.path());
  ASSERT_TRUE(r1.ok()) << r1.status();
  auto stub0 = LockService::NewStub((*r0)->NewChannel());
  auto stub1 = LockService::NewStub((*r1)->NewChannel());
  const std::string x = "x";

  v1::AcquireResponse a;
  ASSERT_TRUE(Acquire(*stub1, x, "A", absl::ZeroDuration(), &a).ok());
  ASSERT_TRUE(a.acquired());
  v1::AcquireResponse o1, b, o2;
  grpc::Status o1_status, b_status, o2_status;
  absl::Time o2_done;
  std::thread o1_call([&] { o1_status = Acquire(*stub0, x, "O", absl::Seconds(20), &o1); });
  ASSERT_TRUE(WaitForWaiters(*stub1, x, 1));
  std::thread b_call([&] {
    auto stub = LockService::NewStub((*r1)->NewChannel());
    b_status = Acquire(*stub, x, "B", absl::Seconds(20), &b);
  });
  ASSERT_TRUE(WaitForWaiters(*stub1, x, 2));
  std::thread o2_call([&] {
    auto stub = LockService::NewStub((*r1)->NewChannel());
    o2_status = Acquire(*stub, x, "O", absl::Seconds(6), &o2);
    o2_done = absl::Now();
  });
  ASSERT_TRUE(WaitForWaiters(*stub1, x, 3));

  absl::Time released = absl::Now();
  v1::ReleaseResponse rel;
  ASSERT_TRUE(ReleaseRpc(*stub1, x, "A", &rel).ok());
  o1_call.join();
  o2_call.join();
  ASSERT_TRUE(o1_status.ok()) << o1_status.error_message();
  ASSERT_TRUE(o1.acquired());
  ASSERT_TRUE(o2_status.ok()) << o2_status.error_message();
  ASSERT_TRUE(o2.acquired()) << "current owner " << o2.current().owner();
  EXPECT_EQ(o2.fencing_token(), o1.fencing_token());
  EXPECT_EQ(o2.hold_count(), 2u);
  EXPECT_LT(o2_done - released, absl::Seconds(3));

  // O releases both holds; B, still waiting, gets the lock.
  for (int i = 0; i < 2; ++i) {
    ASSERT_TRUE(ReleaseRpc(*stub1, x, "O", &rel).ok());
    EXPECT_EQ(rel.released(), i == 1);
  }
  b_call.join();
  ASSERT_TRUE(b_status.ok()) << b_status.error_message();
  EXPECT_TRUE(b.acquired());
  EXPECT_GT(b.fencing_token(), o1.fencing_token());
  EXPECT_EQ((*r0)->process().Stop(), 0) << (*r0)->process().Log();
  EXPECT_EQ((*r1)->process().Stop(), 0) << (*r1)->process().Log();
}

// Issue 28, item 6: a hold ends at its lease end, not when the ZooKeeper
// session of the replica it was acquired through ends. r0 is killed (its
// session expires after 2 s), r2 is stopped with SIGTERM (it closes its
// session at once); r1 survives. Through r0: x (held by H) and y (held by
// R, who renews it through r1 after r0's session expired); through r2: z
// (held by T). Each has a waiter on r1, granted only when the lease ends.
TEST(ZooKeeperReplicasTest, HoldsOfADeadReplicaEndWithTheirLeasesNotItsSession) {
  auto server = ZooKeeperServer::Start();
  ASSERT_TRUE(server.ok()) << server.status();
  constexpr absl::Duration kSessionTimeout = absl::Seconds(2);
  constexpr absl::Duration kLease = absl::Seconds(8);
  std::vector<std::string> flags = {
      "--backend=zookeeper",
      absl::StrCat("--zookeeper.hosts=", (*server)->hosts()),
      "--zookeeper.root=/replicas",
      absl::StrCat("--zookeeper.session_timeout=", absl::FormatDuration(kSessionTimeout)),
      "--zookeeper.reap_interval=200ms",
  };
  TempDir dir;
  auto r0 = LockdProcess::Start(flags, dir.path());
  ASSERT_TRUE(r0.ok()) << r0.status();
  auto r1 = LockdProcess::Start(flags, dir.path());
  ASSERT_TRUE(r1.ok()) << r1.status();
  auto r2 = LockdProcess::Start(flags, dir.path());
  ASSERT_TRUE(r2.ok()) << r2.status();
  auto stub0 = LockService::NewStub((*r0)->NewChannel());
  auto stub1 = LockService::NewStub((*r1)->NewChannel());
  auto stub2 = LockService::NewStub((*r2)->NewChannel());

  struct Hold {
    std::string name, owner;
    LockService::Stub* stub;
    absl::Time sent, acquired;  // around the Acquire (or, for y, the Renew)
    uint64_t token = 0;
    // Its waiter on r1.
    v1::AcquireResponse got;
    grpc::Status status;
    absl::Time granted_at;
  };
  std::vector<Hold> holds = {
      {"x", "H", stub0.get()}, {"y", "R", stub0.get()}, {"z", "T", stub2.get()}};
  for (Hold& h : holds) {
    v1::AcquireResponse resp;
    h.sent = absl::Now();
    ASSERT_TRUE(
        AcquireRpc(*h.stub, h.name, h.owner, kLease, absl::ZeroDuration(), absl::Seconds(10), &resp)
            .ok());
    h.acquired = absl::Now();
    ASSERT_TRUE(resp.acquired()) << h.name;
    h.token = resp.fencing_token();
  }
  std::vector<std::thread> waiters;
  // Joined on every way out (a failed assertion too), before `holds` goes.
  struct JoinAll {
    std::vector<std::thread>& threads;
    ~JoinAll() {
      for (std::thread& t : threads) {
        if (t.joinable()) t.join();
      }
    }
  } join_all{waiters};
  for (Hold& h : holds) {
    waiters.emplace_back([&stub1, &h] {
      h.status =
          Acquire(*stub1, h.name, absl::StrCat("waiter-", h.name), absl::Seconds(30), &h.got);
      h.granted_at = absl::Now();
    });
    ASSERT_TRUE(WaitForWaiters(*stub1, h.name, 1)) << h.name;
  }

  absl::Time killed = absl::Now();
  (*r0)->process().Kill();  // SIGKILL: no goodbye to ZooKeeper
  EXPECT_EQ((*r2)->process().Stop(), 0) << (*r2)->process().Log();  // SIGTERM
  // Well past the end of r0's session: every hold is still there.
  absl::SleepFor(killed + kSessionTimeout + absl::Seconds(3) - absl::Now());
  for (const Hold& h : holds) {
    v1::LockInfo info;
    EXPECT_TRUE(DescribeRpc(*stub1, h.name, &info).ok()) << h.name;
    EXPECT_TRUE(info.held()) << h.name;
    EXPECT_EQ(info.owner(), h.owner) << h.name;
    EXPECT_EQ(info.fencing_token(), h.token) << h.name;
  }
  // R renews y through r1 (checked by owner and token) and keeps it.
  Hold& y = holds[1];
  {
    v1::RenewRequest req;
    req.set_name(y.name);
    req.set_owner(y.owner);
    req.set_fencing_token(y.token);
    *req.mutable_lease_ttl() = ToProtoDuration(kLease);
    v1::RenewResponse resp;
    grpc::ClientContext ctx;
    ctx.set_deadline(absl::ToChronoTime(absl::Now() + absl::Seconds(10)));
    y.sent = absl::Now();
    grpc::Status s = stub1->Renew(&ctx, req, &resp);
    y.acquired = absl::Now();
    EXPECT_TRUE(s.ok()) << s.error_message();
  }

  for (auto& t : waiters) t.join();
  for (const Hold& h : holds) {
    ASSERT_TRUE(h.status.ok()) << h.name << ": " << h.status.error_message();
    EXPECT_TRUE(h.got.acquired()) << h.name;
    EXPECT_GT(h.got.fencing_token(), h.token) << h.name;
    // Not before the lease its holder was told about ends; soon after it
    // (the observer grace of 1 s plus a reaper pass).
    EXPECT_GE(h.granted_at - h.sent, kLease) << h.name;
    EXPECT_LE(h.granted_at - h.acquired, kLease + absl::Seconds(4)) << h.name;
    std::cout << h.name << " granted to the waiter on r1 "
              << absl::FormatDuration(h.granted_at - h.sent) << " after its lease began\n";
  }
  EXPECT_EQ((*r1)->process().Stop(), 0) << (*r1)->process().Log();
}

}  // namespace
}  // namespace lockd::testing
