// Unit tests of lockd::Client and lockd::Lease against MockLockServiceStub:
// request contents, retries with one request_id, the renewal schedule, lost
// detection and bounded release. Timings use real time with wide margins.

#include "lockd/client.h"

#include <atomic>
#include <chrono>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "absl/synchronization/notification.h"
#include "gmock/gmock.h"
#include "google/rpc/error_details.pb.h"
#include "google/rpc/status.pb.h"
#include "gtest/gtest.h"
#include "lockd/v1/lock_mock.grpc.pb.h"
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

grpc::Status LockNotHeld() {
  google::rpc::ErrorInfo info;
  info.set_reason("LOCK_NOT_HELD");
  info.set_domain("lockd");
  google::rpc::Status details;
  details.set_code(grpc::StatusCode::FAILED_PRECONDITION);
  details.set_message("lock not held");
  details.add_details()->PackFrom(info);
  return grpc::Status(grpc::StatusCode::FAILED_PRECONDITION, "lock not held",
                      details.SerializeAsString());
}

grpc::Status Unavailable() { return grpc::Status(grpc::StatusCode::UNAVAILABLE, "down"); }

// Fills a granted AcquireResponse.
void Grant(const v1::AcquireRequest& req, v1::AcquireResponse* resp, uint64_t token = 7) {
  resp->set_acquired(true);
  resp->set_owner(req.owner());
  resp->set_fencing_token(token);
  resp->set_hold_count(1);
  absl::Duration ttl = req.has_lease_ttl() ? FromProtoDuration(req.lease_ttl()) : absl::Seconds(30);
  SetProtoDuration(ttl, resp->mutable_lease_ttl());
}

class ClientTest : public ::testing::Test {
 protected:
  ClientTest() : stub_(std::make_shared<NiceMock<v1::MockLockServiceStub>>()) {
    options_.owner = "test-owner";
    options_.initial_backoff = absl::Milliseconds(5);
    options_.max_backoff = absl::Milliseconds(20);
    options_.rpc_timeout = absl::Seconds(2);
    options_.release_timeout = absl::Milliseconds(300);
    // Renewals and releases succeed unless a test says otherwise.
    ON_CALL(*stub_, Renew(_, _, _))
        .WillByDefault(
            Invoke([](grpc::ClientContext*, const v1::RenewRequest& req, v1::RenewResponse* resp) {
              resp->mutable_lease_ttl()->CopyFrom(req.lease_ttl());
              resp->set_fencing_token(7);
              return grpc::Status::OK;
            }));
    ON_CALL(*stub_, Release(_, _, _))
        .WillByDefault(
            Invoke([](grpc::ClientContext*, const v1::ReleaseRequest&, v1::ReleaseResponse* resp) {
              resp->set_released(true);
              return grpc::Status::OK;
            }));
    ON_CALL(*stub_, Acquire(_, _, _))
        .WillByDefault(Invoke(
            [](grpc::ClientContext*, const v1::AcquireRequest& req, v1::AcquireResponse* resp) {
              Grant(req, resp);
              return grpc::Status::OK;
            }));
  }

  Client NewClient() { return Client(stub_, options_); }

  std::shared_ptr<NiceMock<v1::MockLockServiceStub>> stub_;
  ClientOptions options_;
};

AcquireOptions Ttl(absl::Duration ttl, bool auto_renew = true) {
  AcquireOptions o;
  o.ttl = ttl;
  o.auto_renew = auto_renew;
  return o;
}

TEST_F(ClientTest, AcquireSendsNameOwnerTtlWaitAndRequestId) {
  v1::AcquireRequest seen;
  EXPECT_CALL(*stub_, Acquire(_, _, _))
      .WillOnce(Invoke(
          [&](grpc::ClientContext*, const v1::AcquireRequest& req, v1::AcquireResponse* resp) {
            seen = req;
            Grant(req, resp, 42);
            return grpc::Status::OK;
          }));
  Client client = NewClient();
  AcquireOptions o = Ttl(absl::Seconds(10));
  o.ns = "billing";
  o.wait = absl::Seconds(5);
  absl::StatusOr<Lease> lease = client.Acquire("orders/42", o);
  ASSERT_TRUE(lease.ok()) << lease.status();
  EXPECT_EQ(seen.namespace_(), "billing");
  EXPECT_EQ(seen.name(), "orders/42");
  EXPECT_EQ(seen.owner(), "test-owner");
  EXPECT_EQ(seen.lease_ttl().seconds(), 10);
  EXPECT_GT(seen.wait_timeout().seconds(), 3);
  EXPECT_LE(seen.wait_timeout().seconds(), 5);
  EXPECT_EQ(seen.request_id().size(), 32u);
  EXPECT_EQ(lease->fencing_token(), 42u);
  EXPECT_EQ(lease->owner(), "test-owner");
  EXPECT_EQ(lease->ns(), "billing");
  EXPECT_EQ(lease->name(), "orders/42");
  EXPECT_EQ(lease->hold_count(), 1u);
  EXPECT_EQ(lease->ttl(), absl::Seconds(10));
  EXPECT_TRUE(lease->valid());
  EXPECT_FALSE(lease->lost());
}

TEST_F(ClientTest, DefaultOwnerIsRandomPerClient) {
  options_.owner.clear();
  Client a = NewClient();
  Client b = NewClient();
  EXPECT_FALSE(a.owner().empty());
  EXPECT_NE(a.owner(), b.owner());
}

TEST_F(ClientTest, TryAcquireSendsNoWait) {
  v1::AcquireRequest seen;
  EXPECT_CALL(*stub_, Acquire(_, _, _))
      .WillOnce(Invoke(
          [&](grpc::ClientContext*, const v1::AcquireRequest& req, v1::AcquireResponse* resp) {
            seen = req;
            Grant(req, resp);
            return grpc::Status::OK;
          }));
  Client client = NewClient();
  AcquireOptions o;
  o.wait = absl::Seconds(30);
  absl::StatusOr<Lease> lease = client.TryAcquire("x", o);
  ASSERT_TRUE(lease.ok());
  EXPECT_FALSE(seen.has_wait_timeout());
  EXPECT_EQ(seen.namespace_(), "default");
  EXPECT_EQ(lease->ns(), "default");
}

// What the stub saw, in order: "acquire <request_id>" and
// "undo <acquire_request_id>" / "release <request_id>".
class CallLog {
 public:
  void Add(std::string entry) {
    std::lock_guard<std::mutex> l(mu_);
    entries_.push_back(std::move(entry));
  }
  std::vector<std::string> entries() const {
    std::lock_guard<std::mutex> l(mu_);
    return entries_;
  }

 private:
  mutable std::mutex mu_;
  std::vector<std::string> entries_;
};

std::string Logged(const v1::ReleaseRequest& req) {
  if (!req.acquire_request_id().empty()) {
    EXPECT_TRUE(req.request_id().empty()) << "an undo carries no request_id of its own";
    return "undo " + req.acquire_request_id();
  }
  return "release " + req.request_id();
}

TEST_F(ClientTest, AcquireRetriedAfterAConfirmedUndoUsesANewRequestId) {
  CallLog log;
  std::vector<std::string> ids;
  EXPECT_CALL(*stub_, Acquire(_, _, _))
      .Times(3)
      .WillRepeatedly(Invoke(
          [&](grpc::ClientContext*, const v1::AcquireRequest& req, v1::AcquireResponse* resp) {
            ids.push_back(req.request_id());
            log.Add("acquire " + req.request_id());
            if (ids.size() < 3) return Unavailable();
            Grant(req, resp);
            return grpc::Status::OK;
          }));
  EXPECT_CALL(*stub_, Release(_, _, _))
      .Times(2)
      .WillRepeatedly(Invoke(
          [&](grpc::ClientContext*, const v1::ReleaseRequest& req, v1::ReleaseResponse* resp) {
            EXPECT_EQ(req.owner(), "test-owner");
            EXPECT_EQ(req.name(), "orders/42");
            EXPECT_EQ(req.namespace_(), "default");
            log.Add(Logged(req));
            resp->set_hold_count(0);  // the attempt had not been applied
            return grpc::Status::OK;
          }));
  Client client = NewClient();
  absl::StatusOr<Lease> lease = client.Acquire("orders/42", Ttl(absl::Seconds(10), false));
  ASSERT_TRUE(lease.ok()) << lease.status();
  ASSERT_EQ(ids.size(), 3u);
  EXPECT_EQ(std::set<std::string>(ids.begin(), ids.end()).size(), 3u);
  // Each attempt that ended UNAVAILABLE is undone before the next one.
  EXPECT_THAT(log.entries(),
              ::testing::ElementsAre("acquire " + ids[0], "undo " + ids[0], "acquire " + ids[1],
                                     "undo " + ids[1], "acquire " + ids[2]));
  lease->Detach();
}

TEST_F(ClientTest, AcquireRetriedAfterAnUnconfirmedUndoKeepsItsRequestId) {
  std::vector<std::string> ids;
  EXPECT_CALL(*stub_, Acquire(_, _, _))
      .Times(3)
      .WillRepeatedly(Invoke(
          [&](grpc::ClientContext*, const v1::AcquireRequest& req, v1::AcquireResponse* resp) {
            ids.push_back(req.request_id());
            if (ids.size() < 3) return Unavailable();
            Grant(req, resp);
            return grpc::Status::OK;
          }));
  std::atomic<int> undos{0};
  ON_CALL(*stub_, Release(_, _, _)).WillByDefault(Invoke([&](auto*, auto&, auto*) {
    ++undos;
    return Unavailable();
  }));
  Client client = NewClient();
  absl::StatusOr<Lease> lease = client.Acquire("orders/42", Ttl(absl::Seconds(10), false));
  ASSERT_TRUE(lease.ok()) << lease.status();
  ASSERT_EQ(ids.size(), 3u);
  EXPECT_FALSE(ids[0].empty());
  EXPECT_EQ(ids[1], ids[0]);  // the server answers a repeat with the first result
  EXPECT_EQ(ids[2], ids[0]);
  EXPECT_GE(undos.load(), 2);
  lease->Detach();
}

TEST_F(ClientTest, AcquireWithNoReplyIsUndoneBeforeTheFailureIsReported) {
  std::string acquire_id;
  v1::ReleaseRequest undo;
  std::chrono::system_clock::duration undo_time_left{};
  EXPECT_CALL(*stub_, Acquire(_, _, _))
      .WillOnce(Invoke([&](grpc::ClientContext* ctx, const v1::AcquireRequest& req, auto*) {
        acquire_id = req.request_id();
        // The server granted, but the reply did not arrive before the deadline.
        std::this_thread::sleep_until(ctx->deadline());
        return grpc::Status(grpc::StatusCode::DEADLINE_EXCEEDED, "Deadline Exceeded");
      }));
  EXPECT_CALL(*stub_, Release(_, _, _))
      .WillOnce(Invoke(
          [&](grpc::ClientContext* ctx, const v1::ReleaseRequest& req, v1::ReleaseResponse* resp) {
            undo = req;
            // Its own deadline, although the caller's has passed.
            undo_time_left = ctx->deadline() - std::chrono::system_clock::now();
            resp->set_released(true);
            return grpc::Status::OK;
          }));
  Client client = NewClient();
  AcquireOptions o = Ttl(absl::Seconds(10));
  o.timeout = absl::Milliseconds(200);
  o.ns = "billing";
  absl::StatusOr<Lease> lease = client.Acquire("orders/42", o);
  EXPECT_THAT(lease, StatusIs(absl::StatusCode::kUnavailable));
  EXPECT_FALSE(UnconfirmedAcquireRequestId(lease.status()).has_value());
  EXPECT_EQ(undo.namespace_(), "billing");
  EXPECT_EQ(undo.name(), "orders/42");
  EXPECT_EQ(undo.owner(), "test-owner");
  EXPECT_EQ(undo.acquire_request_id(), acquire_id);
  EXPECT_FALSE(acquire_id.empty());
  EXPECT_TRUE(undo.request_id().empty());
  // min(rpc_timeout 2 s, release_timeout 300 ms)
  EXPECT_GT(undo_time_left, std::chrono::milliseconds(200));
  EXPECT_LE(undo_time_left, std::chrono::milliseconds(300));
}

TEST_F(ClientTest, AcquireTimingOutInsideTheWaitIsUndoneToo) {
  std::string acquire_id, undone;
  ON_CALL(*stub_, Acquire(_, _, _))
      .WillByDefault(Invoke([&](grpc::ClientContext*, const v1::AcquireRequest& req, auto*) {
        acquire_id = req.request_id();
        return grpc::Status(grpc::StatusCode::DEADLINE_EXCEEDED, "Deadline Exceeded");
      }));
  EXPECT_CALL(*stub_, Release(_, _, _))
      .WillOnce(Invoke(
          [&](grpc::ClientContext*, const v1::ReleaseRequest& req, v1::ReleaseResponse* resp) {
            undone = req.acquire_request_id();
            resp->set_hold_count(0);
            return grpc::Status::OK;
          }));
  Client client = NewClient();
  AcquireOptions o = Ttl(absl::Seconds(10));
  o.wait = absl::Seconds(10);
  o.timeout = absl::Milliseconds(100);
  EXPECT_THAT(client.Acquire("x", o), StatusIs(absl::StatusCode::kDeadlineExceeded));
  EXPECT_EQ(undone, acquire_id);
}

TEST_F(ClientTest, AnUnansweredUndoIsReportedWithTheRequestIdWithinItsBound) {
  std::string acquire_id;
  ON_CALL(*stub_, Acquire(_, _, _))
      .WillByDefault(Invoke([&](grpc::ClientContext*, const v1::AcquireRequest& req, auto*) {
        acquire_id = req.request_id();
        return grpc::Status(grpc::StatusCode::DEADLINE_EXCEEDED, "Deadline Exceeded");
      }));
  std::atomic<int> undos{0};
  ON_CALL(*stub_, Release(_, _, _)).WillByDefault(Invoke([&](auto*, auto&, auto*) {
    ++undos;
    return Unavailable();
  }));
  Client client = NewClient();
  auto start = Clock::now();
  absl::StatusOr<Lease> lease = client.TryAcquire("x", Ttl(absl::Seconds(10)));
  auto elapsed = Clock::now() - start;
  EXPECT_THAT(lease, StatusIs(absl::StatusCode::kUnavailable));
  std::optional<std::string> id = UnconfirmedAcquireRequestId(lease.status());
  ASSERT_TRUE(id.has_value()) << lease.status();
  EXPECT_EQ(*id, acquire_id);
  EXPECT_THAT(lease.status().message(), HasSubstr(acquire_id));
  EXPECT_THAT(lease.status().message(), HasSubstr("test-owner"));
  EXPECT_GE(undos.load(), 2);  // retried within its bound (release_timeout, 300 ms)
  EXPECT_GE(elapsed, std::chrono::milliseconds(250));
  EXPECT_LT(elapsed, std::chrono::milliseconds(1500));
}

TEST_F(ClientTest, AnswersFromTheServerAreNotUndone) {
  EXPECT_CALL(*stub_, Release(_, _, _)).Times(0);
  EXPECT_CALL(*stub_, Acquire(_, _, _))
      .WillOnce(Return(grpc::Status(grpc::StatusCode::INVALID_ARGUMENT, "lease_ttl: too long")))
      .WillOnce(Return(grpc::Status(grpc::StatusCode::RESOURCE_EXHAUSTED, "too many waiters")))
      .WillOnce(Return(grpc::Status(grpc::StatusCode::PERMISSION_DENIED, "no lock permission")))
      .WillOnce(Invoke([](auto*, const v1::AcquireRequest& req, v1::AcquireResponse* resp) {
        resp->set_acquired(false);
        resp->set_owner(req.owner());
        return grpc::Status::OK;
      }));
  Client client = NewClient();
  EXPECT_THAT(client.TryAcquire("x"), StatusIs(absl::StatusCode::kInvalidArgument));
  EXPECT_THAT(client.TryAcquire("x"), StatusIs(absl::StatusCode::kResourceExhausted));
  EXPECT_THAT(client.TryAcquire("x"), StatusIs(absl::StatusCode::kPermissionDenied));
  EXPECT_THAT(client.TryAcquire("x"), StatusIs(absl::StatusCode::kDeadlineExceeded));
}

TEST_F(ClientTest, NotAcquiredAfterAnUnconfirmedUndoIsUndoneAgain) {
  // Attempt 1 is lost (UNAVAILABLE) and its undo too; the retry (same
  // request_id) answers "not acquired": the client undoes once more before
  // reporting, since attempt 1 may still be the owner's last request.
  std::vector<std::string> ids;
  EXPECT_CALL(*stub_, Acquire(_, _, _))
      .Times(2)
      .WillRepeatedly(Invoke(
          [&](grpc::ClientContext*, const v1::AcquireRequest& req, v1::AcquireResponse* resp) {
            ids.push_back(req.request_id());
            if (ids.size() == 1) return Unavailable();
            resp->set_acquired(false);
            return grpc::Status::OK;
          }));
  std::vector<std::string> undone;
  EXPECT_CALL(*stub_, Release(_, _, _))
      .WillOnce(Return(Unavailable()))
      .WillRepeatedly(
          Invoke([&](grpc::ClientContext*, const v1::ReleaseRequest& req, v1::ReleaseResponse*) {
            undone.push_back(req.acquire_request_id());
            return grpc::Status::OK;
          }));
  options_.release_timeout = absl::Milliseconds(1);  // the first undo gets one try
  Client client = NewClient();
  EXPECT_THAT(client.TryAcquire("x"), StatusIs(absl::StatusCode::kDeadlineExceeded));
  ASSERT_EQ(ids.size(), 2u);
  EXPECT_EQ(ids[1], ids[0]);
  EXPECT_THAT(undone, ::testing::ElementsAre(ids[0]));
}

TEST_F(ClientTest, UndoAcquireSendsTheAcquireRequestIdAndNoRequestId) {
  v1::ReleaseRequest seen;
  EXPECT_CALL(*stub_, Release(_, _, _))
      .WillOnce(Invoke(
          [&](grpc::ClientContext*, const v1::ReleaseRequest& req, v1::ReleaseResponse* resp) {
            seen = req;
            resp->set_released(true);
            return grpc::Status::OK;
          }));
  Client client = NewClient();
  absl::StatusOr<ReleaseOutcome> r = client.UndoAcquire("x", "o", "abc", "jobs");
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_TRUE(r->released);
  EXPECT_EQ(seen.namespace_(), "jobs");
  EXPECT_EQ(seen.owner(), "o");
  EXPECT_EQ(seen.acquire_request_id(), "abc");
  EXPECT_TRUE(seen.request_id().empty());
  EXPECT_THAT(client.UndoAcquire("x", "o", ""), StatusIs(absl::StatusCode::kInvalidArgument));
}

TEST_F(ClientTest, EachAcquireCallHasItsOwnRequestId) {
  std::set<std::string> ids;
  EXPECT_CALL(*stub_, Acquire(_, _, _))
      .Times(2)
      .WillRepeatedly(Invoke(
          [&](grpc::ClientContext*, const v1::AcquireRequest& req, v1::AcquireResponse* resp) {
            ids.insert(req.request_id());
            Grant(req, resp);
            return grpc::Status::OK;
          }));
  Client client = NewClient();
  absl::StatusOr<Lease> a = client.Acquire("a", Ttl(absl::Seconds(10)));
  absl::StatusOr<Lease> b = client.Acquire("a", Ttl(absl::Seconds(10)));
  ASSERT_TRUE(a.ok() && b.ok());
  EXPECT_EQ(ids.size(), 2u);
}

TEST_F(ClientTest, RetriedAcquireWaitsOnlyForTheRestOfTheWait) {
  std::vector<int64_t> waits_ms;
  EXPECT_CALL(*stub_, Acquire(_, _, _))
      .Times(2)
      .WillRepeatedly(Invoke(
          [&](grpc::ClientContext*, const v1::AcquireRequest& req, v1::AcquireResponse* resp) {
            waits_ms.push_back(absl::ToInt64Milliseconds(FromProtoDuration(req.wait_timeout())));
            if (waits_ms.size() == 1) {
              std::this_thread::sleep_for(std::chrono::milliseconds(300));
              return Unavailable();
            }
            Grant(req, resp);
            return grpc::Status::OK;
          }));
  Client client = NewClient();
  AcquireOptions o = Ttl(absl::Seconds(10));
  o.wait = absl::Seconds(2);
  ASSERT_TRUE(client.Acquire("x", o).ok());
  ASSERT_EQ(waits_ms.size(), 2u);
  EXPECT_LE(waits_ms[0], 2000);
  EXPECT_LE(waits_ms[1], 1700);
}

TEST_F(ClientTest, AcquireGivesUpWithUnavailableAtTheCallersDeadline) {
  std::atomic<int> calls{0};
  ON_CALL(*stub_, Acquire(_, _, _)).WillByDefault(Invoke([&](auto*, auto&, auto*) {
    ++calls;
    return Unavailable();
  }));
  Client client = NewClient();
  AcquireOptions o = Ttl(absl::Seconds(10));
  o.timeout = absl::Milliseconds(300);
  auto start = Clock::now();
  absl::StatusOr<Lease> lease = client.Acquire("x", o);
  auto elapsed = Clock::now() - start;
  EXPECT_THAT(lease, StatusIs(absl::StatusCode::kUnavailable));
  EXPECT_GE(calls.load(), 2);
  EXPECT_LT(elapsed, std::chrono::milliseconds(1500));
}

TEST_F(ClientTest, InvalidArgumentIsNotRetried) {
  EXPECT_CALL(*stub_, Acquire(_, _, _))
      .WillOnce(Return(grpc::Status(grpc::StatusCode::INVALID_ARGUMENT, "lease_ttl: too long")));
  Client client = NewClient();
  absl::StatusOr<Lease> lease = client.Acquire("x", Ttl(absl::Hours(100)));
  EXPECT_THAT(lease, StatusIs(absl::StatusCode::kInvalidArgument));
  EXPECT_THAT(lease.status().message(), HasSubstr("lease_ttl"));
  EXPECT_THAT(lease.status().message(), HasSubstr("\"x\""));
}

TEST_F(ClientTest, NegativeOptionsAreRejectedWithoutACall) {
  EXPECT_CALL(*stub_, Acquire(_, _, _)).Times(0);
  Client client = NewClient();
  AcquireOptions o;
  o.wait = absl::Seconds(-1);
  EXPECT_THAT(client.Acquire("x", o), StatusIs(absl::StatusCode::kInvalidArgument));
  EXPECT_THAT(client.Acquire("x", Ttl(absl::Seconds(-1))),
              StatusIs(absl::StatusCode::kInvalidArgument));
}

TEST_F(ClientTest, NotAcquiredIsDeadlineExceededAndNamesTheHolder) {
  EXPECT_CALL(*stub_, Acquire(_, _, _))
      .WillOnce(Invoke(
          [](grpc::ClientContext*, const v1::AcquireRequest& req, v1::AcquireResponse* resp) {
            resp->set_acquired(false);
            resp->set_owner(req.owner());
            resp->mutable_current()->set_name(req.name());
            resp->mutable_current()->set_held(true);
            resp->mutable_current()->set_owner("someone-else");
            resp->mutable_current()->set_fencing_token(9);
            return grpc::Status::OK;
          }));
  Client client = NewClient();
  absl::StatusOr<Lease> lease = client.TryAcquire("x");
  ASSERT_THAT(lease, StatusIs(absl::StatusCode::kDeadlineExceeded));
  EXPECT_THAT(lease.status().message(), HasSubstr("someone-else"));
  std::optional<LockInfo> holder = CurrentHolder(lease.status());
  ASSERT_TRUE(holder.has_value());
  EXPECT_EQ(holder->owner, "someone-else");
  EXPECT_EQ(holder->fencing_token, 9u);
  EXPECT_FALSE(CurrentHolder(absl::UnavailableError("x")).has_value());
}

TEST_F(ClientTest, NoReplyAfterTheWaitEndedIsUnavailable) {
  ON_CALL(*stub_, Acquire(_, _, _)).WillByDefault(Invoke([](auto*, auto&, auto*) {
    return grpc::Status(grpc::StatusCode::DEADLINE_EXCEEDED, "Deadline Exceeded");
  }));
  Client client = NewClient();
  EXPECT_THAT(client.TryAcquire("x"), StatusIs(absl::StatusCode::kUnavailable));
  AcquireOptions o;
  o.wait = absl::Seconds(10);
  o.timeout = absl::Seconds(1);  // ends inside the wait: just not acquired in time
  EXPECT_THAT(client.Acquire("x", o), StatusIs(absl::StatusCode::kDeadlineExceeded));
}

TEST_F(ClientTest, ValidityIsMeasuredFromTheSendTimeNotTheReply) {
  ON_CALL(*stub_, Acquire(_, _, _))
      .WillByDefault(Invoke(
          [](grpc::ClientContext*, const v1::AcquireRequest& req, v1::AcquireResponse* resp) {
            std::this_thread::sleep_for(std::chrono::milliseconds(400));  // a slow reply
            Grant(req, resp);
            return grpc::Status::OK;
          }));
  Client client = NewClient();
  auto before_send = Clock::now();
  absl::StatusOr<Lease> lease = client.Acquire("x", Ttl(absl::Seconds(3), false));
  auto after_reply = Clock::now();
  ASSERT_TRUE(lease.ok()) << lease.status();
  absl::Duration drift = absl::Seconds(3) * 0.01 + absl::Milliseconds(2);
  auto expect_max = before_send +
                    std::chrono::milliseconds(absl::ToInt64Milliseconds(absl::Seconds(3) - drift)) +
                    std::chrono::milliseconds(50);
  EXPECT_LE(lease->valid_until(), expect_max);
  // Measured from the reply it would be at least after_reply + ttl - drift.
  EXPECT_LT(lease->valid_until(),
            after_reply + std::chrono::milliseconds(
                              absl::ToInt64Milliseconds(absl::Seconds(3) - drift) - 300));
}

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
}

}  // namespace
}  // namespace lockd
