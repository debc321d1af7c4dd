// Unit tests of lockd::Client's Acquire against MockLockServiceStub:
// request contents, retries with one request_id, undo of unanswered acquires,
// deadlines and option checks. Lease renewal, release and the rest are in
// client_lease_test.cc. Timings use real time with wide margins.

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
#include "clients/cpp/src/client_test_fixture.h"
#include "gmock/gmock.h"
#include "google/rpc/error_details.pb.h"
#include "google/rpc/status.pb.h"
#include "gtest/gtest.h"
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

TEST_F(ClientTest, StubWithoutASessionStreamFallsBackToUnary) {
  options_.use_sessions = true;  // the mock's Session returns no stream
  EXPECT_CALL(*stub_, Acquire(_, _, _)).Times(2);
  Client client = NewClient();
  for (const char* name : {"a", "b"}) {
    absl::StatusOr<Lease> lease = client.Acquire(name, Ttl(absl::Seconds(10)));
    ASSERT_TRUE(lease.ok()) << lease.status();
    EXPECT_LE(lease->validity_remaining(), absl::Seconds(10));  // not a session hold
  }
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
  EXPECT_EQ(undo.fencing_token(), 0u);  // no grant was seen: any hold this attempt added
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
      .Times(2)
      .WillRepeatedly(Invoke(
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
  EXPECT_EQ(seen.fencing_token(), 0u);
  ASSERT_TRUE(client.UndoAcquire("x", "o", "abc", "jobs", 12).ok());
  EXPECT_EQ(seen.fencing_token(), 12u);
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

}  // namespace
}  // namespace lockd
