// The ZooKeeper backend's small parts on their own, over a session of the
// in-memory FakeZooKeeper.

#include <atomic>
#include <memory>
#include <string>

#include "absl/cleanup/cleanup.h"
#include "absl/synchronization/notification.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "backends/zookeeper/contender_listing.h"
#include "backends/zookeeper/fake_zookeeper.h"
#include "backends/zookeeper/node_deleter.h"
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

}  // namespace
}  // namespace lockd::zk
