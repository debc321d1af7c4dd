#include "tests/support/status_matchers.h"

#include "absl/strings/str_cat.h"
#include "google/rpc/error_details.pb.h"
#include "google/rpc/status.pb.h"

namespace lockd::testing::status_internal {
namespace {

bool HasLockNotHeldInfo(const grpc::Status& s) {
  google::rpc::Status details;
  if (s.error_details().empty() || !details.ParseFromString(s.error_details())) return false;
  for (const google::protobuf::Any& any : details.details()) {
    google::rpc::ErrorInfo info;
    if (any.UnpackTo(&info) && info.reason() == kLockNotHeldReason && info.domain() == "lockd") {
      return true;
    }
  }
  return false;
}

}  // namespace

StatusView ViewOf(const absl::Status& s) {
  return {static_cast<int>(s.code()), std::string(s.message()), ::lockd::IsLockNotHeld(s)};
}

StatusView ViewOf(const grpc::Status& s) {
  return {static_cast<int>(s.error_code()), s.error_message(),
          s.error_code() == grpc::StatusCode::FAILED_PRECONDITION && HasLockNotHeldInfo(s)};
}

std::string CodeName(int code) {
  return absl::StrCat(absl::StatusCodeToString(static_cast<absl::StatusCode>(code)), " (", code,
                      ")");
}

void StatusIsMatcher::DescribeTo(std::ostream* os) const {
  *os << "has status " << CodeName(code_) << " and a message that ";
  message_.DescribeTo(os);
}

void StatusIsMatcher::DescribeNegationTo(std::ostream* os) const {
  *os << "has a status other than " << CodeName(code_) << " or a message that ";
  message_.DescribeNegationTo(os);
}

void IsLockNotHeldMatcher::DescribeTo(std::ostream* os) const {
  *os << "is FAILED_PRECONDITION with reason LOCK_NOT_HELD";
}

void IsLockNotHeldMatcher::DescribeNegationTo(std::ostream* os) const {
  *os << "is not FAILED_PRECONDITION with reason LOCK_NOT_HELD";
}

}  // namespace lockd::testing::status_internal
