// The fixture of the mysql backend's integration tests
// (mysql_backend_test.cc, mysql_renew_many_test.cc, one binary): one private
// MariaDB server for the suite, and backends on it whose tables get a prefix
// of their own per test.

#ifndef LOCKD_TESTS_INTEGRATION_MYSQL_MYSQL_BACKEND_FIXTURE_H_
#define LOCKD_TESTS_INTEGRATION_MYSQL_MYSQL_BACKEND_FIXTURE_H_

#include <cstdint>
#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "backends/mysql/mysql_backend.h"
#include "gtest/gtest.h"
#include "tests/support/mariadb_server.h"
#include "tests/support/shared_server.h"

namespace lockd::testing {

class MysqlBackendTest : public SharedServerTest<MariadbServer> {
 protected:
  void SetUp() override {
    static int n = 0;
    prefix_ = absl::StrCat("b", n++, "_");
  }

  MysqlOptions Options(const std::string& prefix = "") const {
    MysqlOptions o;
    o.host = server_->host();
    o.port = server_->port();
    o.user = server_->user();
    o.password = server_->password();
    o.database = server_->database();
    o.table_prefix = prefix.empty() ? prefix_ : prefix;
    o.pool_size = 4;
    return o;
  }

  // NewMysqlBackend(o), tried again while it answers kUnavailable, for up to
  // 30 s: on a loaded machine MariaDB can drop the connection during the
  // backend's first DDL ("Lost connection to server during query", error
  // 2013) although nothing is wrong. Returns the first other result, or the
  // last kUnavailable once 30 s have passed. Tests that expect kUnavailable
  // call NewMysqlBackend themselves.
  static absl::StatusOr<std::unique_ptr<Backend>> StartBackend(const MysqlOptions& o) {
    const absl::Time deadline = absl::Now() + absl::Seconds(30);
    absl::StatusOr<std::unique_ptr<Backend>> b = NewMysqlBackend(o);
    while (absl::IsUnavailable(b.status()) && absl::Now() < deadline) {
      absl::SleepFor(absl::Milliseconds(250));
      b = NewMysqlBackend(o);
    }
    return b;
  }

  // StartBackend(o); a failure (with its last status) fails the test.
  std::unique_ptr<Backend> NewBackend(const MysqlOptions& o) {
    absl::StatusOr<std::unique_ptr<Backend>> b = StartBackend(o);
    EXPECT_TRUE(b.ok()) << b.status();
    return b.ok() ? *std::move(b) : nullptr;
  }
  std::unique_ptr<Backend> NewBackend() { return NewBackend(Options()); }

  int64_t QueryInt(const std::string& sql) {
    absl::StatusOr<std::string> out = server_->Query(sql);
    EXPECT_TRUE(out.ok()) << out.status();
    int64_t v = -1;
    if (out.ok() && !absl::SimpleAtoi(*out, &v)) ADD_FAILURE() << "not a number: " << *out;
    return v;
  }

  std::string prefix_;
};

}  // namespace lockd::testing

#endif  // LOCKD_TESTS_INTEGRATION_MYSQL_MYSQL_BACKEND_FIXTURE_H_
