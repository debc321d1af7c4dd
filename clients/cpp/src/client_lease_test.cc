// Unit tests of lockd::Lease and the rest of lockd::Client against
// MockLockServiceStub: the renewal schedule, lost detection, bounded release,
// Describe/List and channel options. Acquire is in client_test.cc. Timings
// use real time with wide margins.

#include <atomic>
#include <chrono>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "absl/synchronization/notification.h"
#include "clients/cpp/src/client_test_fixture.h"
#include "gmock/gmock.h"
#include "google/rpc/error_details.pb.h"
#include "google/rpc/status.pb.h"
#include "gtest/gtest.h"
#include "lockd/client.h"
#include "protos/proto_duration.h"
#include "tests/support/status_matchers.h"

namespace lockd {
namespace {

using ::lockd::testing::StatusIs;
using ::testing::_;
using ::testing::AtLeast;
using ::testing::HasSubstr;
using ::testing::Invoke;
using ::testing::NiceMock;
using ::testing::Return;
using Clock = std::chrono::steady_clock;

TEST_F(ClientTest, WatchdogRenewsEveryThirdOfTheTtl) {
  std::mutex mu;
  std::vector<Clock::time_point> renews;
  ON_CALL(*stub_, Renew(_, _, _))
      .WillByDefault(
          Invoke([&](grpc::ClientContext*, const v1::RenewRequest& req, v1::RenewResponse* resp) {
            std::lock_guard<std::mutex> l(mu);
            renews.push_back(Clock::now());
            EXPECT_EQ(req.name(), "x");
            EXPECT_EQ(req.owner(), "test-owner");
            EXPECT_EQ(req.lease_ttl().nanos(), 900000000);
            resp->mutable_lease_ttl()->CopyFrom(req.lease_ttl());
            resp->set_fencing_token(7);
            return grpc::Status::OK;
          }));
  Client client = NewClient();
  auto start = Clock::now();
  absl::StatusOr<Lease> lease = client.Acquire("x", Ttl(absl::Milliseconds(900)));
  ASSERT_TRUE(lease.ok());
  std::this_thread::sleep_for(std::chrono::milliseconds(1500));
  EXPECT_TRUE(lease->valid());
  std::vector<Clock::time_point> seen;
  {
    std::lock_guard<std::mutex> l(mu);
    seen = renews;
  }
  // ttl/3 = 300 ms: about 5 renewals in 1.5 s; never before 300 ms apart.
  ASSERT_GE(seen.size(), 2u);  // loose: a loaded machine delays the thread
  EXPECT_LE(seen.size(), 6u);
  EXPECT_GE(seen[0] - start, std::chrono::milliseconds(290));
  for (size_t i = 1; i < seen.size(); ++i) {
    EXPECT_GE(seen[i] - seen[i - 1], std::chrono::milliseconds(290)) << i;
  }
  ASSERT_TRUE(lease->Release().ok());
}

TEST_F(ClientTest, AllLeasesOfAClientAreRenewedByOneBackgroundThread) {
  std::mutex mu;
  std::set<std::thread::id> threads;
  std::set<std::string> names;
  ON_CALL(*stub_, Renew(_, _, _))
      .WillByDefault(
          Invoke([&](grpc::ClientContext*, const v1::RenewRequest& req, v1::RenewResponse* resp) {
            std::lock_guard<std::mutex> l(mu);
            threads.insert(std::this_thread::get_id());
            names.insert(req.name());
            resp->mutable_lease_ttl()->CopyFrom(req.lease_ttl());
            resp->set_fencing_token(7);
            return grpc::Status::OK;
          }));
  Client client = NewClient();
  std::vector<Lease> leases;
  for (const char* n : {"a", "b", "c", "d"}) {
    absl::StatusOr<Lease> l = client.Acquire(n, Ttl(absl::Milliseconds(600)));
    ASSERT_TRUE(l.ok());
    leases.push_back(*std::move(l));
  }
  std::this_thread::sleep_for(std::chrono::milliseconds(700));
  std::lock_guard<std::mutex> l(mu);
  EXPECT_EQ(names.size(), 4u);
  ASSERT_EQ(threads.size(), 1u);
  EXPECT_NE(*threads.begin(), std::this_thread::get_id());
}

TEST_F(ClientTest, RenewAnsweringLockNotHeldLosesTheLeaseAndFiresTheCallbackOnce) {
  ON_CALL(*stub_, Renew(_, _, _)).WillByDefault(Return(LockNotHeld()));
  EXPECT_CALL(*stub_, Release(_, _, _)).Times(0);
  Client client = NewClient();
  std::atomic<int> fired{0};
  absl::Notification done;
  absl::Status why;
  AcquireOptions o = Ttl(absl::Milliseconds(600));
  o.on_lost = [&](const absl::Status& s) {
    why = s;
    if (++fired == 1) done.Notify();
  };
  absl::StatusOr<Lease> lease = client.Acquire("x", o);
  ASSERT_TRUE(lease.ok());
  ASSERT_TRUE(done.WaitForNotificationWithTimeout(absl::Seconds(3)));
  EXPECT_TRUE(lease->lost());
  EXPECT_FALSE(lease->valid());
  EXPECT_TRUE(IsLockLost(why));
  EXPECT_THAT(std::string(why.message()), HasSubstr("not held"));
  absl::Status released = lease->Release();
  EXPECT_THAT(released, StatusIs(absl::StatusCode::kFailedPrecondition));
  EXPECT_TRUE(IsLockLost(released));
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  EXPECT_EQ(fired.load(), 1);
}

TEST_F(ClientTest, LeaseIsLostWhenValidityRunsOutWhileRenewalsFail) {
  std::atomic<int> renews{0};
  ON_CALL(*stub_, Renew(_, _, _)).WillByDefault(Invoke([&](auto*, auto&, auto*) {
    ++renews;
    return Unavailable();
  }));
  Client client = NewClient();
  std::atomic<int> fired{0};
  absl::Notification done;
  AcquireOptions o = Ttl(absl::Milliseconds(600));
  o.on_lost = [&](const absl::Status& s) {
    EXPECT_TRUE(IsLockLost(s));
    EXPECT_THAT(std::string(s.message()), HasSubstr("validity"));
    if (++fired == 1) done.Notify();
  };
  auto start = Clock::now();
  absl::StatusOr<Lease> lease = client.Acquire("x", o);
  ASSERT_TRUE(lease.ok());
  ASSERT_TRUE(done.WaitForNotificationWithTimeout(absl::Seconds(3)));
  auto elapsed = Clock::now() - start;
  // Validity: 600 ms - drift; the watchdog retried in between.
  EXPECT_GE(elapsed, std::chrono::milliseconds(550));
  EXPECT_GE(renews.load(), 2);
  EXPECT_TRUE(lease->lost());
  EXPECT_TRUE(IsLockLost(lease->lost_status()));
  std::this_thread::sleep_for(std::chrono::milliseconds(200));
  EXPECT_EQ(fired.load(), 1);
}

TEST_F(ClientTest, RenewReportingAnotherFencingTokenLosesTheLease) {
  ON_CALL(*stub_, Renew(_, _, _))
      .WillByDefault(
          Invoke([](grpc::ClientContext*, const v1::RenewRequest& req, v1::RenewResponse* resp) {
            resp->mutable_lease_ttl()->CopyFrom(req.lease_ttl());
            resp->set_fencing_token(8);  // granted to us again after we lost it
            return grpc::Status::OK;
          }));
  Client client = NewClient();
  absl::StatusOr<Lease> lease = client.Acquire("x", Ttl(absl::Seconds(5), false));
  ASSERT_TRUE(lease.ok());
  absl::Status s = lease->Renew();
  EXPECT_TRUE(IsLockLost(s)) << s;
  EXPECT_THAT(std::string(s.message()), HasSubstr("fencing token 8"));
  EXPECT_TRUE(lease->lost());
}

TEST_F(ClientTest, WithoutAutoRenewNothingIsRenewedAndTheLeaseExpires) {
  EXPECT_CALL(*stub_, Renew(_, _, _)).Times(0);
  Client client = NewClient();
  absl::Notification lost;
  AcquireOptions o = Ttl(absl::Milliseconds(400), false);
  o.on_lost = [&](const absl::Status&) { lost.Notify(); };
  absl::StatusOr<Lease> lease = client.Acquire("x", o);
  ASSERT_TRUE(lease.ok());
  EXPECT_TRUE(lease->valid());
  ASSERT_TRUE(lost.WaitForNotificationWithTimeout(absl::Seconds(3)));
  EXPECT_FALSE(lease->valid());
}

TEST_F(ClientTest, ManualRenewExtendsValidityFromItsSendTime) {
  Client client = NewClient();
  absl::StatusOr<Lease> lease = client.Acquire("x", Ttl(absl::Seconds(2), false));
  ASSERT_TRUE(lease.ok());
  auto first = lease->valid_until();
  std::this_thread::sleep_for(std::chrono::milliseconds(200));
  ASSERT_TRUE(lease->Renew().ok());
  EXPECT_GE(lease->valid_until() - first, std::chrono::milliseconds(190));
}

TEST_F(ClientTest, GrantAfterALongWaitIsRenewedBeforeAcquireReturns) {
  ON_CALL(*stub_, Acquire(_, _, _))
      .WillByDefault(Invoke(
          [](grpc::ClientContext*, const v1::AcquireRequest& req, v1::AcquireResponse* resp) {
            std::this_thread::sleep_for(std::chrono::milliseconds(1300));  // > ttl
            Grant(req, resp);
            return grpc::Status::OK;
          }));
  EXPECT_CALL(*stub_, Renew(_, _, _)).Times(AtLeast(1));
  Client client = NewClient();
  AcquireOptions o = Ttl(absl::Milliseconds(1200));
  o.wait = absl::Seconds(5);
  absl::StatusOr<Lease> lease = client.Acquire("x", o);
  ASSERT_TRUE(lease.ok()) << lease.status();
  EXPECT_TRUE(lease->valid());
  EXPECT_GT(lease->validity_remaining(), absl::Milliseconds(900));
}

TEST_F(ClientTest, GrantWhoseLeaseEndedDuringTheReplyIsReportedLost) {
  ON_CALL(*stub_, Acquire(_, _, _))
      .WillByDefault(Invoke(
          [](grpc::ClientContext*, const v1::AcquireRequest& req, v1::AcquireResponse* resp) {
            std::this_thread::sleep_for(std::chrono::milliseconds(500));
            Grant(req, resp);
            return grpc::Status::OK;
          }));
  ON_CALL(*stub_, Renew(_, _, _)).WillByDefault(Return(LockNotHeld()));
  Client client = NewClient();
  AcquireOptions o = Ttl(absl::Milliseconds(450));
  o.wait = absl::Seconds(5);
  absl::StatusOr<Lease> lease = client.Acquire("x", o);
  EXPECT_TRUE(IsLockLost(lease.status())) << lease.status();
}

TEST_F(ClientTest, ReleaseRetriesUnavailableWithTheSameRequestId) {
  std::vector<std::string> ids;
  EXPECT_CALL(*stub_, Release(_, _, _))
      .Times(3)
      .WillRepeatedly(Invoke(
          [&](grpc::ClientContext*, const v1::ReleaseRequest& req, v1::ReleaseResponse* resp) {
            ids.push_back(req.request_id());
            if (ids.size() < 3) return Unavailable();
            resp->set_released(true);
            return grpc::Status::OK;
          }));
  Client client = NewClient();
  absl::StatusOr<Lease> lease = client.Acquire("x", Ttl(absl::Seconds(10)));
  ASSERT_TRUE(lease.ok());
  EXPECT_TRUE(lease->Release().ok());
  ASSERT_EQ(ids.size(), 3u);
  EXPECT_FALSE(ids[0].empty());
  EXPECT_EQ(ids[1], ids[0]);
  EXPECT_EQ(ids[2], ids[0]);
  EXPECT_FALSE(lease->active());
}

// Every Release and Renew of a Lease names its hold by the Lease's fencing
// token (a late one must not touch a later hold of the owner); a reentrant
// Lease has the first hold's token.
TEST_F(ClientTest, ReleasesAndRenewalsOfALeaseCarryItsFencingToken) {
  ON_CALL(*stub_, Acquire(_, _, _))
      .WillByDefault(Invoke(
          [](grpc::ClientContext*, const v1::AcquireRequest& req, v1::AcquireResponse* resp) {
            Grant(req, resp, /*token=*/41);
            return grpc::Status::OK;
          }));
  std::mutex mu;
  std::vector<uint64_t> renewed, released;
  ON_CALL(*stub_, Renew(_, _, _))
      .WillByDefault(
          Invoke([&](grpc::ClientContext*, const v1::RenewRequest& req, v1::RenewResponse* resp) {
            std::lock_guard<std::mutex> l(mu);
            renewed.push_back(req.fencing_token());
            resp->mutable_lease_ttl()->CopyFrom(req.lease_ttl());
            resp->set_fencing_token(41);
            return grpc::Status::OK;
          }));
  EXPECT_CALL(*stub_, Release(_, _, _))
      .Times(2)
      .WillRepeatedly(Invoke(
          [&](grpc::ClientContext*, const v1::ReleaseRequest& req, v1::ReleaseResponse* resp) {
            std::lock_guard<std::mutex> l(mu);
            released.push_back(req.fencing_token());
            EXPECT_TRUE(req.acquire_request_id().empty());
            resp->set_released(released.size() == 2);
            return grpc::Status::OK;
          }));
  Client client = NewClient();
  absl::StatusOr<Lease> first = client.Acquire("x", Ttl(absl::Milliseconds(600)));
  absl::StatusOr<Lease> again = client.Acquire("x", Ttl(absl::Seconds(10)));  // reentrant
  ASSERT_TRUE(first.ok() && again.ok());
  ASSERT_TRUE(again->Renew().ok());
  // The watchdog renews `first` every 200 ms.
  auto watchdog_renewed = [&] {
    std::lock_guard<std::mutex> l(mu);
    return renewed.size() >= 2;
  };
  for (auto end = Clock::now() + std::chrono::seconds(10);
       !watchdog_renewed() && Clock::now() < end;) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  ASSERT_TRUE(watchdog_renewed());
  EXPECT_TRUE(again->Release().ok());
  EXPECT_TRUE(first->Release().ok());
  std::lock_guard<std::mutex> l(mu);
  EXPECT_THAT(renewed, ::testing::Each(41u));
  EXPECT_THAT(released, ::testing::ElementsAre(41u, 41u));
}

TEST_F(ClientTest, LowLevelReleaseAndRenewSendTheFencingTokenGiven) {
  v1::ReleaseRequest release;
  v1::RenewRequest renew;
  ON_CALL(*stub_, Release(_, _, _))
      .WillByDefault(Invoke([&](grpc::ClientContext*, const v1::ReleaseRequest& req, auto*) {
        release = req;
        return grpc::Status::OK;
      }));
  ON_CALL(*stub_, Renew(_, _, _))
      .WillByDefault(Invoke([&](grpc::ClientContext*, const v1::RenewRequest& req, auto*) {
        renew = req;
        return grpc::Status::OK;
      }));
  Client client = NewClient();
  ASSERT_TRUE(client.Release("x", "o").ok());
  EXPECT_EQ(release.fencing_token(), 0u);  // any hold of the owner
  ASSERT_TRUE(client.Release("x", "o", "", 12).ok());
  EXPECT_EQ(release.fencing_token(), 12u);
  ASSERT_TRUE(client.Renew("x", "o", absl::Seconds(5)).ok());
  EXPECT_EQ(renew.fencing_token(), 0u);
  ASSERT_TRUE(client.Renew("x", "o", absl::Seconds(5), "", 13).ok());
  EXPECT_EQ(renew.fencing_token(), 13u);
}

TEST_F(ClientTest, ReleaseAnsweringLockNotHeldReportsTheLoss) {
  EXPECT_CALL(*stub_, Release(_, _, _)).WillOnce(Return(LockNotHeld()));
  Client client = NewClient();
  std::atomic<int> fired{0};
  AcquireOptions o = Ttl(absl::Seconds(10));
  o.on_lost = [&](const absl::Status&) { ++fired; };
  absl::StatusOr<Lease> lease = client.Acquire("x", o);
  ASSERT_TRUE(lease.ok());
  absl::Status s = lease->Release();
  EXPECT_THAT(s, StatusIs(absl::StatusCode::kFailedPrecondition));
  EXPECT_TRUE(IsLockLost(s));
  EXPECT_EQ(fired.load(), 0);  // reported by Release() only
}

TEST_F(ClientTest, SecondReleaseIsFailedPreconditionWithoutACall) {
  EXPECT_CALL(*stub_, Release(_, _, _)).Times(1);
  Client client = NewClient();
  absl::StatusOr<Lease> lease = client.Acquire("x", Ttl(absl::Seconds(10)));
  ASSERT_TRUE(lease.ok());
  ASSERT_TRUE(lease->Release().ok());
  absl::Status again = lease->Release();
  EXPECT_THAT(again, StatusIs(absl::StatusCode::kFailedPrecondition));
  EXPECT_FALSE(IsLockLost(again));
}

TEST_F(ClientTest, DestructorReleasesOnce) {
  v1::ReleaseRequest seen;
  EXPECT_CALL(*stub_, Release(_, _, _))
      .WillOnce(Invoke(
          [&](grpc::ClientContext*, const v1::ReleaseRequest& req, v1::ReleaseResponse* resp) {
            seen = req;
            resp->set_released(true);
            return grpc::Status::OK;
          }));
  Client client = NewClient();
  {
    absl::StatusOr<Lease> lease = client.Acquire("orders/42", Ttl(absl::Seconds(10)));
    ASSERT_TRUE(lease.ok());
    Lease moved = *std::move(lease);  // the moved-from Lease releases nothing
  }
  EXPECT_EQ(seen.name(), "orders/42");
  EXPECT_EQ(seen.owner(), "test-owner");
}

TEST_F(ClientTest, DestructorGivesUpAfterTheReleaseTimeout) {
  std::atomic<int> calls{0};
  ON_CALL(*stub_, Release(_, _, _)).WillByDefault(Invoke([&](auto*, auto&, auto*) {
    ++calls;
    return Unavailable();
  }));
  Client client = NewClient();
  auto lease = std::make_unique<absl::StatusOr<Lease>>(client.Acquire("x", Ttl(absl::Seconds(10))));
  ASSERT_TRUE(lease->ok());
  auto start = Clock::now();
  lease.reset();
  auto elapsed = Clock::now() - start;
  EXPECT_GE(calls.load(), 2);
  EXPECT_LT(elapsed, std::chrono::milliseconds(1000));  // release_timeout is 300 ms
}

TEST_F(ClientTest, DetachStopsRenewingWithoutReleasing) {
  EXPECT_CALL(*stub_, Release(_, _, _)).Times(0);
  EXPECT_CALL(*stub_, Renew(_, _, _)).Times(0);
  Client client = NewClient();
  {
    absl::StatusOr<Lease> lease = client.Acquire("x", Ttl(absl::Milliseconds(300)));
    ASSERT_TRUE(lease.ok());
    lease->Detach();
    EXPECT_FALSE(lease->active());
  }
  std::this_thread::sleep_for(std::chrono::milliseconds(400));
}

TEST_F(ClientTest, MovedFromLeaseIsEmpty) {
  Client client = NewClient();
  absl::StatusOr<Lease> lease = client.Acquire("x", Ttl(absl::Seconds(10)));
  ASSERT_TRUE(lease.ok());
  Lease other = *std::move(lease);
  EXPECT_FALSE(lease->active());  // NOLINT(bugprone-use-after-move): documented
  EXPECT_EQ(lease->fencing_token(), 0u);
  EXPECT_FALSE(lease->lost());
  EXPECT_THAT(lease->Release(), StatusIs(absl::StatusCode::kFailedPrecondition));
  EXPECT_TRUE(other.active());
  EXPECT_EQ(other.fencing_token(), 7u);
}

TEST_F(ClientTest, LeaseKeepsRenewingAfterItsClientIsDestroyed) {
  std::atomic<int> renews{0};
  ON_CALL(*stub_, Renew(_, _, _))
      .WillByDefault(
          Invoke([&](grpc::ClientContext*, const v1::RenewRequest& req, v1::RenewResponse* resp) {
            ++renews;
            resp->mutable_lease_ttl()->CopyFrom(req.lease_ttl());
            resp->set_fencing_token(7);
            return grpc::Status::OK;
          }));
  EXPECT_CALL(*stub_, Release(_, _, _)).Times(1);
  std::optional<Lease> lease;
  {
    Client client = NewClient();
    absl::StatusOr<Lease> l = client.Acquire("x", Ttl(absl::Milliseconds(300)));
    ASSERT_TRUE(l.ok());
    lease.emplace(*std::move(l));
  }
  std::this_thread::sleep_for(std::chrono::milliseconds(500));
  EXPECT_GE(renews.load(), 2);
  EXPECT_TRUE(lease->valid());
  EXPECT_TRUE(lease->Release().ok());
}

TEST_F(ClientTest, LostCallbackMayDestroyTheLastLeaseOfADestroyedClient) {
  ON_CALL(*stub_, Renew(_, _, _)).WillByDefault(Return(LockNotHeld()));
  absl::Notification done;
  auto holder = std::make_shared<std::optional<Lease>>();
  {
    Client client = NewClient();
    AcquireOptions o = Ttl(absl::Milliseconds(300));
    o.on_lost = [holder, &done](const absl::Status&) {
      holder->reset();  // destroys the Lease, the last owner of the client core
      done.Notify();
    };
    absl::StatusOr<Lease> l = client.Acquire("x", std::move(o));
    ASSERT_TRUE(l.ok());
    holder->emplace(*std::move(l));
  }
  ASSERT_TRUE(done.WaitForNotificationWithTimeout(absl::Seconds(3)));
  std::this_thread::sleep_for(std::chrono::milliseconds(100));  // the detached thread exits
}

TEST_F(ClientTest, DescribeAndListMapEveryField) {
  EXPECT_CALL(*stub_, Describe(_, _, _))
      .WillOnce(
          Invoke([](grpc::ClientContext*, const v1::DescribeRequest& req, v1::LockInfo* resp) {
            resp->set_namespace_(req.namespace_());
            resp->set_name(req.name());
            resp->set_held(true);
            resp->set_owner("o");
            resp->set_hold_count(2);
            resp->set_fencing_token(11);
            resp->mutable_ttl_remaining()->set_seconds(3);
            resp->set_waiters(4);
            resp->set_backend("memory");
            return grpc::Status::OK;
          }));
  v1::ListRequest list_seen;
  EXPECT_CALL(*stub_, List(_, _, _))
      .WillOnce(
          Invoke([&](grpc::ClientContext*, const v1::ListRequest& req, v1::ListResponse* resp) {
            list_seen = req;
            resp->add_locks()->set_name("jobs/a");
            resp->add_locks()->set_name("jobs/b");
            resp->set_next_page_token("tok");
            return grpc::Status::OK;
          }));
  options_.default_namespace = "ops";
  Client client = NewClient();
  absl::StatusOr<LockInfo> info = client.Describe("x");
  ASSERT_TRUE(info.ok());
  EXPECT_EQ(info->ns, "ops");
  EXPECT_EQ(info->name, "x");
  EXPECT_TRUE(info->held);
  EXPECT_EQ(info->owner, "o");
  EXPECT_EQ(info->hold_count, 2u);
  EXPECT_EQ(info->fencing_token, 11u);
  EXPECT_EQ(info->ttl_remaining, absl::Seconds(3));
  EXPECT_EQ(info->waiters, 4u);
  EXPECT_EQ(info->backend, "memory");
  ListOptions lo;
  lo.prefix = "jobs/";
  lo.page_size = 2;
  absl::StatusOr<ListPage> page = client.List(lo);
  ASSERT_TRUE(page.ok());
  EXPECT_EQ(list_seen.namespace_(), "ops");
  EXPECT_EQ(list_seen.prefix(), "jobs/");
  EXPECT_EQ(list_seen.page_size(), 2u);
  ASSERT_EQ(page->locks.size(), 2u);
  EXPECT_EQ(page->locks[1].name, "jobs/b");
  EXPECT_EQ(page->next_page_token, "tok");
}

TEST_F(ClientTest, LowLevelReleaseOfALockNotHeldIsLockLost) {
  EXPECT_CALL(*stub_, Release(_, _, _)).WillOnce(Return(LockNotHeld()));
  Client client = NewClient();
  absl::StatusOr<ReleaseOutcome> r = client.Release("x", "other-owner");
  EXPECT_THAT(r, StatusIs(absl::StatusCode::kFailedPrecondition));
  EXPECT_TRUE(IsLockLost(r.status()));
}

TEST(NewLockdChannelTest, RejectsAnEmptyTargetAndUnreadableTlsFiles) {
  EXPECT_THAT(NewLockdChannel(""), StatusIs(absl::StatusCode::kInvalidArgument));
  TlsOptions tls;
  tls.enabled = true;
  tls.ca_file = "/nonexistent/ca.pem";
  EXPECT_THAT(NewLockdChannel("127.0.0.1:1", tls), StatusIs(absl::StatusCode::kInvalidArgument));
  tls.ca_file.clear();
  tls.cert_file = "/nonexistent/cert.pem";
  EXPECT_THAT(NewLockdChannel("127.0.0.1:1", tls), StatusIs(absl::StatusCode::kInvalidArgument));
  EXPECT_TRUE(NewLockdChannel("127.0.0.1:1").ok());
  KeepaliveOptions keepalive;
  keepalive.timeout = absl::ZeroDuration();
  EXPECT_THAT(NewLockdChannel("127.0.0.1:1", {}, {}, keepalive),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("keepalive.timeout")));
  keepalive = KeepaliveOptions();
  keepalive.time = -absl::Seconds(1);
  EXPECT_THAT(NewLockdChannel("127.0.0.1:1", {}, {}, keepalive),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("keepalive.time")));
}

}  // namespace
}  // namespace lockd
