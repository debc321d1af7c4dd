// The C++ client's credentials against an in-process lockd: bearer tokens
// (inline or from a file), client certificates, and ForceRelease.

#include <memory>
#include <string>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "lockd/client.h"
#include "service/backend_factory.h"
#include "service/config.h"
#include "service/server.h"
#include "tests/integration/security/security_test_util.h"
#include "tests/support/process.h"
#include "tests/support/status_matchers.h"

namespace lockd::testing {
namespace {

using ::testing::HasSubstr;

class ClientAuthTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_EQ(MakeTestCerts(dir_.path()), "");
    ASSERT_TRUE(
        WriteFile(File("tokens"), "tok-app svc-app\ntok-ops ops\ntok-orders svc-orders\n").ok());
    ASSERT_TRUE(WriteFile(File("app-token"), "tok-app\n").ok());
    ASSERT_TRUE(WriteFile(File("empty-token"), "\n").ok());
    absl::StatusOr<ParsedArgs> parsed = ParseConfig(
        {"--listen=127.0.0.1:0", "--tls.cert_file=" + File("server.pem"),
         "--tls.key_file=" + File("server.key"), "--tls.client_ca_file=" + File("ca.pem"),
         "--tls.client_auth=request", "--auth.tokens_file=" + File("tokens"),
         "--auth.rules=[{identities: [svc-app, client-c], namespaces: ['*'], permissions: [lock, "
         "read]}, {identities: [ops], namespaces: ['*'], permissions: [admin]}, "
         "{identities: [svc-orders], namespaces: [orders], permissions: [lock]}]"},
        {});
    ASSERT_TRUE(parsed.ok()) << parsed.status();
    auto backend = NewBackendFromConfig(parsed->config);
    ASSERT_TRUE(backend.ok());
    auto server = LockdServer::Start(parsed->config, *std::move(backend));
    ASSERT_TRUE(server.ok()) << server.status();
    server_ = *std::move(server);
  }

  std::string File(const std::string& name) const { return absl::StrCat(dir_.path(), "/", name); }

  absl::StatusOr<Client> Connect(const AuthOptions& auth, const std::string& cert = "",
                                 const std::string& default_namespace = "") {
    TlsOptions tls;
    tls.enabled = true;
    tls.ca_file = File("ca.pem");
    tls.server_name = "lockd.test";
    if (!cert.empty()) {
      tls.cert_file = File(cert + ".pem");
      tls.key_file = File(cert + ".key");
    }
    ClientOptions options;
    options.rpc_timeout = absl::Seconds(10);
    options.default_namespace = default_namespace;
    return Client::Connect(server_->address(), options, tls, auth);
  }

  TempDir dir_;
  std::unique_ptr<LockdServer> server_;
};

TEST_F(ClientAuthTest, BearerTokenInlineOrFromAFileIsSentWithEveryCall) {
  auto anonymous = Connect({});
  ASSERT_TRUE(anonymous.ok());
  EXPECT_THAT(anonymous->Describe("x"), StatusIs(absl::StatusCode::kUnauthenticated));

  auto inline_token = Connect({"tok-app", ""});
  ASSERT_TRUE(inline_token.ok());
  EXPECT_TRUE(inline_token->Describe("x").ok());
  auto lease = inline_token->Acquire("held");
  ASSERT_TRUE(lease.ok()) << lease.status();
  EXPECT_TRUE(lease->Release().ok());

  auto from_file = Connect({"", File("app-token")});
  ASSERT_TRUE(from_file.ok());
  EXPECT_TRUE(from_file->Describe("x").ok());

  auto wrong = Connect({"tok-wrong", ""});
  ASSERT_TRUE(wrong.ok());
  EXPECT_THAT(wrong->Describe("x"), StatusIs(absl::StatusCode::kUnauthenticated));
}

// A Session's open needs `lock` on open.namespace: the client opens its
// session in its default namespace, the one a restricted identity may lock.
TEST_F(ClientAuthTest, SessionOfAnIdentityThatMayLockOnlyItsDefaultNamespace) {
  auto orders = Connect({"tok-orders", ""}, "", "orders");
  ASSERT_TRUE(orders.ok());
  auto lease = orders->Acquire("job");
  ASSERT_TRUE(lease.ok()) << lease.status();
  EXPECT_EQ(lease->ns(), "orders");
  EXPECT_TRUE(lease->Release().ok());
}

TEST_F(ClientAuthTest, TokenFileErrorsNameTheFileNeverTheToken) {
  auto missing = Connect({"", File("no-such-file")});
  EXPECT_THAT(missing, StatusIs(absl::StatusCode::kInvalidArgument));
  EXPECT_THAT(std::string(missing.status().message()), HasSubstr("no-such-file"));
  auto empty = Connect({"", File("empty-token")});
  EXPECT_THAT(empty, StatusIs(absl::StatusCode::kInvalidArgument));
}

TEST_F(ClientAuthTest, ClientCertificateIdentityAndForceRelease) {
  auto by_cert = Connect({}, "client-c");
  ASSERT_TRUE(by_cert.ok());
  auto lease = by_cert->Acquire("stuck");
  ASSERT_TRUE(lease.ok()) << lease.status();
  const uint64_t token = lease->fencing_token();
  lease->Detach();
  EXPECT_THAT(by_cert->ForceRelease("stuck", "test"),
              StatusIs(absl::StatusCode::kPermissionDenied));

  auto ops = Connect({"tok-ops", ""});
  ASSERT_TRUE(ops.ok());
  auto wrong_token = ops->ForceRelease("stuck", "test", token + 1);
  EXPECT_THAT(wrong_token, StatusIs(absl::StatusCode::kFailedPrecondition));
  EXPECT_FALSE(IsLockLost(wrong_token.status()));
  auto forced = ops->ForceRelease("stuck", "test", token);
  ASSERT_TRUE(forced.ok()) << forced.status();
  EXPECT_TRUE(forced->released);
  EXPECT_EQ(forced->previous.fencing_token, token);
  EXPECT_EQ(forced->previous.owner, by_cert->owner());
  auto again = ops->ForceRelease("stuck", "test");
  ASSERT_TRUE(again.ok());
  EXPECT_FALSE(again->released);
}

}  // namespace
}  // namespace lockd::testing
