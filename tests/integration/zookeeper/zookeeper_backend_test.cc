// The zookeeper backend in-process against a real ZooKeeper server: protocol
// properties the conformance suite cannot see (no herd, one node per
// contender even when a create reply is lost, nothing left behind) and
// server failures (restart, session expiry). The backend runs on the real
// client wrapped in ObservedTransport (below), which counts and disturbs
// what the tests need; lockd itself has no test hooks.

#include "backends/zookeeper/zookeeper_backend.h"

#include <zookeeper/zookeeper.h>

#include <algorithm>
#include <atomic>
#include <cstring>
#include <iostream>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "backends/backend.h"
#include "backends/zookeeper/zk_client.h"
#include "backends/zookeeper/zk_transport.h"
#include "backends/zookeeper/zookeeper_backend_internal.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/integration/zookeeper/observed_transport.h"
#include "tests/support/process.h"
#include "tests/support/shared_server.h"
#include "tests/support/status_matchers.h"
#include "tests/support/sync_backend.h"
#include "tests/support/zookeeper_server.h"

namespace lockd {
namespace {

using ::lockd::testing::Acq;
using ::lockd::testing::Await;
using ::lockd::testing::IsLockNotHeld;
using ::lockd::testing::PendingCall;
using ::lockd::testing::Rel;
using ::lockd::testing::StartAcquire;
using ::lockd::testing::StatusIs;
using ::lockd::testing::SyncAcquire;
using ::lockd::testing::SyncDescribe;
using ::lockd::testing::SyncList;
using ::lockd::testing::SyncRelease;
using ::lockd::testing::SyncRenew;
using ::lockd::testing::WaitFor;
using ::lockd::testing::ZooKeeperServer;
using ::testing::HasSubstr;
using ::testing::Not;

// AcquireParams for `name` with this file's 60 s lease.
AcquireParams Params(const std::string& name, const std::string& owner,
                     absl::Duration wait = absl::ZeroDuration(),
                     absl::Duration ttl = absl::Seconds(60)) {
  return Acq(name, owner, ttl, wait);
}

LockKey Key(const std::string& name) { return LockKey{"default", name}; }

RenewParams RenewFor(const std::string& name, const std::string& owner) {
  return RenewParams{Key(name), owner, absl::Seconds(60)};
}

ListParams AllLocks() {
  ListParams p;
  p.ns = "default";
  p.page_size = 100;
  return p;
}

// ---- Looking at ZooKeeper directly --------------------------------------

// A plain ZooKeeper session for checking what the backend left in the tree.
class Inspector {
 public:
  explicit Inspector(const std::string& hosts)
      : client_(
            {hosts, absl::Seconds(10), ""},
            [this](zk::SessionState s, uint64_t) {
              absl::MutexLock l(&mu_);
              connected_ = s == zk::SessionState::kConnected;
            },
            [](uint64_t, int, absl::string_view) {}) {
    EXPECT_TRUE(client_.Open().ok());
    absl::MutexLock l(&mu_);
    mu_.AwaitWithTimeout(absl::Condition(&connected_), absl::Seconds(30));
  }

  absl::StatusOr<std::vector<std::string>> Children(const std::string& path) {
    return Await<std::vector<std::string>>([&](Callback<std::vector<std::string>> cb) {
      client_.Submit(zk::Op::Children(path, [cb = std::move(cb)](zk::Result r) mutable {
        if (r.rc == ZNONODE) {
          std::move(cb)(std::vector<std::string>{});
        } else if (r.rc != ZOK) {
          std::move(cb)(zk::ZkError("listing", r.rc));
        } else {
          std::move(cb)(std::move(r.children));
        }
      }));
    });
  }

  // Every contender node under `root` (root/namespace/lock/contender).
  std::vector<std::string> Contenders(const std::string& root) {
    std::vector<std::string> out;
    auto namespaces = Children(root);
    EXPECT_TRUE(namespaces.ok()) << namespaces.status();
    if (!namespaces.ok()) return out;
    for (const std::string& ns : *namespaces) {
      auto locks = Children(absl::StrCat(root, "/", ns));
      EXPECT_TRUE(locks.ok()) << locks.status();
      if (!locks.ok()) continue;
      for (const std::string& lock : *locks) {
        std::string path = absl::StrCat(root, "/", ns, "/", lock);
        auto nodes = Children(path);
        EXPECT_TRUE(nodes.ok()) << nodes.status();
        if (!nodes.ok()) continue;
        for (const std::string& n : *nodes) out.push_back(absl::StrCat(path, "/", n));
      }
    }
    return out;
  }

 private:
  absl::Mutex mu_;
  bool connected_ ABSL_GUARDED_BY(mu_) = false;
  zk::Client client_;
};

// Watches the server holds, from the "wchs" four-letter word.
int64_t ServerWatches(const ZooKeeperServer& server) {
  absl::StatusOr<std::string> out = server.Command("wchs");
  if (!out.ok()) return -1;
  const std::string kLabel = "Total watches:";
  size_t at = out->find(kLabel);
  if (at == std::string::npos) return -1;
  size_t begin = at + kLabel.size();
  size_t end = out->find_first_not_of("0123456789", begin);
  int64_t n = -1;
  if (!absl::SimpleAtoi(out->substr(begin, end - begin), &n)) return -1;
  return n;
}

// Ends the backend's session from outside, as ZooKeeper's own tests do: a
// second handle on the same session id and password, closed. The backend's
// client reconnects at once and may take the session back before the close
// is sent (zookeeper_close only ends a session it is connected to), so this
// repeats until the backend is on a new session.
void ExpireSession(const std::string& hosts, Observed& observed) {
  clientid_t id{};
  {
    absl::MutexLock l(&observed.mu);
    ASSERT_NE(observed.session_id, 0);
    id.client_id = observed.session_id;
    ASSERT_EQ(observed.session_password.size(), sizeof(id.passwd));
    memcpy(id.passwd, observed.session_password.data(), sizeof(id.passwd));
  }
  auto moved_on = [&] {
    absl::MutexLock l(&observed.mu);
    return observed.session_id != id.client_id;
  };
  for (int attempt = 0; attempt < 20 && !moved_on(); ++attempt) {
    zhandle_t* zh = zookeeper_init(hosts.c_str(), nullptr, 10000, &id, nullptr, 0);
    ASSERT_NE(zh, nullptr);
    WaitFor([&] { return zoo_state(zh) == ZOO_CONNECTED_STATE; }, absl::Seconds(10),
            absl::Milliseconds(1));
    zookeeper_close(zh);
    WaitFor(moved_on, absl::Seconds(3));
  }
  ASSERT_TRUE(moved_on()) << "could not expire session " << id.client_id;
}

// ---- The tests -------------------------------------------------------------

class ZooKeeperBackendTest : public testing::SharedServerTest<ZooKeeperServer> {
 protected:
  static void SetUpTestSuite() {
    zoo_set_debug_level(ZOO_LOG_LEVEL_ERROR);
    ZooKeeperServer::Options o;
    // Empty lock nodes vanish quickly, so the tests also cover lockd
    // creating them again under load.
    o.container_check_interval = absl::Milliseconds(300);
    StartServer(o);
  }

  void SetUp() override {
    root_ = absl::StrCat("/it/", ::testing::UnitTest::GetInstance()->current_test_info()->name());
  }

  ZooKeeperOptions Options(const ZooKeeperServer& server) const {
    ZooKeeperOptions o;
    o.hosts = server.hosts();
    o.root = root_;
    o.session_timeout = absl::Seconds(4);
    o.reap_interval = absl::Milliseconds(200);
    return o;
  }

  std::unique_ptr<Backend> NewBackend(const ZooKeeperOptions& o) {
    observed_->root = o.root;
    auto b =
        NewZooKeeperBackendOn(o, [o, obs = observed_](zk::StateFn on_state, zk::WatchFn on_watch) {
          zk::Client::Options co;
          co.hosts = o.hosts;
          co.session_timeout = o.session_timeout;
          co.digest = o.digest;
          return std::make_unique<ObservedTransport>(std::move(co), obs, std::move(on_state),
                                                     std::move(on_watch));
        });
    EXPECT_TRUE(b.ok()) << b.status();
    return b.ok() ? *std::move(b) : nullptr;
  }

  std::string root_;
  std::shared_ptr<Observed> observed_ = std::make_shared<Observed>();
};

TEST_F(ZooKeeperBackendTest, EachReleaseWakesOnlyTheNextWaiters) {
  std::unique_ptr<Backend> b = NewBackend(Options(*server_));
  ASSERT_NE(b, nullptr);
  ASSERT_TRUE(SyncAcquire(*b, Params("herd", "holder")).value().acquired);
  constexpr int kWaiters = 200;
  std::vector<std::shared_ptr<PendingCall<AcquireResult>>> waiters;
  for (int i = 0; i < kWaiters; ++i) {
    waiters.push_back(StartAcquire(*b, Params("herd", absl::StrCat("w", i), absl::Seconds(120))));
  }
  ASSERT_TRUE(WaitFor(
      [&] {
        auto d = SyncDescribe(*b, Key("herd"));
        return d.ok() && d->waiters == kWaiters;
      },
      absl::Seconds(60)));
  // Every waiter has exactly one watch set (on its predecessor); the server
  // holds no other watch.
  ASSERT_TRUE(WaitFor([&] { return ServerWatches(*server_) == kWaiters; }, absl::Seconds(30)))
      << server_->Command("wchs").value_or("?");
  // A waiter marks its node waiting as it parks (a data change): that wakes
  // at most its successor, once, if its watch was set first.
  const uint64_t base = observed_->predecessor_watch_events.load();
  EXPECT_LE(base, static_cast<uint64_t>(kWaiters));

  std::string holder = "holder";
  for (int i = 0; i < kWaiters; ++i) {
    uint64_t before = observed_->predecessor_watch_events.load();
    auto rel = SyncRelease(*b, Rel("herd", holder));
    ASSERT_TRUE(rel.ok()) << rel.status();
    ASSERT_TRUE(rel->released);
    absl::StatusOr<AcquireResult> got = waiters[i]->Wait(absl::Seconds(30));
    ASSERT_TRUE(got.ok()) << i << ": " << got.status();
    ASSERT_TRUE(got->acquired) << i;
    // Only the next waiter was woken by this release, and the one after it
    // once more by the write that confirmed the grant (its predecessor's data
    // changed): at most two events, whatever the queue's length.
    EXPECT_LE(observed_->predecessor_watch_events.load() - before, 2u) << "release " << i;
    holder = absl::StrCat("w", i);
    // Everyone behind it is still parked.
    if (i + 1 < kWaiters) {
      EXPECT_FALSE(waiters[i + 1]->ready()) << i;
    }
  }
  ASSERT_TRUE(SyncRelease(*b, Rel("herd", holder)).value().released);
  absl::SleepFor(absl::Milliseconds(300));
  EXPECT_LE(observed_->predecessor_watch_events.load() - base,
            static_cast<uint64_t>(2 * kWaiters - 1))
      << "a release woke more than the next waiter, or a grant more than its successor";
  EXPECT_EQ(ServerWatches(*server_), 0);
}

TEST_F(ZooKeeperBackendTest, ThousandsOfWaitersShareListingsAndAreGrantedInFifoOrder) {
  std::unique_ptr<Backend> b = NewBackend(Options(*server_));
  ASSERT_NE(b, nullptr);
  auto first = SyncAcquire(*b, Params("crowd", "holder"));
  ASSERT_TRUE(first.ok() && first->acquired) << first.status();
  // Started back to back, as a burst of RPCs would be: each creates its node
  // and needs a listing of the queue while others' listings are in flight.
  constexpr int kWaiters = 2000;
  const uint64_t listings_before = observed_->contender_listings.load();
  std::vector<std::shared_ptr<PendingCall<AcquireResult>>> waiters;
  for (int i = 0; i < kWaiters; ++i) {
    waiters.push_back(StartAcquire(*b, Params("crowd", absl::StrCat("w", i), absl::Seconds(300))));
  }
  // Parked: one predecessor watch each (the server's count; no Describe, which
  // lists too).
  ASSERT_TRUE(WaitFor([&] { return ServerWatches(*server_) == kWaiters; }, absl::Seconds(120)))
      << server_->Command("wchs").value_or("?");
  const uint64_t listings = observed_->contender_listings.load() - listings_before;
  std::cout << kWaiters << " waiters parked with " << listings << " listings of the queue\n";
  // One listing per waiter would read 2,000 lists of up to 2,000 names.
  EXPECT_LT(listings, static_cast<uint64_t>(kWaiters / 4));
  auto d = SyncDescribe(*b, Key("crowd"));
  ASSERT_TRUE(d.ok()) << d.status();
  EXPECT_EQ(d->waiters, static_cast<uint32_t>(kWaiters));
  EXPECT_EQ(d->owner, "holder");

  // Served in the order they arrived, each exactly when its predecessor
  // releases, with growing fencing tokens.
  std::string holder = "holder";
  uint64_t token = first->fencing_token;
  for (int i = 0; i < kWaiters; ++i) {
    auto rel = SyncRelease(*b, Rel("crowd", holder));
    ASSERT_TRUE(rel.ok()) << rel.status();
    ASSERT_TRUE(rel->released) << i;
    absl::StatusOr<AcquireResult> got = waiters[i]->Wait(absl::Seconds(30));
    ASSERT_TRUE(got.ok()) << i << ": " << got.status();
    ASSERT_TRUE(got->acquired) << i;
    ASSERT_GT(got->fencing_token, token) << i;
    token = got->fencing_token;
    holder = absl::StrCat("w", i);
    if (i + 1 < kWaiters) {
      ASSERT_FALSE(waiters[i + 1]->ready()) << "granted out of order at " << i;
    }
  }
  ASSERT_TRUE(SyncRelease(*b, Rel("crowd", holder)).value().released);
  Inspector zk(server_->hosts());
  EXPECT_TRUE(zk.Contenders(root_).empty());
}

TEST_F(ZooKeeperBackendTest, WaitersTimingOutTogetherShareListingsAndLeaveNothingBehind) {
  std::unique_ptr<Backend> b = NewBackend(Options(*server_));
  ASSERT_NE(b, nullptr);
  ASSERT_TRUE(SyncAcquire(*b, Params("storm", "holder")).value().acquired);
  // Each waiter that gives up deletes its node and reads the lock's state,
  // and the deletion wakes its successor, which reads the queue again.
  constexpr int kWaiters = 1000;
  const uint64_t listings_before = observed_->contender_listings.load();
  std::vector<std::shared_ptr<PendingCall<AcquireResult>>> waiters;
  for (int i = 0; i < kWaiters; ++i) {
    waiters.push_back(StartAcquire(*b, Params("storm", absl::StrCat("w", i), absl::Seconds(2))));
  }
  for (int i = 0; i < kWaiters; ++i) {
    absl::StatusOr<AcquireResult> got = waiters[i]->Wait();
    ASSERT_TRUE(got.ok()) << i << ": " << got.status();
    EXPECT_FALSE(got->acquired) << i;
    EXPECT_TRUE(got->current.held) << i;
    EXPECT_EQ(got->current.owner, "holder") << i;
  }
  const uint64_t listings = observed_->contender_listings.load() - listings_before;
  std::cout << kWaiters << " waiters timed out with " << listings << " listings of the queue\n";
  // Unshared, that is two listings per waiter (its own and its successor's).
  EXPECT_LT(listings, static_cast<uint64_t>(kWaiters));
  auto d = SyncDescribe(*b, Key("storm"));
  ASSERT_TRUE(d.ok()) << d.status();
  EXPECT_EQ(d->owner, "holder");
  EXPECT_EQ(d->waiters, 0u);
  Inspector zk(server_->hosts());
  EXPECT_EQ(zk.Contenders(root_).size(), 1u);
  ASSERT_TRUE(SyncRelease(*b, Rel("storm", "holder")).value().released);
  EXPECT_TRUE(zk.Contenders(root_).empty());
  // The first waiter's watch on the holder was the last one left.
  EXPECT_TRUE(WaitFor([&] { return ServerWatches(*server_) == 0; }, absl::Seconds(10)))
      << server_->Command("wchs").value_or("?");
}

TEST_F(ZooKeeperBackendTest, LostCreateReplyLeavesExactlyOneContenderNode) {
  std::unique_ptr<Backend> b = NewBackend(Options(*server_));
  ASSERT_NE(b, nullptr);
  Inspector zk(server_->hosts());

  // A free lock: the create happened, its reply "was lost"; the backend
  // finds its node by attempt id and is granted the lock with it.
  observed_->drop_create_replies = 1;
  auto first = SyncAcquire(*b, Params("lost", "alice"));
  ASSERT_TRUE(first.ok()) << first.status();
  EXPECT_TRUE(first->acquired);
  EXPECT_EQ(observed_->drop_create_replies.load(), 0) << "the hook was not exercised";
  EXPECT_EQ(zk.Contenders(root_).size(), 1u);

  // A waiter whose create reply is lost queues with exactly one node.
  observed_->drop_create_replies = 1;
  auto bob = StartAcquire(*b, Params("lost", "bob", absl::Seconds(30)));
  ASSERT_TRUE(WaitFor([&] { return SyncDescribe(*b, Key("lost")).value().waiters == 1; },
                      absl::Seconds(20)));
  EXPECT_EQ(observed_->drop_create_replies.load(), 0);
  EXPECT_EQ(zk.Contenders(root_).size(), 2u);

  // A try-once Acquire whose create reply is lost gives its one node back.
  observed_->drop_create_replies = 1;
  auto carol = SyncAcquire(*b, Params("lost", "carol"));
  ASSERT_TRUE(carol.ok()) << carol.status();
  EXPECT_FALSE(carol->acquired);
  EXPECT_EQ(carol->current.owner, "alice");
  EXPECT_EQ(observed_->drop_create_replies.load(), 0);
  EXPECT_EQ(zk.Contenders(root_).size(), 2u);

  ASSERT_TRUE(SyncRelease(*b, Rel("lost", "alice")).value().released);
  auto got = bob->Wait();
  ASSERT_TRUE(got.ok()) << got.status();
  EXPECT_TRUE(got->acquired);
  EXPECT_GT(got->fencing_token, first->fencing_token);
  EXPECT_EQ(zk.Contenders(root_).size(), 1u);
  ASSERT_TRUE(SyncRelease(*b, Rel("lost", "bob")).value().released);
  EXPECT_TRUE(zk.Contenders(root_).empty());
}

TEST_F(ZooKeeperBackendTest, FiveThousandCyclesWithTimedOutWaitersLeaveNoContenderNodes) {
  std::unique_ptr<Backend> b = NewBackend(Options(*server_));
  ASSERT_NE(b, nullptr);
  constexpr int kThreads = 8;
  constexpr int kCyclesPerThread = 625;  // 5,000 in all
  constexpr int kLocks = 4;              // two threads per lock: real waiting too
  std::atomic<int> errors{0}, timed_out{0};
  std::vector<std::thread> threads;
  absl::Time start = absl::Now();
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      std::string lock = absl::StrCat("cycle-", t % kLocks);
      std::string owner = absl::StrCat("holder-", t);
      for (int c = 0; c < kCyclesPerThread && errors.load() < 10; ++c) {
        auto got = SyncAcquire(*b, Params(lock, owner, absl::Seconds(30)));
        if (!got.ok() || !got->acquired) {
          ++errors;
          ADD_FAILURE() << "acquire: " << (got.ok() ? "not acquired" : got.status().ToString());
          continue;
        }
        // A waiter that gives up almost at once (sometimes before its node
        // exists, sometimes after it is parked).
        auto late =
            SyncAcquire(*b, Params(lock, absl::StrCat("late-", t), absl::Milliseconds(c % 3)));
        if (!late.ok() || late->acquired) {
          ++errors;
          ADD_FAILURE() << "late waiter: " << (late.ok() ? "acquired" : late.status().ToString());
        } else {
          ++timed_out;
        }
        auto rel = SyncRelease(*b, Rel(lock, owner));
        if (!rel.ok() || !rel->released) {
          ++errors;
          ADD_FAILURE() << "release: " << (rel.ok() ? "not released" : rel.status().ToString());
        }
      }
    });
  }
  for (auto& th : threads) th.join();
  absl::Duration took = absl::Now() - start;
  EXPECT_EQ(errors.load(), 0);
  EXPECT_EQ(timed_out.load(), kThreads * kCyclesPerThread);
  Inspector zk(server_->hosts());
  std::vector<std::string> left;
  bool clean = WaitFor(
      [&] {
        left = zk.Contenders(root_);
        return left.empty();
      },
      absl::Seconds(10));
  EXPECT_TRUE(clean) << left.size() << " contender nodes left, e.g. " << left.front();
  for (int l = 0; l < kLocks; ++l) {
    auto d = SyncDescribe(*b, Key(absl::StrCat("cycle-", l)));
    ASSERT_TRUE(d.ok()) << d.status();
    EXPECT_FALSE(d->held);
    EXPECT_EQ(d->waiters, 0u);
  }
  std::cout << "5000 cycles, each with a timed-out waiter, took " << absl::FormatDuration(took)
            << "\n";
}

TEST_F(ZooKeeperBackendTest, LockNodeDeletedWhenEmptyIsCreatedAgainAndQueuesStayCorrect) {
  ZooKeeperOptions o = Options(*server_);
  o.reap_interval = absl::Hours(1);  // keep what this replica learnt about the old node
  std::unique_ptr<Backend> b = NewBackend(o);
  ASSERT_NE(b, nullptr);
  Inspector zk(server_->hosts());
  // Push the sequence numbers of the first lock node up.
  uint64_t last = 0;
  for (int i = 0; i < 20; ++i) {
    auto got = SyncAcquire(*b, Params("gc", "alice"));
    ASSERT_TRUE(got.ok() && got->acquired);
    last = got->fencing_token;
    ASSERT_TRUE(SyncRelease(*b, Rel("gc", "alice")).value().released);
  }
  // ZooKeeper deletes the empty lock node (and the empty namespace node).
  ASSERT_TRUE(WaitFor(
      [&] {
        auto locks = zk.Children(absl::StrCat(root_, "/default"));
        return locks.ok() && locks->empty();
      },
      absl::Seconds(20)));
  // The next Acquire creates them again; tokens keep growing.
  auto h = SyncAcquire(*b, Params("gc", "holder"));
  ASSERT_TRUE(h.ok() && h->acquired) << h.status();
  EXPECT_GT(h->fencing_token, last);
  // In the new node, sequences start at 0 again. A waiter whose predecessor
  // gives up must not take the lock from the holder.
  auto quitter = StartAcquire(*b, Params("gc", "quitter", absl::Milliseconds(500)));
  ASSERT_TRUE(
      WaitFor([&] { return SyncDescribe(*b, Key("gc")).value().waiters == 1; }, absl::Seconds(20)));
  auto patient = StartAcquire(*b, Params("gc", "patient", absl::Seconds(60)));
  auto gave_up = quitter->Wait();
  ASSERT_TRUE(gave_up.ok()) << gave_up.status();
  EXPECT_FALSE(gave_up->acquired);
  absl::SleepFor(absl::Milliseconds(200));
  EXPECT_FALSE(patient->ready()) << "granted while the holder still held the lock";
  auto d = SyncDescribe(*b, Key("gc"));
  ASSERT_TRUE(d.ok());
  EXPECT_EQ(d->owner, "holder");
  EXPECT_EQ(d->waiters, 1u);
  ASSERT_TRUE(SyncRelease(*b, Rel("gc", "holder")).value().released);
  auto got = patient->Wait();
  ASSERT_TRUE(got.ok() && got->acquired) << got.status();
  EXPECT_GT(got->fencing_token, h->fencing_token);
}

TEST_F(ZooKeeperBackendTest, ServerRestartMeansUnavailableThenRecoveryWithoutWrongAnswers) {
  auto own = ZooKeeperServer::Start();
  ASSERT_TRUE(own.ok()) << own.status();
  ZooKeeperServer& server = **own;
  ZooKeeperOptions o = Options(server);
  o.session_timeout = absl::Seconds(20);  // the session outlives the restart
  std::unique_ptr<Backend> b = NewBackend(o);
  ASSERT_NE(b, nullptr);
  auto kept = SyncAcquire(*b, Params("kept", "alice"));
  ASSERT_TRUE(kept.ok() && kept->acquired) << kept.status();

  // Contending clients keep going through the outage; every answer must be
  // right or UNAVAILABLE, and the lock must never have two holders.
  std::atomic<bool> stop{false}, inside{false};
  std::atomic<int> granted{0}, unavailable{0}, wrong{0}, granted_after{0};
  std::atomic<bool> restarted{false};
  std::vector<std::thread> load;
  for (int t = 0; t < 4; ++t) {
    load.emplace_back([&, t] {
      std::string owner = absl::StrCat("load-", t);
      while (!stop.load()) {
        auto got =
            SyncAcquire(*b, Params("busy", owner, absl::Milliseconds(300), absl::Seconds(30)));
        if (!got.ok()) {
          if (got.status().code() == absl::StatusCode::kUnavailable) {
            ++unavailable;
            absl::SleepFor(absl::Milliseconds(20));
          } else {
            ++wrong;
            ADD_FAILURE() << "acquire: " << got.status();
          }
          continue;
        }
        if (!got->acquired) continue;
        if (inside.exchange(true)) {
          ++wrong;
          ADD_FAILURE() << "two holders at once";
        }
        ++granted;
        if (restarted.load()) ++granted_after;
        absl::SleepFor(absl::Milliseconds(2));
        inside.store(false);
        auto rel = SyncRelease(*b, Rel("busy", owner));
        if (!rel.ok() && rel.status().code() != absl::StatusCode::kUnavailable &&
            !IsLockNotHeld(rel.status())) {
          ++wrong;
          ADD_FAILURE() << "release: " << rel.status();
        }
        if (!rel.ok() && rel.status().code() == absl::StatusCode::kUnavailable) {
          // The release may or may not have happened; the lease (30 s) or
          // the next successful release settles it. Retry until answered.
          while (!stop.load()) {
            rel = SyncRelease(*b, Rel("busy", owner));
            if (rel.ok() || IsLockNotHeld(rel.status())) break;
            absl::SleepFor(absl::Milliseconds(50));
          }
        }
      }
    });
  }
  absl::SleepFor(absl::Milliseconds(500));
  server.Stop();
  ASSERT_TRUE(WaitFor([&] { return !b->Health().ok(); }, absl::Seconds(15)));
  EXPECT_THAT(b->Health(), StatusIs(absl::StatusCode::kUnavailable));
  // While the server is down every call fails at once with UNAVAILABLE.
  absl::Time t0 = absl::Now();
  EXPECT_THAT(SyncAcquire(*b, Params("other", "bob")), StatusIs(absl::StatusCode::kUnavailable));
  EXPECT_THAT(SyncRelease(*b, Rel("kept", "alice")), StatusIs(absl::StatusCode::kUnavailable));
  EXPECT_THAT(SyncRenew(*b, RenewFor("kept", "alice")), StatusIs(absl::StatusCode::kUnavailable));
  EXPECT_THAT(SyncDescribe(*b, Key("kept")), StatusIs(absl::StatusCode::kUnavailable));
  EXPECT_THAT(SyncList(*b, AllLocks()), StatusIs(absl::StatusCode::kUnavailable));
  EXPECT_LT(absl::Now() - t0, absl::Seconds(1)) << "calls did not fail fast";
  absl::SleepFor(absl::Seconds(1));

  ASSERT_TRUE(server.Restart().ok());
  ASSERT_TRUE(WaitFor([&] { return b->Health().ok(); }, absl::Seconds(30))) << b->Health();
  restarted = true;
  // The session survived the restart, and with it alice's lock.
  auto d = SyncDescribe(*b, Key("kept"));
  ASSERT_TRUE(d.ok()) << d.status();
  EXPECT_TRUE(d->held);
  EXPECT_EQ(d->owner, "alice");
  EXPECT_EQ(d->fencing_token, kept->fencing_token);
  ASSERT_TRUE(WaitFor([&] { return granted_after.load() >= 5; }, absl::Seconds(30)))
      << "no recovery after the restart";
  stop = true;
  for (auto& th : load) th.join();
  EXPECT_EQ(wrong.load(), 0);
  EXPECT_GT(unavailable.load(), 0) << "the outage was not noticed";
  auto rel = SyncRelease(*b, Rel("kept", "alice"));
  ASSERT_TRUE(rel.ok()) << rel.status();
  EXPECT_TRUE(rel->released);
  auto again = SyncAcquire(*b, Params("kept", "bob"));
  ASSERT_TRUE(again.ok() && again->acquired);
  EXPECT_GT(again->fencing_token, kept->fencing_token) << "tokens must grow across the restart";
}

// Issue 28, item 6: a server that stops answering without closing the
// connection (SIGSTOP; a partition behaves alike) must turn the backend
// NOT_SERVING and its calls UNAVAILABLE within about 2 s, as Redis and MySQL
// replicas do, not after the client's own timeout (2/3 of the 10 s session
// timeout here) or each call's deadline; and serving again by itself once
// the server answers.
TEST_F(ZooKeeperBackendTest, SilentServerMeansUnavailableWithinTwoSecondsThenRecovery) {
  auto own = ZooKeeperServer::Start();
  ASSERT_TRUE(own.ok()) << own.status();
  ZooKeeperServer& server = **own;
  ZooKeeperOptions o = Options(server);
  o.session_timeout = absl::Seconds(10);
  std::unique_ptr<Backend> b = NewBackend(o);
  ASSERT_NE(b, nullptr);
  auto held = SyncAcquire(*b, Params("held", "alice"));
  ASSERT_TRUE(held.ok() && held->acquired) << held.status();

  server.Pause();
  absl::Time paused = absl::Now();
  bool unhealthy =
      WaitFor([&] { return !b->Health().ok(); }, absl::Seconds(5), absl::Milliseconds(20));
  absl::Duration noticed = absl::Now() - paused;
  EXPECT_TRUE(unhealthy) << "still SERVING 5 s into the silence";
  EXPECT_THAT(b->Health(), StatusIs(absl::StatusCode::kUnavailable));
  EXPECT_LE(noticed, absl::Seconds(3));
  std::cout << "NOT_SERVING " << absl::FormatDuration(noticed) << " after the pause\n";
  // Calls are answered at once, not left hanging.
  absl::Time asked = absl::Now();
  EXPECT_THAT(SyncDescribe(*b, Key("held")), StatusIs(absl::StatusCode::kUnavailable));
  EXPECT_THAT(SyncAcquire(*b, Params("other", "bob")), StatusIs(absl::StatusCode::kUnavailable));
  EXPECT_LE(absl::Now() - asked, absl::Seconds(1));

  server.Resume();
  ASSERT_TRUE(WaitFor([&] { return b->Health().ok(); }, absl::Seconds(30))) << b->Health();
  // Paused for less than the session timeout: the session and alice's lock
  // survived.
  auto state = SyncDescribe(*b, Key("held"));
  ASSERT_TRUE(state.ok()) << state.status();
  EXPECT_TRUE(state->held);
  EXPECT_EQ(state->owner, "alice");
  auto rel = SyncRelease(*b, Rel("held", "alice"));
  ASSERT_TRUE(rel.ok()) << rel.status();
  EXPECT_TRUE(rel->released);
}

// Issue 28, item 6: a hold ends with its lease, not with the session of the
// replica it was acquired through. The parked waiter gives up its place.
TEST_F(ZooKeeperBackendTest, SessionExpiryKeepsItsHoldsAndServesAgainWithoutRestart) {
  ZooKeeperOptions o = Options(*server_);
  o.session_timeout = absl::Seconds(2);
  std::unique_ptr<Backend> b = NewBackend(o);
  ASSERT_NE(b, nullptr);
  auto held = SyncAcquire(*b, Params("owned", "alice"));
  ASSERT_TRUE(held.ok() && held->acquired);
  auto waiter = StartAcquire(*b, Params("owned", "bob", absl::Seconds(60)));
  ASSERT_TRUE(WaitFor([&] { return SyncDescribe(*b, Key("owned")).value().waiters == 1; },
                      absl::Seconds(20)));
  int64_t old_session;
  {
    absl::MutexLock l(&observed_->mu);
    old_session = observed_->session_id;
  }

  ExpireSession(server_->hosts(), *observed_);

  // The parked waiter lost its watch with the session: it is told to retry.
  auto got = waiter->Wait(absl::Seconds(20));
  EXPECT_THAT(got, StatusIs(absl::StatusCode::kUnavailable));
  ASSERT_TRUE(WaitFor([&] { return b->Health().ok(); }, absl::Seconds(20))) << b->Health();
  {
    absl::MutexLock l(&observed_->mu);
    EXPECT_NE(observed_->session_id, old_session) << "no new session";
  }
  // alice's hold outlived the session (its lease runs for a minute); bob's
  // place in the queue is given up.
  ASSERT_TRUE(WaitFor([&] { return SyncDescribe(*b, Key("owned")).value().waiters == 0; },
                      absl::Seconds(20)));
  auto state = SyncDescribe(*b, Key("owned"));
  ASSERT_TRUE(state.ok()) << state.status();
  EXPECT_TRUE(state->held);
  EXPECT_EQ(state->owner, "alice");
  EXPECT_EQ(state->fencing_token, held->fencing_token);
  auto renewed = SyncRenew(*b, RenewFor("owned", "alice"));
  ASSERT_TRUE(renewed.ok()) << renewed.status();
  auto rel = SyncRelease(*b, Rel("owned", "alice"));
  ASSERT_TRUE(rel.ok()) << rel.status();
  EXPECT_TRUE(rel->released);
  auto again = SyncAcquire(*b, Params("owned", "carol"));
  ASSERT_TRUE(again.ok()) << again.status();
  EXPECT_TRUE(again->acquired);
  EXPECT_GT(again->fencing_token, held->fencing_token);
}

TEST_F(ZooKeeperBackendTest, DigestAuthKeepsOtherUsersOutAndNeverShowsThePassword) {
  ZooKeeperOptions o = Options(*server_);
  root_ = absl::StrCat(root_, "/shared-parent/lockd");
  o.root = root_;
  o.digest = "lockd:s3cret-pw";
  std::unique_ptr<Backend> b = NewBackend(o);
  ASSERT_NE(b, nullptr);
  auto got = SyncAcquire(*b, Params("guarded", "alice"));
  ASSERT_TRUE(got.ok() && got->acquired) << got.status();

  // The parents of the root stay open to everyone: another deployment can
  // live next to it.
  ZooKeeperOptions sibling = Options(*server_);
  sibling.root = absl::StrCat(root_, "-sibling");
  std::unique_ptr<Backend> other = NewBackend(sibling);
  ASSERT_NE(other, nullptr);
  EXPECT_TRUE(SyncAcquire(*other, Params("guarded", "bob")).value().acquired);

  for (const std::string& digest : {std::string(), std::string("mallory:other")}) {
    ZooKeeperOptions intruder = Options(*server_);
    intruder.digest = digest;
    intruder.connect_wait = absl::Seconds(20);
    auto other = NewZooKeeperBackend(intruder);
    ASSERT_FALSE(other.ok()) << "digest \"" << digest << "\" got in";
    EXPECT_THAT(other, StatusIs(absl::StatusCode::kUnauthenticated));
    EXPECT_THAT(other.status().message(), HasSubstr("zookeeper.auth_file"));
    EXPECT_THAT(other.status().message(), Not(HasSubstr("s3cret")));
    EXPECT_THAT(other.status().message(), Not(HasSubstr("other")));
  }
  EXPECT_TRUE(SyncRelease(*b, Rel("guarded", "alice")).value().released);
}

TEST_F(ZooKeeperBackendTest, UnusableOptionsAreRejectedNamingTheKey) {
  ZooKeeperOptions o = Options(*server_);
  o.root = "relative";
  EXPECT_THAT(NewZooKeeperBackend(o).status().message(), HasSubstr("zookeeper.root"));
  o.root = "/a//b";
  EXPECT_THAT(NewZooKeeperBackend(o).status().message(), HasSubstr("zookeeper.root"));
  o.root = "/lockd/";
  EXPECT_THAT(NewZooKeeperBackend(o).status().message(), HasSubstr("zookeeper.root"));
  o = Options(*server_);
  for (const char* hosts : {"", "localhost", "h:99999", "h:2181,:2181", "[::1:2181", "h:x"}) {
    o.hosts = hosts;
    absl::StatusOr<std::unique_ptr<Backend>> b = NewZooKeeperBackend(o);
    EXPECT_EQ(b.status().code(), absl::StatusCode::kInvalidArgument) << hosts;
    EXPECT_THAT(b.status().message(), HasSubstr("zookeeper.hosts")) << hosts;
  }
}

// A name that does not resolve (yet) is not a configuration error: the
// backend starts, answers UNAVAILABLE naming the hosts, and keeps trying.
TEST_F(ZooKeeperBackendTest, HostsThatDoNotResolveYetServeUnavailable) {
  ZooKeeperOptions o = Options(*server_);
  o.hosts = "lockd-test-zookeeper.invalid:2181";
  o.connect_wait = absl::Milliseconds(200);
  absl::StatusOr<std::unique_ptr<Backend>> b = NewZooKeeperBackend(o);
  ASSERT_TRUE(b.ok()) << b.status();
  EXPECT_EQ((*b)->Health().code(), absl::StatusCode::kUnavailable);
  EXPECT_THAT((*b)->Health().message(), HasSubstr("lockd-test-zookeeper.invalid:2181"));
  (*b)->Shutdown();
}

}  // namespace
}  // namespace lockd
