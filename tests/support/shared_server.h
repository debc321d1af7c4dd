// A GoogleTest fixture base for suites whose tests share one real server
// (RedisServer, MariadbServer, ZooKeeperServer: any class with a nested
// Options and a static Start(const Options&) returning
// absl::StatusOr<std::unique_ptr<Server>>).
//
//   class RedisBackendTest : public SharedServerTest<RedisServer> { ... };
//   // tests use server_->port(), *server_, ...
//
//   // Other options: hide SetUpTestSuite and start it yourself.
//   class ZooKeeperBackendTest : public SharedServerTest<ZooKeeperServer> {
//    protected:
//     static void SetUpTestSuite() { StartServer(MyOptions()); }
//   };
//
// Ownership and lifetime: the fixture owns the server. It starts before the
// suite's first test (SetUpTestSuite) and is stopped and deleted after its
// last one (TearDownTestSuite); tests only use it, through `server_`, and
// must not delete it. Each suite has its own server: suites run one after
// the other, and each stops its server before the next one starts.
//
// A server that fails to start is a fatal failure of SetUpTestSuite with
// Start()'s status; GoogleTest then skips every test of the suite, which
// fails. `server_` is null only in that case.
//
// Not thread-safe: SetUpTestSuite and TearDownTestSuite run on GoogleTest's
// main thread; tests may use `server_` from any thread in between.

#ifndef LOCKD_TESTS_SUPPORT_SHARED_SERVER_H_
#define LOCKD_TESTS_SUPPORT_SHARED_SERVER_H_

#include <memory>

#include "absl/status/statusor.h"
#include "gtest/gtest.h"

namespace lockd::testing {

template <typename Server>
class SharedServerTest : public ::testing::Test {
 public:
  static void SetUpTestSuite() { StartServer(typename Server::Options()); }
  static void TearDownTestSuite() {
    owned_.reset();
    server_ = nullptr;
  }

 protected:
  // Starts the suite's server with `options`; for a SetUpTestSuite that
  // hides this one.
  static void StartServer(const typename Server::Options& options) {
    absl::StatusOr<std::unique_ptr<Server>> s = Server::Start(options);
    ASSERT_TRUE(s.ok()) << "the suite's server did not start: " << s.status();
    owned_ = *std::move(s);
    server_ = owned_.get();
  }

  // The suite's server, owned by the fixture (see above).
  static inline Server* server_ = nullptr;

 private:
  static inline std::unique_ptr<Server> owned_;
};

}  // namespace lockd::testing

#endif  // LOCKD_TESTS_SUPPORT_SHARED_SERVER_H_
