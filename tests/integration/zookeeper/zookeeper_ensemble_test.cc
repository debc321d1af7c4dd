// The zookeeper backend against a real three-server ZooKeeper ensemble
// (tests/support/zookeeper_server.h, ZooKeeperEnsemble), connected with the
// connect string of all three servers:
//   - the leader dies while locks are held and waited on: ZooKeeper drops
//     every client connection while it elects a new leader, and the
//     backend's session moves to a surviving server within its session
//     timeout, so holds, queues, watches and fencing order all survive;
//   - two of three servers die (quorum lost): every call fails at once with
//     UNAVAILABLE and readiness is NOT_SERVING; one server back, and the
//     backend serves again by itself.

#include <zookeeper/zookeeper.h>

#include <atomic>
#include <iostream>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "backends/backend.h"
#include "backends/zookeeper/zk_client.h"
#include "backends/zookeeper/zookeeper_backend.h"
#include "backends/zookeeper/zookeeper_backend_internal.h"
#include "gmock/gmock.h"
#include "grpcpp/client_context.h"
#include "gtest/gtest.h"
#include "lockd/v1/lock.grpc.pb.h"
#include "protos/proto_duration.h"
#include "tests/integration/zookeeper/observed_transport.h"
#include "tests/support/grpc_health.h"
#include "tests/support/lockd_process.h"
#include "tests/support/lockd_rpc.h"
#include "tests/support/process.h"
#include "tests/support/shared_server.h"
#include "tests/support/status_matchers.h"
#include "tests/support/sync_backend.h"
#include "tests/support/zookeeper_server.h"

namespace lockd {
namespace {

using ::lockd::testing::Acq;
using ::lockd::testing::AcquireRpc;
using ::lockd::testing::DescribeRpc;
using ::lockd::testing::HealthStatus;
using ::lockd::testing::IsLockNotHeld;
using ::lockd::testing::kHealthNotServing;
using ::lockd::testing::kHealthServing;
using ::lockd::testing::kLockService;
using ::lockd::testing::LockdProcess;
using ::lockd::testing::PendingCall;
using ::lockd::testing::Rel;
using ::lockd::testing::RenewRpc;
using ::lockd::testing::StartAcquire;
using ::lockd::testing::StatusIs;
using ::lockd::testing::SyncAcquire;
using ::lockd::testing::SyncDescribe;
using ::lockd::testing::SyncRelease;
using ::lockd::testing::SyncRenew;
using ::lockd::testing::TempDir;
using ::lockd::testing::WaitFor;
using ::lockd::testing::ZooKeeperEnsemble;

LockKey Key(const std::string& name) { return LockKey{"default", name}; }

RenewParams RenewFor(const std::string& name, const std::string& owner,
                     absl::Duration ttl = absl::Seconds(60)) {
  return RenewParams{Key(name), owner, ttl};
}

// An in-process backend (one lockd replica's worth) on the real client,
// observed (session id, connects).
struct Replica {
  std::shared_ptr<Observed> observed = std::make_shared<Observed>();
  std::unique_ptr<Backend> backend;

  int64_t session() const {
    absl::MutexLock l(&observed->mu);
    return observed->session_id;
  }
};

class ZooKeeperEnsembleTest : public testing::SharedServerTest<ZooKeeperEnsemble> {
 protected:
  static void SetUpTestSuite() {
    zoo_set_debug_level(ZOO_LOG_LEVEL_ERROR);
    StartServer(ZooKeeperEnsemble::Options());
  }

  void SetUp() override {
    ASSERT_NE(server_, nullptr);
    // Each test starts with all three members serving, whatever the one
    // before it left behind.
    for (int i = 0; i < ZooKeeperEnsemble::kSize; ++i) {
      if (server_->server(i).running()) continue;
      absl::Status restarted = server_->Restart(i);
      ASSERT_TRUE(restarted.ok()) << restarted;
    }
    absl::Status quorum = server_->WaitForQuorum(absl::Seconds(60));
    ASSERT_TRUE(quorum.ok()) << quorum;
    ASSERT_TRUE(WaitFor(
        [&] {
          for (int i = 0; i < ZooKeeperEnsemble::kSize; ++i) {
            if (server_->Mode(i).empty()) return false;
          }
          return true;
        },
        absl::Seconds(60)))
        << server_->Logs();
    root_ =
        absl::StrCat("/ensemble/", ::testing::UnitTest::GetInstance()->current_test_info()->name());
  }

  Replica NewReplica(absl::Duration session_timeout) {
    ZooKeeperOptions o;
    o.hosts = server_->hosts();
    o.root = root_;
    o.session_timeout = session_timeout;
    o.reap_interval = absl::Milliseconds(200);
    Replica r;
    r.observed->root = o.root;
    auto b =
        NewZooKeeperBackendOn(o, [o, obs = r.observed](zk::StateFn on_state, zk::WatchFn on_watch) {
          zk::Client::Options co;
          co.hosts = o.hosts;
          co.session_timeout = o.session_timeout;
          return std::make_unique<ObservedTransport>(std::move(co), obs, std::move(on_state),
                                                     std::move(on_watch));
        });
    EXPECT_TRUE(b.ok()) << b.status();
    if (b.ok()) r.backend = *std::move(b);
    return r;
  }

  std::string root_;
};

// Renews `owner`'s hold on `name` every 50 ms until stopped, counting the
// answers: during a leader change each must be OK or UNAVAILABLE, never
// LOCK_NOT_HELD.
class RenewLoop {
 public:
  RenewLoop(Backend& b, std::string name, std::string owner)
      : thread_([this, &b, name = std::move(name), owner = std::move(owner)] {
          while (!stop_.load()) {
            absl::StatusOr<RenewResult> r = SyncRenew(b, RenewFor(name, owner));
            if (r.ok()) {
              ++ok_;
            } else if (r.status().code() == absl::StatusCode::kUnavailable) {
              ++unavailable_;
            } else {
              absl::MutexLock l(&mu_);
              wrong_.push_back(r.status());
            }
            absl::SleepFor(absl::Milliseconds(50));
          }
        }) {}
  ~RenewLoop() { Stop(); }

  void Stop() {
    stop_ = true;
    if (thread_.joinable()) thread_.join();
  }
  int ok() const { return ok_.load(); }
  int unavailable() const { return unavailable_.load(); }
  std::vector<absl::Status> wrong() {
    absl::MutexLock l(&mu_);
    return wrong_;
  }

 private:
  std::atomic<bool> stop_{false};
  std::atomic<int> ok_{0}, unavailable_{0};
  absl::Mutex mu_;
  std::vector<absl::Status> wrong_ ABSL_GUARDED_BY(mu_);
  std::thread thread_;  // last: it uses the members above
};

// Clients contending for one lock through several replicas, each in a loop
// of acquire (short wait), a critical section, release, for as long as it
// runs. Checks what must hold through any failure: never two holders at
// once, every grant's fencing token larger than the one before, and every
// answer right or UNAVAILABLE (a Release retried after UNAVAILABLE may find
// the lock already released: LOCK_NOT_HELD).
class ContendedLock {
 public:
  ContendedLock(std::vector<Backend*> replicas, std::string name, int clients)
      : name_(std::move(name)) {
    for (int c = 0; c < clients; ++c) {
      threads_.emplace_back([this, b = replicas[c % replicas.size()], c] { Run(*b, c); });
    }
  }
  ~ContendedLock() { Stop(); }

  void Stop() {
    stop_ = true;
    for (auto& t : threads_) {
      if (t.joinable()) t.join();
    }
  }
  int grants() const { return grants_.load(); }
  int unavailable() const { return unavailable_.load(); }
  std::vector<std::string> errors() {
    absl::MutexLock l(&mu_);
    return errors_;
  }

 private:
  void Fail(std::string what) {
    absl::MutexLock l(&mu_);
    errors_.push_back(std::move(what));
  }

  void Run(Backend& b, int c) {
    const std::string owner = absl::StrCat("client-", c);
    while (!stop_.load()) {
      auto got = SyncAcquire(b, Acq(name_, owner, absl::Seconds(30), absl::Milliseconds(300)));
      if (!got.ok()) {
        if (got.status().code() != absl::StatusCode::kUnavailable) {
          Fail(absl::StrCat("acquire: ", got.status().ToString()));
        }
        ++unavailable_;
        absl::SleepFor(absl::Milliseconds(20));
        continue;
      }
      if (!got->acquired) continue;
      if (inside_.exchange(true)) Fail("two holders at once");
      uint64_t last = last_token_.exchange(got->fencing_token);
      if (got->fencing_token <= last) {
        Fail(absl::StrCat("token ", got->fencing_token, " after ", last));
      }
      ++grants_;
      absl::SleepFor(absl::Milliseconds(2));
      inside_ = false;
      // UNAVAILABLE: the release may or may not have happened; retry until
      // answered (the 30 s lease would settle it too).
      while (true) {
        auto rel = SyncRelease(b, Rel(name_, owner));
        if (rel.ok() || IsLockNotHeldStatus(rel.status())) break;
        if (rel.status().code() != absl::StatusCode::kUnavailable) {
          Fail(absl::StrCat("release: ", rel.status().ToString()));
          break;
        }
        ++unavailable_;
        absl::SleepFor(absl::Milliseconds(50));
      }
    }
  }

  static bool IsLockNotHeldStatus(const absl::Status& s) {
    return ::testing::Matches(IsLockNotHeld())(s);
  }

  const std::string name_;
  std::atomic<bool> stop_{false}, inside_{false};
  std::atomic<uint64_t> last_token_{0};
  std::atomic<int> grants_{0}, unavailable_{0};
  absl::Mutex mu_;
  std::vector<std::string> errors_ ABSL_GUARDED_BY(mu_);
  std::vector<std::thread> threads_;  // last: they use the members above
};

TEST_F(ZooKeeperEnsembleTest, LeaderKillKeepsHoldsQueuesAndFencingOrder) {
  // Long enough for an election and a reconnect on a loaded machine.
  constexpr absl::Duration kSessionTimeout = absl::Seconds(6);
  const int leader = server_->Leader();
  ASSERT_GE(leader, 0);
  // The holders' replica has its session on the leader, so that the session
  // must move to another server. The C client picks a random server of the
  // connect string: open replicas until one lands there.
  Replica holders;
  for (int attempt = 0; attempt < 30 && holders.backend == nullptr; ++attempt) {
    Replica r = NewReplica(kSessionTimeout);
    ASSERT_NE(r.backend, nullptr);
    if (server_->ServerOf(r.session()) == leader) holders = std::move(r);
  }
  ASSERT_NE(holders.backend, nullptr) << "no session landed on the leader in 30 tries";
  Replica waiters = NewReplica(kSessionTimeout);
  ASSERT_NE(waiters.backend, nullptr);

  // "queue": held, with three waiters queued across both replicas.
  auto held = SyncAcquire(*holders.backend, Acq("queue", "h", absl::Seconds(60)));
  ASSERT_TRUE(held.ok() && held->acquired) << held.status();
  auto other = SyncAcquire(*holders.backend, Acq("other", "o", absl::Seconds(60)));
  ASSERT_TRUE(other.ok() && other->acquired) << other.status();
  Backend* queued_on[] = {waiters.backend.get(), holders.backend.get(), waiters.backend.get()};
  std::vector<std::shared_ptr<PendingCall<AcquireResult>>> queued;
  for (int i = 0; i < 3; ++i) {
    queued.push_back(StartAcquire(
        *queued_on[i], Acq("queue", absl::StrCat("w", i), absl::Seconds(60), absl::Seconds(120))));
    ASSERT_TRUE(WaitFor(
        [&] {
          auto d = SyncDescribe(*holders.backend, Key("queue"));
          return d.ok() && d->waiters == static_cast<uint32_t>(i + 1);
        },
        absl::Seconds(20)))
        << "waiter " << i << " did not queue";
  }
  const int64_t holders_session = holders.session(), waiters_session = waiters.session();
  const int holders_connects = holders.observed->connects.load();
  const int waiters_connects = waiters.observed->connects.load();

  RenewLoop renewing(*holders.backend, "other", "o");
  ASSERT_TRUE(WaitFor([&] { return renewing.ok() > 0; }, absl::Seconds(10)));
  ContendedLock busy({holders.backend.get(), waiters.backend.get()}, "busy", 4);
  ASSERT_TRUE(WaitFor([&] { return busy.grants() >= 5; }, absl::Seconds(20)));
  absl::Time killed = absl::Now();
  server_->Kill(leader);  // SIGKILL: no goodbye to anyone
  absl::Status quorum = server_->WaitForQuorum(absl::Seconds(30));
  ASSERT_TRUE(quorum.ok()) << quorum;
  std::cout << "new leader elected " << absl::FormatDuration(absl::Now() - killed)
            << " after the kill\n";

  // Both sessions reconnected (every client of the ensemble is dropped while
  // it elects a leader) to a surviving server, and neither expired.
  ASSERT_TRUE(WaitFor(
      [&] {
        return holders.observed->connects.load() > holders_connects &&
               waiters.observed->connects.load() > waiters_connects &&
               holders.backend->Health().ok() && waiters.backend->Health().ok();
      },
      kSessionTimeout + absl::Seconds(10)))
      << holders.backend->Health() << " / " << waiters.backend->Health();
  std::cout << "both replicas serving again " << absl::FormatDuration(absl::Now() - killed)
            << " after the kill\n";
  EXPECT_EQ(holders.session(), holders_session) << "the holders' session did not survive";
  EXPECT_EQ(waiters.session(), waiters_session) << "the waiters' session did not survive";
  int now_on = -1;
  ASSERT_TRUE(WaitFor(
      [&] {
        now_on = server_->ServerOf(holders_session);
        return now_on >= 0;
      },
      absl::Seconds(10)));
  EXPECT_NE(now_on, leader);

  // Renewals went on: only OK or UNAVAILABLE, and OK again after the move.
  const int renewed_before = renewing.ok();
  ASSERT_TRUE(WaitFor([&] { return renewing.ok() > renewed_before; }, absl::Seconds(10)));
  renewing.Stop();
  EXPECT_THAT(renewing.wrong(), ::testing::IsEmpty());
  // The contending clients went on through the election, and after it.
  const int granted_before = busy.grants();
  ASSERT_TRUE(WaitFor([&] { return busy.grants() >= granted_before + 5; }, absl::Seconds(20)));
  busy.Stop();
  EXPECT_THAT(busy.errors(), ::testing::IsEmpty());
  std::cout << "contended lock: " << busy.grants() << " grants, " << busy.unavailable()
            << " UNAVAILABLE\n";
  std::cout << "renewals: " << renewing.ok() << " OK, " << renewing.unavailable()
            << " UNAVAILABLE\n";

  // The hold and its queue are intact: same holder, same token, all three
  // waiters still parked.
  auto d = SyncDescribe(*waiters.backend, Key("queue"));
  ASSERT_TRUE(d.ok()) << d.status();
  EXPECT_EQ(d->owner, "h");
  EXPECT_EQ(d->fencing_token, held->fencing_token);
  EXPECT_EQ(d->waiters, 3u);
  for (const auto& q : queued) EXPECT_FALSE(q->ready());
  auto renewed = SyncRenew(*waiters.backend, RenewFor("queue", "h"));
  ASSERT_TRUE(renewed.ok()) << renewed.status();

  // Releases hand the lock down the queue in FIFO order, across replicas,
  // each grant with a larger token.
  std::string holder = "h";
  uint64_t token = held->fencing_token;
  for (int i = 0; i < 3; ++i) {
    Backend& via = i % 2 == 0 ? *holders.backend : *waiters.backend;
    auto rel = SyncRelease(via, Rel("queue", holder));
    ASSERT_TRUE(rel.ok() && rel->released) << holder << ": " << rel.status();
    absl::StatusOr<AcquireResult> got = queued[i]->Wait(absl::Seconds(30));
    ASSERT_TRUE(got.ok() && got->acquired) << "w" << i << ": " << got.status();
    EXPECT_GT(got->fencing_token, token) << "w" << i;
    for (int j = i + 1; j < 3; ++j) EXPECT_FALSE(queued[j]->ready()) << "w" << j << " jumped";
    holder = absl::StrCat("w", i);
    token = got->fencing_token;
  }
  ASSERT_TRUE(SyncRelease(*waiters.backend, Rel("queue", holder)).value().released);
  ASSERT_TRUE(SyncRelease(*waiters.backend, Rel("other", "o")).value().released);
  auto next = SyncAcquire(*waiters.backend, Acq("other", "p"));
  ASSERT_TRUE(next.ok() && next->acquired) << next.status();
  EXPECT_GT(next->fencing_token, token);
}

// Quorum lost: ZooKeeper serves nothing (the surviving server drops its
// clients and refuses new ones), so lockd answers every call at once with
// UNAVAILABLE and its readiness is NOT_SERVING (its liveness stays SERVING).
// One server back, a new leader, and it serves again by itself.
//
// What happens to holds: ZooKeeper's leader times sessions, and a new
// leader starts every session's timeout afresh when it takes office, so a
// quorum loss, however long, expires no session whose client reconnects
// within its timeout after the quorum is back. A hold whose lease is still
// running therefore survives the outage with its token; one whose lease ran
// out during the outage is gone (LOCK_NOT_HELD) and its lock is freed.
TEST_F(ZooKeeperEnsembleTest, QuorumLossMeansUnavailableThenRecoveryByItself) {
  constexpr absl::Duration kSessionTimeout = absl::Seconds(3);
  constexpr absl::Duration kShortLease = absl::Seconds(2);
  TempDir dir;
  auto lockd = LockdProcess::Start(
      {
          "--backend=zookeeper",
          absl::StrCat("--zookeeper.hosts=", server_->hosts()),
          absl::StrCat("--zookeeper.root=", root_),
          absl::StrCat("--zookeeper.session_timeout=", absl::FormatDuration(kSessionTimeout)),
          "--zookeeper.reap_interval=200ms",
          "--lease.min=100ms",
      },
      dir.path());
  ASSERT_TRUE(lockd.ok()) << lockd.status();
  auto stub = v1::LockService::NewStub((*lockd)->NewChannel());
  Replica inproc = NewReplica(kSessionTimeout);
  ASSERT_NE(inproc.backend, nullptr);
  ASSERT_EQ(HealthStatus((*lockd)->address(), kLockService), kHealthServing);

  v1::AcquireResponse kept, lapsing;
  ASSERT_TRUE(AcquireRpc(*stub, "kept", "alice", absl::Seconds(120), absl::ZeroDuration(),
                         absl::Seconds(10), &kept)
                  .ok());
  ASSERT_TRUE(kept.acquired());
  auto inproc_kept = SyncAcquire(*inproc.backend, Acq("inproc", "carol", absl::Seconds(120)));
  ASSERT_TRUE(inproc_kept.ok() && inproc_kept->acquired) << inproc_kept.status();
  ASSERT_TRUE(AcquireRpc(*stub, "lapsing", "bob", kShortLease, absl::ZeroDuration(),
                         absl::Seconds(10), &lapsing)
                  .ok());
  ASSERT_TRUE(lapsing.acquired());
  const int64_t inproc_session = inproc.session();
  // Two waiters queue behind alice: sam's wait ends during the outage, lena's
  // outlasts it.
  struct Waiter {
    std::string owner;
    absl::Duration wait;
    absl::Time started, answered;
    grpc::Status status;
    v1::AcquireResponse resp;
    std::thread thread;
    ~Waiter() {  // an early ASSERT return: the call ends by its deadline
      if (thread.joinable()) thread.join();
    }
  };
  Waiter waiters[] = {{"sam", absl::Seconds(2)}, {"lena", absl::Seconds(60)}};
  for (uint32_t i = 0; i < 2; ++i) {
    Waiter& w = waiters[i];
    w.started = absl::Now();
    w.thread = std::thread([&w, ch = (*lockd)->NewChannel()] {
      auto s = v1::LockService::NewStub(ch);
      w.status = AcquireRpc(*s, "kept", w.owner, absl::Seconds(60), w.wait,
                            w.wait + absl::Seconds(30), &w.resp);
      w.answered = absl::Now();
    });
    ASSERT_TRUE(WaitFor(
        [&] {
          v1::LockInfo queue;
          return DescribeRpc(*stub, "kept", &queue).ok() && queue.waiters() == i + 1;
        },
        absl::Seconds(20)));
  }

  // Kill the leader and one follower.
  const int leader = server_->Leader();
  ASSERT_GE(leader, 0);
  const int follower = (leader + 1) % ZooKeeperEnsemble::kSize;
  const int survivor = (leader + 2) % ZooKeeperEnsemble::kSize;
  const absl::Time killed = absl::Now();
  server_->Kill(leader);
  server_->Kill(follower);

  ASSERT_TRUE(WaitFor([&] { return !inproc.backend->Health().ok(); }, absl::Seconds(15)));
  EXPECT_THAT(inproc.backend->Health(), StatusIs(absl::StatusCode::kUnavailable));
  ASSERT_TRUE(
      WaitFor([&] { return HealthStatus((*lockd)->address(), kLockService) == kHealthNotServing; },
              absl::Seconds(15)));
  std::cout << "NOT_SERVING " << absl::FormatDuration(absl::Now() - killed) << " after the kill\n";
  EXPECT_TRUE(WaitFor([&] { return server_->Mode(survivor).empty(); }, absl::Seconds(10)))
      << "the survivor still serves without a quorum: " << server_->Mode(survivor);

  // Calls fail fast with UNAVAILABLE, well within their deadlines, also an
  // Acquire that would wait.
  absl::Time t0 = absl::Now();
  v1::AcquireResponse resp;
  EXPECT_THAT(AcquireRpc(*stub, "new", "dave", absl::Seconds(30), absl::Seconds(20),
                         absl::Seconds(10), &resp),
              StatusIs(grpc::StatusCode::UNAVAILABLE));
  EXPECT_THAT(RenewRpc(*stub, "kept", "alice", absl::Seconds(120)),
              StatusIs(grpc::StatusCode::UNAVAILABLE));
  v1::LockInfo info;
  EXPECT_THAT(DescribeRpc(*stub, "kept", &info), StatusIs(grpc::StatusCode::UNAVAILABLE));
  EXPECT_THAT(
      SyncAcquire(*inproc.backend, Acq("new", "erin", absl::Seconds(30), absl::Seconds(20))),
      StatusIs(absl::StatusCode::kUnavailable));
  EXPECT_THAT(SyncRenew(*inproc.backend, RenewFor("inproc", "carol", absl::Seconds(120))),
              StatusIs(absl::StatusCode::kUnavailable));
  EXPECT_LT(absl::Now() - t0, absl::Seconds(3)) << "calls did not fail fast";

  // The outage outlasts the session timeout, bob's lease and sam's wait, and
  // readiness stays NOT_SERVING throughout, liveness SERVING.
  while (absl::Now() < killed + kSessionTimeout + absl::Seconds(1)) {
    ASSERT_EQ(HealthStatus((*lockd)->address(), kLockService), kHealthNotServing);
    ASSERT_EQ(HealthStatus((*lockd)->address()), kHealthServing);
    ASSERT_FALSE(inproc.backend->Health().ok());
    absl::SleepFor(absl::Milliseconds(200));
  }
  // sam was answered when his wait ended, outage or not: not acquired (or
  // UNAVAILABLE, which the API allows while the backend is unreachable).
  waiters[0].thread.join();
  std::cout << "sam answered after "
            << absl::FormatDuration(waiters[0].answered - waiters[0].started) << ": "
            << (waiters[0].status.ok() ? "OK, acquired=" : waiters[0].status.error_message())
            << (waiters[0].status.ok() ? (waiters[0].resp.acquired() ? "true" : "false") : "")
            << "\n";
  EXPECT_LT(waiters[0].answered - waiters[0].started, waiters[0].wait + absl::Seconds(2));
  if (waiters[0].status.ok()) {
    EXPECT_FALSE(waiters[0].resp.acquired());
  } else {
    EXPECT_THAT(waiters[0].status, StatusIs(grpc::StatusCode::UNAVAILABLE));
  }

  // One server back: a quorum of two, and everything recovers by itself.
  absl::Status restarted = server_->Restart(leader);
  ASSERT_TRUE(restarted.ok()) << restarted;
  absl::Status quorum = server_->WaitForQuorum(absl::Seconds(60));
  ASSERT_TRUE(quorum.ok()) << quorum;
  absl::Time back = absl::Now();
  ASSERT_TRUE(
      WaitFor([&] { return HealthStatus((*lockd)->address(), kLockService) == kHealthServing; },
              absl::Seconds(30)));
  ASSERT_TRUE(WaitFor([&] { return inproc.backend->Health().ok(); }, absl::Seconds(30)))
      << inproc.backend->Health();
  std::cout << "SERVING " << absl::FormatDuration(absl::Now() - back)
            << " after the quorum was back (outage " << absl::FormatDuration(back - killed)
            << ")\n";

  // Sessions survived: holds whose lease still runs are kept, same token.
  EXPECT_EQ(inproc.session(), inproc_session) << "the session expired";
  EXPECT_TRUE(RenewRpc(*stub, "kept", "alice", absl::Seconds(120)).ok());
  ASSERT_TRUE(DescribeRpc(*stub, "kept", &info).ok());
  EXPECT_EQ(info.owner(), "alice");
  EXPECT_EQ(info.fencing_token(), kept.fencing_token());
  auto renewed = SyncRenew(*inproc.backend, RenewFor("inproc", "carol", absl::Seconds(120)));
  EXPECT_TRUE(renewed.ok()) << renewed.status();
  // lena is still queued, and alice's release hands her the lock: sam's node
  // (left behind while disconnected) does not block the queue.
  ASSERT_TRUE(DescribeRpc(*stub, "kept", &info).ok());
  EXPECT_EQ(info.waiters(), 1u);
  {
    v1::ReleaseRequest req;
    req.set_name("kept");
    req.set_owner("alice");
    v1::ReleaseResponse rel;
    grpc::ClientContext ctx;
    ctx.set_deadline(absl::ToChronoTime(absl::Now() + absl::Seconds(5)));
    ASSERT_TRUE(stub->Release(&ctx, req, &rel).ok());
    EXPECT_TRUE(rel.released());
  }
  waiters[1].thread.join();
  ASSERT_TRUE(waiters[1].status.ok()) << waiters[1].status.error_message();
  EXPECT_TRUE(waiters[1].resp.acquired());
  EXPECT_GT(waiters[1].resp.fencing_token(), kept.fencing_token());
  // bob's lease ran out during the outage: his hold is gone and the lock is
  // freed (reaped) for the next owner, with a larger token.
  EXPECT_THAT(RenewRpc(*stub, "lapsing", "bob", absl::Seconds(10)), IsLockNotHeld());
  ASSERT_TRUE(AcquireRpc(*stub, "lapsing", "frank", absl::Seconds(30), absl::Seconds(10),
                         absl::Seconds(20), &resp)
                  .ok());
  EXPECT_TRUE(resp.acquired());
  EXPECT_GT(resp.fencing_token(), lapsing.fencing_token());
  // New locks work on both.
  ASSERT_TRUE(AcquireRpc(*stub, "new", "dave", absl::Seconds(30), absl::ZeroDuration(),
                         absl::Seconds(10), &resp)
                  .ok());
  EXPECT_TRUE(resp.acquired());
  auto fresh = SyncAcquire(*inproc.backend, Acq("fresh", "erin"));
  ASSERT_TRUE(fresh.ok() && fresh->acquired) << fresh.status();
  EXPECT_GT(fresh->fencing_token, kept.fencing_token());
  EXPECT_EQ((*lockd)->process().Stop(), 0) << (*lockd)->process().Log();
}

}  // namespace
}  // namespace lockd
