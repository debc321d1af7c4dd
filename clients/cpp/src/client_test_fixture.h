// The fixture shared by the lockd::Client unit tests (client_test.cc,
// client_lease_test.cc): a Client over a MockLockServiceStub whose Acquire,
// Renew and Release succeed unless a test says otherwise, with short
// backoffs. These test the unary path (ClientOptions::use_sessions = false),
// except session_abandon_test.cc and session_batch_test.cc, which script the
// Session stream (ScriptedSessionTest, scripted_session_stream.h); the
// Session path is tested against real lockd processes in
// tests/integration/clients/client_session_test.cc. Test-only; not installed.

#ifndef LOCKD_CLIENTS_CPP_SRC_CLIENT_TEST_FIXTURE_H_
#define LOCKD_CLIENTS_CPP_SRC_CLIENT_TEST_FIXTURE_H_

#include <memory>

#include "gmock/gmock.h"
#include "google/rpc/error_details.pb.h"
#include "google/rpc/status.pb.h"
#include "gtest/gtest.h"
#include "lockd/client.h"
// Generated without an include guard: include it only through this header.
#include "lockd/v1/lock_mock.grpc.pb.h"
#include "protos/proto_duration.h"

namespace lockd {

// A FAILED_PRECONDITION carrying ErrorInfo reason LOCK_NOT_HELD, as the
// server sends it.
inline grpc::Status LockNotHeld() {
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

inline grpc::Status Unavailable() { return grpc::Status(grpc::StatusCode::UNAVAILABLE, "down"); }

// Fills a granted AcquireResponse.
inline void Grant(const v1::AcquireRequest& req, v1::AcquireResponse* resp, uint64_t token = 7) {
  resp->set_acquired(true);
  resp->set_owner(req.owner());
  resp->set_fencing_token(token);
  resp->set_hold_count(1);
  absl::Duration ttl = req.has_lease_ttl() ? FromProtoDuration(req.lease_ttl()) : absl::Seconds(30);
  SetProtoDuration(ttl, resp->mutable_lease_ttl());
}

// An Acquire action that records the request in *seen and grants it with
// `token`.
inline auto RecordAndGrant(v1::AcquireRequest* seen, uint64_t token = 7) {
  return ::testing::Invoke([seen, token](grpc::ClientContext*, const v1::AcquireRequest& req,
                                         v1::AcquireResponse* resp) {
    *seen = req;
    Grant(req, resp, token);
    return grpc::Status::OK;
  });
}

class ClientTest : public ::testing::Test {
 protected:
  ClientTest() : stub_(std::make_shared<::testing::NiceMock<v1::MockLockServiceStub>>()) {
    options_.owner = "test-owner";
    options_.use_sessions = false;
    options_.initial_backoff = absl::Milliseconds(5);
    options_.max_backoff = absl::Milliseconds(20);
    options_.rpc_timeout = absl::Seconds(2);
    options_.release_timeout = absl::Milliseconds(300);
    // Renewals and releases succeed unless a test says otherwise.
    ON_CALL(*stub_, Renew(::testing::_, ::testing::_, ::testing::_))
        .WillByDefault(::testing::Invoke(
            [](grpc::ClientContext*, const v1::RenewRequest& req, v1::RenewResponse* resp) {
              resp->mutable_lease_ttl()->CopyFrom(req.lease_ttl());
              resp->set_fencing_token(7);
              return grpc::Status::OK;
            }));
    ON_CALL(*stub_, Release(::testing::_, ::testing::_, ::testing::_))
        .WillByDefault(::testing::Invoke(
            [](grpc::ClientContext*, const v1::ReleaseRequest&, v1::ReleaseResponse* resp) {
              resp->set_released(true);
              return grpc::Status::OK;
            }));
    ON_CALL(*stub_, Acquire(::testing::_, ::testing::_, ::testing::_))
        .WillByDefault(::testing::Invoke(
            [](grpc::ClientContext*, const v1::AcquireRequest& req, v1::AcquireResponse* resp) {
              Grant(req, resp);
              return grpc::Status::OK;
            }));
  }

  Client NewClient() { return Client(stub_, options_); }

  std::shared_ptr<::testing::NiceMock<v1::MockLockServiceStub>> stub_;
  ClientOptions options_;
};

inline AcquireOptions Ttl(absl::Duration ttl, bool auto_renew = true) {
  AcquireOptions o;
  o.ttl = ttl;
  o.auto_renew = auto_renew;
  return o;
}

}  // namespace lockd

#endif  // LOCKD_CLIENTS_CPP_SRC_CLIENT_TEST_FIXTURE_H_
