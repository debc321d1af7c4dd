// The ZooKeeper backend's small parts on their own, over a session of the
// in-memory FakeZooKeeper.

#include <atomic>
#include <memory>
#include <string>

#include "absl/cleanup/cleanup.h"
#include "absl/synchronization/notification.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "backends/common/errors.h"
#include "backends/common/timer_queue.h"
#include "backends/zookeeper/contender_listing.h"
#include "backends/zookeeper/fake_zookeeper.h"
#include "backends/zookeeper/holder_writes.h"
#include "backends/zookeeper/lease_tracker.h"
#include "backends/zookeeper/node_deleter.h"
#include "backends/zookeeper/renew_batch.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace lockd::zk {
namespace {

class PartsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    zk_ =
        fake_.NewTransport([](SessionState, uint64_t) {}, [](uint64_t, int, absl::string_view) {});
    ASSERT_TRUE(zk_->Open().ok());
    for (int i = 0; i < 500 && !zk_->connected(); ++i) absl::SleepFor(absl::Milliseconds(1));
    ASSERT_TRUE(zk_->connected());
    absl::Notification created;
    zk_->Submit(Op::Create("/lock", "", ZOO_PERSISTENT, [&](Result r) {
      EXPECT_EQ(r.rc, ZOK);
      created.Notify();
    }));
    created.WaitForNotification();
  }

  // Declared after a part, closes the transport before the part goes out of
  // scope, so every operation the part submitted has answered (ZCLOSING if it
  // was still queued) and none calls back into a destroyed part.
  auto CloseTransportAtEnd() {
    return absl::Cleanup([this] { zk_->Close(); });
  }

  FakeZooKeeper fake_;
  std::unique_ptr<Transport> zk_;
};

TEST_F(PartsTest, ListingsRequestedWhileOneIsInFlightShareTheNext) {
  ContenderListing listing(zk_.get());
  const auto answered_first = CloseTransportAtEnd();
  const uint64_t before = fake_.listings();
  constexpr int kCalls = 100;
  std::atomic<int> answered{0};
  absl::Notification all;
  fake_.Pause();
  for (int i = 0; i < kCalls; ++i) {
    listing.List("/lock", [&](ListingPtr l) {
      EXPECT_EQ(l->rc, ZOK);
      if (++answered == kCalls) all.Notify();
    });
  }
  fake_.Resume();
  ASSERT_TRUE(all.WaitForNotificationWithTimeout(absl::Seconds(10)));
  // The first, then one shared by the 99 that arrived while it was queued.
  EXPECT_EQ(fake_.listings() - before, 2u);
}

TEST_F(PartsTest, ListingOfAMissingLockNodeSaysNoNode) {
  ContenderListing listing(zk_.get());
  const auto answered_first = CloseTransportAtEnd();
  absl::Notification done;
  listing.List("/missing", [&](ListingPtr l) {
    EXPECT_EQ(l->rc, ZNONODE);
    done.Notify();
  });
  ASSERT_TRUE(done.WaitForNotificationWithTimeout(absl::Seconds(10)));
}

TEST_F(PartsTest, WaiterOnADeleteInFlightHearsItsReply) {
  NodeDeleter deleter(zk_.get());
  const auto answered_first = CloseTransportAtEnd();
  absl::Notification created;
  zk_->Submit(Op::Create("/lock/c-", "", ZOO_EPHEMERAL_SEQUENTIAL, [&](Result r) {
    EXPECT_EQ(r.rc, ZOK);
    created.Notify();
  }));
  created.WaitForNotification();
  const std::string node = "/lock/c-0000000000";
  EXPECT_FALSE(deleter.AwaitIfDeleting(node, [](int) { ADD_FAILURE() << "not being deleted"; }));
  fake_.Pause();
  zk_->Submit(deleter.Delete(node));
  std::atomic<int> rc{-1};
  absl::Notification heard;
  EXPECT_TRUE(deleter.AwaitIfDeleting(node, [&](int r) {
    rc = r;
    heard.Notify();
  }));
  fake_.Resume();
  ASSERT_TRUE(heard.WaitForNotificationWithTimeout(absl::Seconds(10)));
  EXPECT_EQ(rc.load(), ZOK);
  EXPECT_FALSE(fake_.Exists(node));
  EXPECT_FALSE(deleter.AwaitIfDeleting(node, [](int) {}));
}

TEST_F(PartsTest, OrphanedPrefixIsDeletedAfterReconnect) {
  NodeDeleter deleter(zk_.get());
  const auto answered_first = CloseTransportAtEnd();
  absl::Notification created;
  zk_->Submit(Op::Create("/lock/c-abc-", "", ZOO_EPHEMERAL_SEQUENTIAL, [&](Result) {}));
  zk_->Submit(Op::Create("/lock/c-other-", "", ZOO_EPHEMERAL_SEQUENTIAL,
                         [&](Result) { created.Notify(); }));
  created.WaitForNotification();
  deleter.AddOrphan("/lock", "c-abc-", "");
  deleter.DeleteOrphans();
  for (int i = 0; i < 500 && fake_.Children("/lock").size() != 1; ++i) {
    absl::SleepFor(absl::Milliseconds(1));
  }
  ASSERT_EQ(fake_.Children("/lock").size(), 1u);
  EXPECT_EQ(fake_.Children("/lock")[0], "c-other-0000000001");
}

// The renewal parts over one session, with a lease tracker whose timers are
// never armed for the holders a test plants (a lease timer that is late, as
// under overload) and whose periodic reaper never starts.
class RenewPartsTest : public PartsTest {
 protected:
  void SetUp() override {
    PartsTest::SetUp();
    timers_ = std::make_unique<TimerQueue>();
    listing_ = std::make_unique<ContenderListing>(zk_.get());
    deleter_ = std::make_unique<NodeDeleter>(zk_.get());
    leases_ = std::make_unique<LeaseTracker>(
        LeaseTracker::Options{}, &paths_, zk_.get(), listing_.get(), deleter_.get(), timers_.get(),
        [](const LockKey&) { return false; }, [] { return true; });
    writes_ = std::make_unique<HolderWrites>(&paths_, zk_.get(), leases_.get(), deleter_.get());
    batch_ = std::make_unique<RenewBatch>(zk_.get(), leases_.get(), writes_.get());
    Sync(Op::Create("/r", "", ZOO_PERSISTENT, nullptr));
    Sync(Op::Create(paths_.Ns("ns"), "", ZOO_PERSISTENT, nullptr));
  }
  void TearDown() override {
    zk_->Close();  // every reply has run before the parts go
    leases_->Stop();
    timers_.reset();  // no lease timer runs after this
  }

  Result Sync(Op op) {
    Result out;
    absl::Notification done;
    op.done = [&](Result r) {
      out = std::move(r);
      done.Notify();
    };
    zk_->Submit(std::move(op));
    done.WaitForNotification();
    return out;
  }

  // Plants `owner`'s holder node on lock `name` with a lease of `ttl`,
  // recorded by the tracker as this replica's own write made now (no timer).
  void Hold(const std::string& name, const std::string& owner, absl::Duration ttl) {
    LockKey key{"ns", name};
    ASSERT_EQ(Sync(Op::Create(paths_.Lock(key), "", ZOO_PERSISTENT, nullptr)).rc, ZOK);
    NodeData d;
    d.owner = owner;
    d.ttl_ms = absl::ToInt64Milliseconds(ttl);
    Result r = Sync(Op::Create(absl::StrCat(paths_.Lock(key), "/", NewAttemptPrefix()),
                               EncodeNodeData(d), ZOO_EPHEMERAL_SEQUENTIAL, nullptr));
    ASSERT_EQ(r.rc, ZOK);
    leases_->Observe(key, r.value, r.stat, d, /*new_lease=*/true, /*arm=*/false);
  }

  absl::StatusOr<RenewResult> Renew(const std::string& name, const std::string& owner) {
    absl::StatusOr<RenewResult> out;
    absl::Notification done;
    writes_->Renew(RenewParams{LockKey{"ns", name}, owner, absl::Minutes(1)},
                   [&](absl::StatusOr<RenewResult> r) {
                     out = std::move(r);
                     done.Notify();
                   });
    EXPECT_TRUE(done.WaitForNotificationWithTimeout(absl::Seconds(10)));
    return out;
  }

  std::vector<absl::StatusOr<RenewResult>> RenewMany(const std::vector<std::string>& names) {
    std::vector<RenewParams> params;
    for (const std::string& n : names) {
      params.push_back(RenewParams{LockKey{"ns", n}, "o", absl::Minutes(1)});
    }
    std::vector<absl::StatusOr<RenewResult>> out;
    absl::Notification done;
    batch_->RenewMany(std::move(params), [&](std::vector<absl::StatusOr<RenewResult>> r) {
      out = std::move(r);
      done.Notify();
    });
    EXPECT_TRUE(done.WaitForNotificationWithTimeout(absl::Seconds(10)));
    return out;
  }

  Paths paths_{"/r"};
  std::unique_ptr<TimerQueue> timers_;
  std::unique_ptr<ContenderListing> listing_;
  std::unique_ptr<NodeDeleter> deleter_;
  std::unique_ptr<LeaseTracker> leases_;
  std::unique_ptr<HolderWrites> writes_;
  std::unique_ptr<RenewBatch> batch_;
};

TEST_F(RenewPartsTest, RenewalAfterTheLeaseEndedBeforeTheReaperRanIsLockNotHeld) {
  Hold("a", "o", absl::Milliseconds(1));
  // The lease has ended by the clock; no timer or reaper has run.
  absl::SleepFor(absl::Milliseconds(20));
  absl::StatusOr<RenewResult> r = Renew("a", "o");
  EXPECT_TRUE(IsLockNotHeld(r.status())) << r.status();
  EXPECT_THAT(r.status().message(), ::testing::HasSubstr("the lease expired"));
  // Reaped: the lock is free for the next contender.
  Sync(Op::Get("/r", nullptr));  // the reap was sent before the answer
  EXPECT_THAT(fake_.Children(paths_.Lock(LockKey{"ns", "a"})), ::testing::IsEmpty());
}

TEST_F(RenewPartsTest, RenewManyOfAnEndedLeaseAmongLiveOnesLosesOnlyThatOne) {
  Hold("a", "o", absl::Minutes(1));
  Hold("b", "o", absl::Milliseconds(1));
  Hold("c", "o", absl::Minutes(1));
  absl::SleepFor(absl::Milliseconds(20));
  const uint64_t before = fake_.multis();
  std::vector<absl::StatusOr<RenewResult>> r = RenewMany({"a", "b", "c"});
  ASSERT_EQ(r.size(), 3u);
  EXPECT_TRUE(r[0].ok()) << r[0].status();
  EXPECT_TRUE(IsLockNotHeld(r[1].status())) << r[1].status();
  EXPECT_THAT(r[1].status().message(), ::testing::HasSubstr("the lease expired"));
  EXPECT_TRUE(r[2].ok()) << r[2].status();
  EXPECT_EQ(fake_.multis() - before, 1u) << "the live holds are renewed in one multi";
  Sync(Op::Get("/r", nullptr));
  EXPECT_THAT(fake_.Children(paths_.Lock(LockKey{"ns", "b"})), ::testing::IsEmpty());
}

}  // namespace
}  // namespace lockd::zk
