#include "backends/mysql/mysql_client.h"

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/support/status_matchers.h"

namespace lockd {
namespace {

using ::lockd::testing::StatusIs;
using ::testing::HasSubstr;

TEST(MysqlErrorTest, ConnectionLossIsUnavailable) {
  for (unsigned code : {2002u, 2003u, 2006u, 2013u, 2055u, 1053u, 1927u, 5014u}) {
    absl::Status s = MysqlErrorFromCode("acquire of lock \"a\"", code, "gone");
    EXPECT_THAT(s, StatusIs(absl::StatusCode::kUnavailable)) << code;
    EXPECT_TRUE(IsConnectionError(code)) << code;
  }
}

TEST(MysqlErrorTest, LockConflictsAreUnavailableAndRetryableButKeepTheConnection) {
  for (unsigned code : {kErLockDeadlock, kErLockWaitTimeout}) {
    EXPECT_THAT(MysqlErrorFromCode("x", code, "m"), StatusIs(absl::StatusCode::kUnavailable));
    EXPECT_TRUE(IsRetryableTransactionError(code));
    EXPECT_FALSE(IsConnectionError(code));
  }
  EXPECT_FALSE(IsRetryableTransactionError(kErDupEntry));
}

TEST(MysqlErrorTest, ReadOnlyServerIsUnavailable) {
  EXPECT_THAT(MysqlErrorFromCode("x", 1290, "read-only"), StatusIs(absl::StatusCode::kUnavailable));
  EXPECT_THAT(MysqlErrorFromCode("x", 1836, "read-only"), StatusIs(absl::StatusCode::kUnavailable));
}

TEST(MysqlErrorTest, RefusedCredentialsAreUnauthenticated) {
  EXPECT_THAT(MysqlErrorFromCode("connect", 1045, "Access denied"),
              StatusIs(absl::StatusCode::kUnauthenticated));
}

TEST(MysqlErrorTest, MissingPrivilegeOrDatabaseIsFailedPrecondition) {
  EXPECT_THAT(MysqlErrorFromCode("x", 1142, "denied"),
              StatusIs(absl::StatusCode::kFailedPrecondition));
  EXPECT_THAT(MysqlErrorFromCode("x", 1049, "Unknown database"),
              StatusIs(absl::StatusCode::kFailedPrecondition));
}

TEST(MysqlErrorTest, OtherErrorsAreInternalAndNameContextAndCode) {
  absl::Status s = MysqlErrorFromCode("renew of lock \"a\"", 1146, "Table doesn't exist");
  EXPECT_THAT(s, StatusIs(absl::StatusCode::kInternal));
  EXPECT_THAT(s.message(), HasSubstr("renew of lock \"a\""));
  EXPECT_THAT(s.message(), HasSubstr("Table doesn't exist"));
  EXPECT_THAT(s.message(), HasSubstr("1146"));
  EXPECT_FALSE(IsConnectionError(1146));
}

TEST(SqlBytesTest, HexLiteralRoundTripsAnyBytes) {
  EXPECT_EQ(SqlBytes(""), "X''");
  EXPECT_EQ(SqlBytes("ab"), "X'6162'");
  EXPECT_EQ(SqlBytes(std::string("'\0\\\xff", 4)), "X'27005CFF'");
}

TEST(EscapeLikeTest, EscapesWildcardsAndTheEscapeCharacter) {
  EXPECT_EQ(EscapeLike("a%b_c!d\\e"), "a!%b!_c!!d\\e");
  EXPECT_EQ(EscapeLike(""), "");
}

}  // namespace
}  // namespace lockd
