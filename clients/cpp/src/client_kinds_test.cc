// Unit tests of shared locks, semaphores and AcquireAll in lockd::Client
// against MockLockServiceStub (unary path): what each call sends, the
// Leases it returns, the reasons of the server's refusals, and the undo of
// an AcquireAll whose outcome is unknown on every one of its locks. The
// same behaviour end to end: tests/integration/clients/.

#include <map>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "clients/cpp/src/client_test_fixture.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "lockd/client.h"
#include "tests/support/status_matchers.h"

namespace lockd {
namespace {

using ::lockd::testing::StatusIs;
using ::testing::_;
using ::testing::HasSubstr;
using ::testing::Invoke;
using ::testing::UnorderedElementsAre;

// A FAILED_PRECONDITION with a lockd ErrorInfo `reason` and `metadata`, as
// the server sends it.
grpc::Status Refused(const std::string& reason,
                     const std::map<std::string, std::string>& metadata) {
  google::rpc::ErrorInfo info;
  info.set_reason(reason);
  info.set_domain("lockd");
  for (const auto& [k, v] : metadata) (*info.mutable_metadata())[k] = v;
  google::rpc::Status details;
  details.set_code(grpc::StatusCode::FAILED_PRECONDITION);
  details.set_message("refused");
  details.add_details()->PackFrom(info);
  return grpc::Status(grpc::StatusCode::FAILED_PRECONDITION, "refused",
                      details.SerializeAsString());
}

TEST_F(ClientTest, AcquireSharedSendsModeShared) {
  v1::AcquireRequest seen;
  EXPECT_CALL(*stub_, Acquire(_, _, _)).WillOnce(RecordAndGrant(&seen, 9));
  Client client = NewClient();
  absl::StatusOr<Lease> lease = client.AcquireShared("catalog", Ttl(absl::Seconds(10)));
  ASSERT_TRUE(lease.ok()) << lease.status();
  EXPECT_EQ(seen.mode(), v1::LOCK_MODE_SHARED);
  EXPECT_EQ(seen.limit(), 0u);
  EXPECT_EQ(lease->mode(), HoldMode::kShared);
  EXPECT_EQ(lease->fencing_token(), 9u);
  EXPECT_TRUE(lease->valid());
}

TEST_F(ClientTest, ExclusiveAcquireSendsNoKind) {
  v1::AcquireRequest seen;
  EXPECT_CALL(*stub_, Acquire(_, _, _)).WillOnce(RecordAndGrant(&seen));
  Client client = NewClient();
  absl::StatusOr<Lease> lease = client.Acquire("x", Ttl(absl::Seconds(10)));
  ASSERT_TRUE(lease.ok()) << lease.status();
  EXPECT_EQ(seen.mode(), v1::LOCK_MODE_EXCLUSIVE);
  EXPECT_EQ(seen.limit(), 0u);
  EXPECT_EQ(seen.permits(), 0u);
  EXPECT_EQ(lease->mode(), HoldMode::kExclusive);
  EXPECT_EQ(lease->limit(), 0u);
}

TEST_F(ClientTest, SemaphoreSendsLimitAndPermits) {
  v1::AcquireRequest seen;
  EXPECT_CALL(*stub_, Acquire(_, _, _)).WillOnce(RecordAndGrant(&seen));
  Client client = NewClient();
  Semaphore api(client, "api", 4, "jobs");
  absl::StatusOr<Lease> lease = api.Acquire(3, Ttl(absl::Seconds(10)));
  ASSERT_TRUE(lease.ok()) << lease.status();
  EXPECT_EQ(seen.namespace_(), "jobs");
  EXPECT_EQ(seen.name(), "api");
  EXPECT_EQ(seen.limit(), 4u);
  EXPECT_EQ(seen.permits(), 3u);
  EXPECT_EQ(lease->limit(), 4u);
  EXPECT_EQ(lease->permits(), 3u);
  EXPECT_EQ(lease->ns(), "jobs");
}

TEST_F(ClientTest, SemaphoreRejectsPermitsOutOfRangeWithoutSending) {
  EXPECT_CALL(*stub_, Acquire(_, _, _)).Times(0);
  Client client = NewClient();
  EXPECT_THAT(Semaphore(client, "api", 4).Acquire(5),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("permits")));
  EXPECT_THAT(Semaphore(client, "api", 4).Acquire(0),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("permits")));
  EXPECT_THAT(Semaphore(client, "api", 0).Acquire(1),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("limit")));
  EXPECT_THAT(Semaphore(client, "api", 10001).Acquire(1),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("limit")));
}

TEST_F(ClientTest, KindRefusalsCarryTheirReasonAndAreNotLockLost) {
  EXPECT_CALL(*stub_, Acquire(_, _, _))
      .WillOnce(Invoke([](auto*, auto&, auto*) {
        return Refused("LOCK_KIND_MISMATCH", {{"kind", "semaphore"}, {"limit", "4"}});
      }))
      .WillOnce(Invoke([](auto*, auto&, auto*) { return Refused("UPGRADE_WOULD_BLOCK", {}); }))
      .WillOnce(Invoke([](auto*, auto&, auto*) { return Refused("PERMITS_MISMATCH", {}); }));
  EXPECT_CALL(*stub_, Release(_, _, _)).Times(0);  // a definite answer: nothing to undo
  Client client = NewClient();
  absl::StatusOr<Lease> mismatch = client.AcquireShared("api");
  EXPECT_THAT(mismatch, StatusIs(absl::StatusCode::kFailedPrecondition,
                                 HasSubstr("[LOCK_KIND_MISMATCH kind=semaphore limit=4]")));
  EXPECT_EQ(ErrorReason(mismatch.status()), "LOCK_KIND_MISMATCH");
  EXPECT_FALSE(IsLockLost(mismatch.status()));
  absl::StatusOr<Lease> upgrade = client.Acquire("catalog");
  EXPECT_THAT(upgrade, StatusIs(absl::StatusCode::kFailedPrecondition));
  EXPECT_EQ(ErrorReason(upgrade.status()), "UPGRADE_WOULD_BLOCK");
  absl::StatusOr<Lease> permits = Semaphore(client, "api", 4).Acquire(2);
  EXPECT_EQ(ErrorReason(permits.status()), "PERMITS_MISMATCH");
  EXPECT_EQ(ErrorReason(absl::UnavailableError("x")), std::nullopt);
}

// Grants every lock of an AcquireAll, tokens 100, 101, ...
void GrantAll(const v1::AcquireAllRequest& req, v1::AcquireAllResponse* resp) {
  resp->set_acquired(true);
  resp->set_owner(req.owner());
  for (int i = 0; i < req.locks_size(); ++i) {
    v1::AcquireResponse* r = resp->add_locks();
    r->set_acquired(true);
    r->set_owner(req.owner());
    r->set_fencing_token(100 + i);
    r->set_hold_count(1);
    SetProtoDuration(FromProtoDuration(req.lease_ttl()), r->mutable_lease_ttl());
  }
}

TEST_F(ClientTest, AcquireAllSendsEveryLockAndReturnsALeasePerLockInOrder) {
  v1::AcquireAllRequest seen;
  EXPECT_CALL(*stub_, AcquireAll(_, _, _))
      .WillOnce(Invoke([&](grpc::ClientContext*, const v1::AcquireAllRequest& req,
                           v1::AcquireAllResponse* resp) {
        seen = req;
        GrantAll(req, resp);
        return grpc::Status::OK;
      }));
  EXPECT_CALL(*stub_, Acquire(_, _, _)).Times(0);
  Client client = NewClient();
  std::vector<LockSpec> locks(3);
  locks[0].name = "acct/2";
  locks[1].name = "catalog";
  locks[1].mode = HoldMode::kShared;
  locks[2].name = "api";
  locks[2].ns = "jobs";
  locks[2].limit = 4;
  locks[2].permits = 2;
  AcquireOptions o = Ttl(absl::Seconds(10));
  o.wait = absl::Seconds(5);
  absl::StatusOr<LeaseSet> held = client.AcquireAll(locks, o);
  ASSERT_TRUE(held.ok()) << held.status();
  ASSERT_EQ(seen.locks_size(), 3);
  EXPECT_EQ(seen.owner(), "test-owner");
  EXPECT_EQ(seen.lease_ttl().seconds(), 10);
  EXPECT_GT(seen.wait_timeout().seconds(), 3);
  EXPECT_EQ(seen.request_id().size(), 32u);
  EXPECT_EQ(seen.locks(0).namespace_(), "default");
  EXPECT_EQ(seen.locks(1).mode(), v1::LOCK_MODE_SHARED);
  EXPECT_EQ(seen.locks(2).namespace_(), "jobs");
  EXPECT_EQ(seen.locks(2).limit(), 4u);
  EXPECT_EQ(seen.locks(2).permits(), 2u);
  ASSERT_EQ(held->size(), 3u);
  EXPECT_EQ((*held)[0].name(), "acct/2");
  EXPECT_EQ((*held)[0].fencing_token(), 100u);
  EXPECT_EQ((*held)[1].mode(), HoldMode::kShared);
  EXPECT_EQ((*held)[2].ns(), "jobs");
  EXPECT_EQ((*held)[2].permits(), 2u);
  EXPECT_TRUE(held->valid());
  // Each lock is released on its own, with its own token.
  std::vector<std::string> released;
  EXPECT_CALL(*stub_, Release(_, _, _))
      .Times(3)
      .WillRepeatedly(Invoke(
          [&](grpc::ClientContext*, const v1::ReleaseRequest& req, v1::ReleaseResponse* resp) {
            released.push_back(absl::StrCat(req.name(), "@", req.fencing_token()));
            resp->set_released(true);
            return grpc::Status::OK;
          }));
  EXPECT_TRUE(held->Release().ok());
  EXPECT_THAT(released, UnorderedElementsAre("acct/2@100", "catalog@101", "api@102"));
}

TEST_F(ClientTest, AcquireAllNotAcquiredNamesTheBlockingLock) {
  EXPECT_CALL(*stub_, AcquireAll(_, _, _))
      .WillOnce(Invoke(
          [](grpc::ClientContext*, const v1::AcquireAllRequest&, v1::AcquireAllResponse* resp) {
            resp->set_acquired(false);
            v1::LockInfo* b = resp->mutable_blocked_on();
            b->set_namespace_("default");
            b->set_name("b");
            b->set_held(true);
            b->set_owner("other");
            b->set_fencing_token(5);
            return grpc::Status::OK;
          }));
  Client client = NewClient();
  std::vector<LockSpec> locks(2);
  locks[0].name = "a";
  locks[1].name = "b";
  absl::StatusOr<LeaseSet> held = client.AcquireAll(locks);
  EXPECT_THAT(held, StatusIs(absl::StatusCode::kDeadlineExceeded, HasSubstr("\"b\"")));
  std::optional<LockInfo> holder = CurrentHolder(held.status());
  ASSERT_TRUE(holder.has_value());
  EXPECT_EQ(holder->name, "b");
  EXPECT_EQ(holder->owner, "other");
}

TEST_F(ClientTest, AcquireAllWithAnUnknownOutcomeIsUndoneOnEveryLock) {
  std::vector<std::string> ids;
  EXPECT_CALL(*stub_, AcquireAll(_, _, _))
      .Times(2)
      .WillRepeatedly(Invoke([&](grpc::ClientContext*, const v1::AcquireAllRequest& req,
                                 v1::AcquireAllResponse* resp) {
        ids.push_back(req.request_id());
        if (ids.size() == 1) return Unavailable();
        GrantAll(req, resp);
        return grpc::Status::OK;
      }));
  std::vector<std::string> undone;
  EXPECT_CALL(*stub_, Release(_, _, _))
      .Times(2)
      .WillRepeatedly(Invoke(
          [&](grpc::ClientContext*, const v1::ReleaseRequest& req, v1::ReleaseResponse* resp) {
            EXPECT_EQ(req.owner(), "test-owner");
            undone.push_back(absl::StrCat(req.name(), " ", req.acquire_request_id()));
            return grpc::Status::OK;
          }));
  Client client = NewClient();
  std::vector<LockSpec> locks(2);
  locks[0].name = "a";
  locks[1].name = "b";
  absl::StatusOr<LeaseSet> held = client.AcquireAll(locks, Ttl(absl::Seconds(10), false));
  ASSERT_TRUE(held.ok()) << held.status();
  ASSERT_EQ(ids.size(), 2u);
  EXPECT_NE(ids[0], ids[1]);  // the undo was confirmed: a new request_id
  EXPECT_THAT(undone, UnorderedElementsAre("a " + ids[0], "b " + ids[0]));
  for (Lease& lease : *held) lease.Detach();
}

TEST_F(ClientTest, DescribeReturnsModeLimitAndHolders) {
  EXPECT_CALL(*stub_, Describe(_, _, _))
      .WillOnce(Invoke([](grpc::ClientContext*, const v1::DescribeRequest&, v1::LockInfo* info) {
        info->set_name("api");
        info->set_held(true);
        info->set_limit(4);
        for (int i = 0; i < 2; ++i) {
          v1::Holder* h = info->add_holders();
          h->set_owner(absl::StrCat("o", i));
          h->set_hold_count(1);
          h->set_permits(2);
          h->set_fencing_token(10 + i);
          SetProtoDuration(absl::Seconds(5), h->mutable_ttl_remaining());
        }
        return grpc::Status::OK;
      }));
  Client client = NewClient();
  absl::StatusOr<LockInfo> info = client.Describe("api");
  ASSERT_TRUE(info.ok()) << info.status();
  EXPECT_EQ(info->limit, 4u);
  ASSERT_EQ(info->holders.size(), 2u);
  EXPECT_EQ(info->holders[1].owner, "o1");
  EXPECT_EQ(info->holders[1].permits, 2u);
  EXPECT_EQ(info->holders[1].fencing_token, 11u);
  EXPECT_EQ(info->holders[1].ttl_remaining, absl::Seconds(5));
}

}  // namespace
}  // namespace lockd
