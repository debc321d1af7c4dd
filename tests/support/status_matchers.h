// gMock matchers for status values, in the style of absl's status matchers:
//
//   EXPECT_THAT(backend_result, StatusIs(absl::StatusCode::kUnavailable));
//   EXPECT_THAT(rpc_status, StatusIs(grpc::StatusCode::INVALID_ARGUMENT,
//                                    HasSubstr("lease_ttl")));
//   EXPECT_THAT(release_status, IsLockNotHeld());
//
// Each matcher takes an absl::Status, an absl::StatusOr<T> or a grpc::Status
// (absl and gRPC share the canonical code numbers, so either enum works with
// either status type). On a mismatch gMock prints the expected code and the
// actual code and message.

#ifndef LOCKD_TESTS_SUPPORT_STATUS_MATCHERS_H_
#define LOCKD_TESTS_SUPPORT_STATUS_MATCHERS_H_

#include <ostream>
#include <string>
#include <utility>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "backends/backend.h"
#include "gmock/gmock.h"
#include "grpcpp/support/status.h"

namespace lockd::testing {

namespace status_internal {

// A status reduced to what the matchers look at.
struct StatusView {
  int code = 0;
  std::string message;
  bool lock_not_held = false;  // LOCK_NOT_HELD as docs/api.md defines it
};

StatusView ViewOf(const absl::Status& s);
StatusView ViewOf(const grpc::Status& s);
template <typename T>
StatusView ViewOf(const absl::StatusOr<T>& s) {
  return ViewOf(s.status());
}

// "FAILED_PRECONDITION (9)".
std::string CodeName(int code);

class StatusIsMatcher {
 public:
  StatusIsMatcher(int code, ::testing::Matcher<const std::string&> message)
      : code_(code), message_(std::move(message)) {}

  template <typename S>
  bool MatchAndExplain(const S& status, ::testing::MatchResultListener* listener) const {
    StatusView v = ViewOf(status);
    *listener << "whose status is " << CodeName(v.code) << ": \"" << v.message << "\"";
    if (v.code != code_) return false;
    ::testing::StringMatchResultListener inner;
    if (message_.MatchAndExplain(v.message, &inner)) return true;
    if (!inner.str().empty()) *listener << ", and the message " << inner.str();
    return false;
  }
  void DescribeTo(std::ostream* os) const;
  void DescribeNegationTo(std::ostream* os) const;

 private:
  int code_;
  ::testing::Matcher<const std::string&> message_;
};

class IsLockNotHeldMatcher {
 public:
  template <typename S>
  bool MatchAndExplain(const S& status, ::testing::MatchResultListener* listener) const {
    StatusView v = ViewOf(status);
    *listener << "whose status is " << CodeName(v.code) << ": \"" << v.message << "\""
              << (v.code == static_cast<int>(absl::StatusCode::kFailedPrecondition) &&
                          !v.lock_not_held
                      ? " without the LOCK_NOT_HELD reason"
                      : "");
    return v.lock_not_held;
  }
  void DescribeTo(std::ostream* os) const;
  void DescribeNegationTo(std::ostream* os) const;
};

}  // namespace status_internal

// Matches a status with `code` (absl::StatusCode or grpc::StatusCode) whose
// message matches `message` (any message if omitted).
template <typename Code>
::testing::PolymorphicMatcher<status_internal::StatusIsMatcher> StatusIs(
    Code code, ::testing::Matcher<const std::string&> message = ::testing::_) {
  return ::testing::MakePolymorphicMatcher(
      status_internal::StatusIsMatcher(static_cast<int>(code), std::move(message)));
}

// Matches LOCK_NOT_HELD (docs/api.md "Errors"): FAILED_PRECONDITION carrying the
// reason LOCK_NOT_HELD, as the lockd::LockNotHeldError payload on an
// absl::Status or as google.rpc.ErrorInfo{reason: "LOCK_NOT_HELD", domain:
// "lockd"} in a grpc::Status's details.
inline ::testing::PolymorphicMatcher<status_internal::IsLockNotHeldMatcher> IsLockNotHeld() {
  return ::testing::MakePolymorphicMatcher(status_internal::IsLockNotHeldMatcher());
}

// The backend-level predicate, so that `IsLockNotHeld(status)` still names
// it inside this namespace.
using ::lockd::IsLockNotHeld;

}  // namespace lockd::testing

#endif  // LOCKD_TESTS_SUPPORT_STATUS_MATCHERS_H_
