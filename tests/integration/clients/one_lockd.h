// Test support for client_cancel_test.cc and lockable_test.cc: one lockd
// process (memory backend, on a free port, in a temporary directory) for a
// test, and Clients of it. Not thread-safe: built and started by the test's
// thread; NewClient may be called from any.

#ifndef LOCKD_TESTS_INTEGRATION_CLIENTS_ONE_LOCKD_H_
#define LOCKD_TESTS_INTEGRATION_CLIENTS_ONE_LOCKD_H_

#include <utility>

#include "absl/status/status.h"
#include "gtest/gtest.h"
#include "lockd/client.h"
#include "tests/integration/clients/restartable_lockd.h"
#include "tests/support/process.h"

namespace lockd::testing {

class OneLockd {
 public:
  OneLockd() : lockd_(tmp_.path()) {}

  absl::Status Start() { return lockd_.Start(); }

  // A Client of it with `options` (rpc_timeout 3 s unless set).
  Client NewClient(ClientOptions options = {}) const {
    if (options.rpc_timeout == ClientOptions().rpc_timeout) options.rpc_timeout = absl::Seconds(3);
    absl::StatusOr<Client> c = Client::Connect(lockd_.address(), options);
    EXPECT_TRUE(c.ok()) << c.status();
    return *std::move(c);
  }

 private:
  TempDir tmp_;
  RestartableLockd lockd_;
};

}  // namespace lockd::testing

#endif  // LOCKD_TESTS_INTEGRATION_CLIENTS_ONE_LOCKD_H_
