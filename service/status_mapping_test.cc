#include "service/status_mapping.h"

#include "backends/backend.h"
#include "gmock/gmock.h"
#include "google/rpc/error_details.pb.h"
#include "google/rpc/status.pb.h"
#include "gtest/gtest.h"
#include "tests/support/status_matchers.h"

namespace lockd {
namespace {

using ::lockd::testing::StatusIs;
using ::testing::HasSubstr;

TEST(StatusMappingTest, LockNotHeldCarriesErrorInfoInStandardDetails) {
  grpc::Status s = ToGrpcStatus(LockNotHeldError(LockKey{"default", "x"}, "held by another owner"));
  EXPECT_THAT(s, StatusIs(grpc::StatusCode::FAILED_PRECONDITION));
  google::rpc::Status details;
  ASSERT_TRUE(details.ParseFromString(s.error_details()));
  EXPECT_EQ(details.code(), 9);
  EXPECT_EQ(details.message(), s.error_message());
  ASSERT_EQ(details.details_size(), 1);
  EXPECT_EQ(details.details(0).type_url(), "type.googleapis.com/google.rpc.ErrorInfo");
  google::rpc::ErrorInfo info;
  ASSERT_TRUE(details.details(0).UnpackTo(&info));
  EXPECT_EQ(info.reason(), "LOCK_NOT_HELD");
  EXPECT_EQ(info.domain(), "lockd");
}

TEST(StatusMappingTest, OtherFailedPreconditionsCarryNoLockNotHeldDetails) {
  grpc::Status s = ToGrpcStatus(absl::FailedPreconditionError("something else"));
  EXPECT_THAT(s, StatusIs(grpc::StatusCode::FAILED_PRECONDITION));
  EXPECT_TRUE(s.error_details().empty());
}

TEST(StatusMappingTest, CodesAndMessagesArePreserved) {
  struct Case {
    absl::Status in;
    grpc::StatusCode out;
  } cases[] = {
      {absl::OkStatus(), grpc::StatusCode::OK},
      {absl::InvalidArgumentError("name: bad"), grpc::StatusCode::INVALID_ARGUMENT},
      {absl::UnavailableError("redis down"), grpc::StatusCode::UNAVAILABLE},
      {absl::ResourceExhaustedError("full"), grpc::StatusCode::RESOURCE_EXHAUSTED},
      {absl::CancelledError("gone"), grpc::StatusCode::CANCELLED},
      {absl::InternalError("bug"), grpc::StatusCode::INTERNAL},
  };
  for (const Case& c : cases) {
    grpc::Status s = ToGrpcStatus(c.in);
    EXPECT_EQ(s.error_code(), c.out);
    EXPECT_EQ(s.error_message(), std::string(c.in.message()));
  }
}

TEST(StatusMappingTest, BackendRefusingLockdsCredentialsIsUnavailableNotUnauthenticated) {
  absl::Status refused = absl::UnauthenticatedError(
      "mysql connect: Access denied for user 'lockd'@'localhost' (error 1045)");
  grpc::Status s = BackendToGrpcStatus(refused);
  EXPECT_THAT(s, StatusIs(grpc::StatusCode::UNAVAILABLE));
  EXPECT_THAT(s.error_message(), HasSubstr("the backend refused lockd's credentials"));
  EXPECT_THAT(s.error_message(), HasSubstr("Access denied for user 'lockd'"));
  EXPECT_TRUE(s.error_details().empty());
}

TEST(StatusMappingTest, CallersOwnBadCredentialsStayUnauthenticated) {
  grpc::Status s = ToGrpcStatus(absl::UnauthenticatedError("bearer token not recognised"));
  EXPECT_THAT(s, StatusIs(grpc::StatusCode::UNAUTHENTICATED));
  EXPECT_EQ(s.error_message(), "bearer token not recognised");
}

TEST(StatusMappingTest, BackendStatusesOtherThanUnauthenticatedMapAsToGrpcStatus) {
  grpc::Status s = BackendToGrpcStatus(LockNotHeldError(LockKey{"default", "x"}, "expired"));
  EXPECT_THAT(s, StatusIs(grpc::StatusCode::FAILED_PRECONDITION));
  EXPECT_FALSE(s.error_details().empty());
  EXPECT_THAT(BackendToGrpcStatus(absl::UnavailableError("redis down")),
              StatusIs(grpc::StatusCode::UNAVAILABLE));
  EXPECT_THAT(BackendToGrpcStatus(absl::OkStatus()), StatusIs(grpc::StatusCode::OK));
}

// The ErrorInfo of `s`'s details (reason "" when there is none).
google::rpc::ErrorInfo InfoOf(const grpc::Status& s) {
  google::rpc::ErrorInfo info;
  google::rpc::Status details;
  if (details.ParseFromString(s.error_details()) && details.details_size() == 1) {
    details.details(0).UnpackTo(&info);
  }
  return info;
}

TEST(StatusMappingTest, KindMismatchCarriesTheHeldKindAndLimit) {
  grpc::Status lock = BackendToGrpcStatus(LockKindMismatchError(LockKey{"default", "x"}, 0));
  EXPECT_THAT(lock, StatusIs(grpc::StatusCode::FAILED_PRECONDITION));
  google::rpc::ErrorInfo info = InfoOf(lock);
  EXPECT_EQ(info.reason(), "LOCK_KIND_MISMATCH");
  EXPECT_EQ(info.domain(), "lockd");
  EXPECT_EQ(info.metadata().at("kind"), "lock");
  EXPECT_FALSE(info.metadata().contains("limit"));

  info = InfoOf(BackendToGrpcStatus(LockKindMismatchError(LockKey{"default", "x"}, 4)));
  EXPECT_EQ(info.reason(), "LOCK_KIND_MISMATCH");
  EXPECT_EQ(info.metadata().at("kind"), "semaphore");
  EXPECT_EQ(info.metadata().at("limit"), "4");
}

TEST(StatusMappingTest, UpgradeAndPermitsErrorsCarryTheirReasons) {
  grpc::Status upgrade = BackendToGrpcStatus(UpgradeWouldBlockError(LockKey{"default", "x"}));
  EXPECT_THAT(upgrade, StatusIs(grpc::StatusCode::FAILED_PRECONDITION));
  EXPECT_EQ(InfoOf(upgrade).reason(), "UPGRADE_WOULD_BLOCK");
  grpc::Status permits = BackendToGrpcStatus(PermitsMismatchError(LockKey{"default", "x"}, 2, 3));
  EXPECT_THAT(permits, StatusIs(grpc::StatusCode::FAILED_PRECONDITION));
  EXPECT_EQ(InfoOf(permits).reason(), "PERMITS_MISMATCH");
}

}  // namespace
}  // namespace lockd
