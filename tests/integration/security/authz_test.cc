// Authorization end to end: every RPC allowed and denied, for bearer-token
// and certificate identities, anonymous callers and bad tokens; the owner
// prefix rule; token file reload; audit lines; lockctl's credentials and
// force-release. Against a real lockd process over TLS (client
// certificates requested, not required).

#include <memory>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_replace.h"
#include "absl/time/clock.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "lockd/v1/lock.grpc.pb.h"
#include "tests/integration/security/security_test_util.h"
#include "tests/support/lockd_process.h"
#include "tests/support/process.h"
#include "tests/support/status_matchers.h"

namespace lockd::testing {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;
using ::testing::StartsWith;
using Code = grpc::StatusCode;

constexpr char kRules[] = R"(
- identities: [svc-orders, "spiffe://lockd.test/client-a"]
  namespaces: [orders, "orders-*"]
  permissions: [lock, read]
- identities: dashboards
  namespaces: "*"
  permissions: read
- identities: ["ops-*", client-c]
  namespaces: ["*"]
  permissions: [admin, read]
- identities: [anonymous]
  namespaces: [public]
  permissions: [lock, read]
)";

class AuthzTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    dir_ = new TempDir();
    std::string err = MakeTestCerts(dir_->path());
    ASSERT_EQ(err, "") << "openssl failed: " << err;
    ASSERT_TRUE(WriteFile(File("tokens"),
                          "# token identity\n"
                          "tok-orders svc-orders\n"
                          "tok-dash dashboards\n"
                          "tok-ops ops-alice\n")
                    .ok());
    ASSERT_TRUE(
        WriteFile(File("lockd.yaml"), absl::StrCat("auth:\n  owner_prefix: true\n"
                                                   "  reload_interval: 200ms\n"
                                                   "  rules:",
                                                   absl::StrReplaceAll(kRules, {{"\n", "\n    "}})))
            .ok());
    auto p = LockdProcess::Start(
        {"--backend=memory", "--config", File("lockd.yaml"),
         "--tls.cert_file=" + File("server.pem"), "--tls.key_file=" + File("server.key"),
         "--tls.client_ca_file=" + File("ca.pem"), "--tls.client_auth=request",
         "--auth.tokens_file=" + File("tokens")},
        dir_->path());
    ASSERT_TRUE(p.ok()) << p.status();
    lockd_ = p->release();
  }

  static void TearDownTestSuite() {
    delete lockd_;
    delete dir_;
  }

  static std::string File(const std::string& name) { return absl::StrCat(dir_->path(), "/", name); }

  // Callers.
  static ChannelSpec Token(const std::string& token) { return {File("ca.pem"), "", "", token}; }
  static ChannelSpec Cert(const std::string& name) {
    return {File("ca.pem"), File(name + ".pem"), File(name + ".key"), ""};
  }
  static ChannelSpec Anonymous() { return {File("ca.pem"), "", "", ""}; }

  // One RPC by `who` on (ns, name) with `owner`; returns its status.
  grpc::Status Call(const std::string& rpc, const ChannelSpec& who, const std::string& ns,
                    const std::string& owner = "", const std::string& name = "matrix") {
    auto stub = v1::LockService::NewStub(Channel(lockd_->address(), who));
    auto ctx = Ctx(who.token);
    if (rpc == "Acquire") {
      v1::AcquireRequest req;
      req.set_namespace_(ns);
      req.set_name(name);
      req.set_owner(owner);
      v1::AcquireResponse resp;
      grpc::Status s = stub->Acquire(ctx.get(), req, &resp);
      last_owner_ = resp.owner();
      return s;
    }
    if (rpc == "Release") {
      v1::ReleaseRequest req;
      req.set_namespace_(ns);
      req.set_name(name);
      req.set_owner(owner);
      v1::ReleaseResponse resp;
      return stub->Release(ctx.get(), req, &resp);
    }
    if (rpc == "Renew") {
      v1::RenewRequest req;
      req.set_namespace_(ns);
      req.set_name(name);
      req.set_owner(owner);
      v1::RenewResponse resp;
      return stub->Renew(ctx.get(), req, &resp);
    }
    if (rpc == "Describe") {
      v1::DescribeRequest req;
      req.set_namespace_(ns);
      req.set_name(name);
      v1::LockInfo resp;
      return stub->Describe(ctx.get(), req, &resp);
    }
    if (rpc == "List") {
      v1::ListRequest req;
      req.set_namespace_(ns);
      v1::ListResponse resp;
      return stub->List(ctx.get(), req, &resp);
    }
    v1::ForceReleaseRequest req;
    req.set_namespace_(ns);
    req.set_name(name);
    req.set_reason("authz matrix");
    v1::ForceReleaseResponse resp;
    return stub->ForceRelease(ctx.get(), req, &resp);
  }

  static TempDir* dir_;
  static LockdProcess* lockd_;
  std::string last_owner_;
};

TempDir* AuthzTest::dir_ = nullptr;
LockdProcess* AuthzTest::lockd_ = nullptr;

struct Case {
  std::string caller;  // label
  ChannelSpec who;
  std::string owner;  // for lock calls (owner_prefix is on)
  std::string ns;
  Code lock, read, admin;  // expected code of each permission's RPCs (OK: allowed)
};

TEST_F(AuthzTest, EveryRpcIsAllowedOrDeniedAsTheRulesSay) {
  const Code ok = Code::OK, denied = Code::PERMISSION_DENIED, unauth = Code::UNAUTHENTICATED;
  const std::vector<Case> cases = {
      {"token svc-orders", Token("tok-orders"), "svc-orders/w1", "orders", ok, ok, denied},
      {"token svc-orders", Token("tok-orders"), "svc-orders/w1", "orders-eu", ok, ok, denied},
      {"token svc-orders", Token("tok-orders"), "svc-orders/w1", "billing", denied, denied, denied},
      {"token dashboards", Token("tok-dash"), "dashboards", "orders", denied, ok, denied},
      {"token ops-alice", Token("tok-ops"), "ops-alice", "billing", denied, ok, ok},
      {"cert client-a", Cert("client-a"), "spiffe://lockd.test/client-a/w", "orders", ok, ok,
       denied},
      {"cert client-a", Cert("client-a"), "spiffe://lockd.test/client-a/w", "billing", denied,
       denied, denied},
      {"cert client-b", Cert("client-b"), "client-b.test", "orders", denied, denied, denied},
      {"cert client-c", Cert("client-c"), "client-c", "billing", denied, ok, ok},
      {"anonymous", Anonymous(), "anonymous/x", "public", ok, ok, unauth},
      {"anonymous", Anonymous(), "anonymous/x", "orders", unauth, unauth, unauth},
      {"unknown token", Token("tok-nope"), "svc-orders/w1", "public", unauth, unauth, unauth},
      // A token beats the certificate of the same connection.
      {"token over cert",
       {File("ca.pem"), File("client-a.pem"), File("client-a.key"), "tok-dash"},
       "dashboards",
       "orders",
       denied,
       ok,
       denied},
  };
  const std::vector<std::pair<std::string, int>> rpcs = {{"Acquire", 0}, {"Release", 0},
                                                         {"Renew", 0},   {"Describe", 1},
                                                         {"List", 1},    {"ForceRelease", 2}};
  for (const Case& c : cases) {
    for (const auto& [rpc, perm] : rpcs) {
      Code want = perm == 0 ? c.lock : perm == 1 ? c.read : c.admin;
      grpc::Status s = Call(rpc, c.who, c.ns, c.owner, absl::StrCat("m-", c.caller));
      std::string what = absl::StrCat(c.caller, " ", rpc, " in ", c.ns, ": ", s.error_message());
      if (want == Code::OK) {
        // Allowed: whatever the lock's state says (Release/Renew of a lock
        // not held is FAILED_PRECONDITION), never an auth error.
        EXPECT_THAT(s, Not(StatusIs(Code::PERMISSION_DENIED))) << what;
        EXPECT_THAT(s, Not(StatusIs(Code::UNAUTHENTICATED))) << what;
      } else {
        EXPECT_EQ(s.error_code(), want) << what;
        if (want == denied && !absl::StrContains(s.error_message(), "owner")) {
          std::string perm_name = perm == 0 ? "lock" : perm == 1 ? "read" : "admin";
          EXPECT_THAT(s.error_message(), HasSubstr("permission " + perm_name)) << what;
          EXPECT_THAT(s.error_message(), HasSubstr("\"" + c.ns + "\"")) << what;
        }
      }
    }
  }
}

TEST_F(AuthzTest, DeniedCallsChangeNothing) {
  ASSERT_TRUE(Call("Acquire", Token("tok-orders"), "orders", "svc-orders/holder", "kept").ok());
  EXPECT_THAT(Call("Release", Token("tok-dash"), "orders", "svc-orders/holder", "kept"),
              StatusIs(Code::PERMISSION_DENIED));
  EXPECT_THAT(Call("ForceRelease", Token("tok-orders"), "orders", "", "kept"),
              StatusIs(Code::PERMISSION_DENIED));
  auto stub = v1::LockService::NewStub(Channel(lockd_->address(), Token("tok-dash")));
  v1::DescribeRequest req;
  req.set_namespace_("orders");
  req.set_name("kept");
  v1::LockInfo info;
  ASSERT_TRUE(stub->Describe(Ctx("tok-dash").get(), req, &info).ok());
  EXPECT_TRUE(info.held());
  EXPECT_EQ(info.owner(), "svc-orders/holder");
  EXPECT_EQ(info.hold_count(), 1u);
}

TEST_F(AuthzTest, OwnersMustStartWithTheCallersIdentity) {
  grpc::Status s = Call("Acquire", Token("tok-orders"), "orders", "svc-other/w1", "op");
  EXPECT_THAT(s, StatusIs(Code::PERMISSION_DENIED));
  EXPECT_THAT(s.error_message(), HasSubstr("owner: must be \"svc-orders\" or start with"));
  // A prefix that is not followed by '/' is another identity's.
  EXPECT_THAT(Call("Acquire", Token("tok-orders"), "orders", "svc-ordersX", "op"),
              StatusIs(Code::PERMISSION_DENIED));
  EXPECT_TRUE(Call("Acquire", Token("tok-orders"), "orders", "svc-orders", "op").ok());
  // Without an owner the server makes one under the identity.
  ASSERT_TRUE(Call("Acquire", Token("tok-orders"), "orders", "", "op2").ok());
  EXPECT_THAT(last_owner_, StartsWith("svc-orders/"));
  // Another identity with lock permission cannot release it by its owner.
  s = Call("Release", Cert("client-a"), "orders", last_owner_, "op2");
  EXPECT_THAT(s, StatusIs(Code::PERMISSION_DENIED));
  EXPECT_TRUE(Call("Release", Token("tok-orders"), "orders", last_owner_, "op2").ok());
}

TEST_F(AuthzTest, DenialsAreAuditedWithoutTokens) {
  ASSERT_THAT(Call("Describe", Token("tok-dash"), "orders", "", "readable"), StatusIs(Code::OK));
  ASSERT_THAT(Call("Acquire", Token("tok-dash"), "orders", "dashboards", "audited lock"),
              StatusIs(Code::PERMISSION_DENIED));
  ASSERT_THAT(Call("Describe", Token("tok-wrong"), "orders", "", "x"),
              StatusIs(Code::UNAUTHENTICATED));
  ASSERT_TRUE(
      WaitFor([&] { return absl::StrContains(lockd_->process().Log(), "name=\"audited lock\""); },
              absl::Seconds(5)));
  std::string log = lockd_->process().Log();
  EXPECT_THAT(log, HasSubstr("audit=denied identity=dashboards permission=lock namespace=orders "
                             "name=\"audited lock\" code=PERMISSION_DENIED"));
  EXPECT_THAT(log, HasSubstr("code=UNAUTHENTICATED detail=\"bearer token not recognised\""));
  for (const char* token : {"tok-orders", "tok-dash", "tok-ops", "tok-wrong"}) {
    EXPECT_THAT(log, Not(HasSubstr(token)));
  }
}

TEST_F(AuthzTest, TokenFileChangesApplyWithoutRestart) {
  EXPECT_THAT(Call("Describe", Token("tok-new"), "orders"), StatusIs(Code::UNAUTHENTICATED));
  std::string tokens = ReadFileOrEmpty(File("tokens"));
  std::string tmp = File("tokens.tmp");
  ASSERT_TRUE(WriteFile(tmp, tokens + "tok-new dashboards\n").ok());
  ASSERT_EQ(std::rename(tmp.c_str(), File("tokens").c_str()), 0);
  EXPECT_TRUE(WaitFor([&] { return Call("Describe", Token("tok-new"), "orders").ok(); },
                      absl::Seconds(10), absl::Milliseconds(100)));
  ASSERT_TRUE(WriteFile(tmp, tokens).ok());
  ASSERT_EQ(std::rename(tmp.c_str(), File("tokens").c_str()), 0);
  EXPECT_TRUE(WaitFor(
      [&] {
        return Call("Describe", Token("tok-new"), "orders").error_code() == Code::UNAUTHENTICATED;
      },
      absl::Seconds(10), absl::Milliseconds(100)));
}

// lockctl with --auth-token-file: force-release by an operator, and the
// exit code of a denial.
TEST_F(AuthzTest, LockctlSendsTokensAndForceReleases) {
  ASSERT_TRUE(Call("Acquire", Token("tok-orders"), "orders", "svc-orders/job", "stuck").ok());
  ASSERT_TRUE(WriteFile(File("ops-token"), "tok-ops\n").ok());
  ASSERT_TRUE(WriteFile(File("orders-token"), "tok-orders\n").ok());
  auto lockctl = [&](const std::string& token_file, const std::string& log) {
    auto p = Subprocess::Start(
        {LOCKCTL_BINARY, "force-release", "--server", lockd_->address(), "--namespace", "orders",
         "--tls-ca", File("ca.pem"), "--tls-server-name", "lockd.test", "--auth-token-file",
         File(token_file), "--name", "stuck", "--reason", "job died", "--output", "json"},
        File(log));
    EXPECT_TRUE(p.ok());
    int status = (*p)->Wait(absl::Seconds(30));
    return std::make_pair(WIFEXITED(status) ? WEXITSTATUS(status) : -1, (*p)->Log());
  };
  auto [denied_code, denied_out] = lockctl("orders-token", "lockctl-denied.log");
  EXPECT_EQ(denied_code, 77) << denied_out;
  auto [code, out] = lockctl("ops-token", "lockctl-ok.log");
  EXPECT_EQ(code, 0) << out;
  EXPECT_THAT(out, HasSubstr("\"released\":true"));
  EXPECT_THAT(out, HasSubstr("\"owner\":\"svc-orders/job\""));
  EXPECT_THAT(Call("Release", Token("tok-orders"), "orders", "svc-orders/job", "stuck"),
              StatusIs(Code::FAILED_PRECONDITION));
  EXPECT_TRUE(WaitFor(
      [&] {
        return absl::StrContains(lockd_->process().Log(),
                                 "audit=force_release identity=ops-alice namespace=orders "
                                 "name=stuck reason=\"job died\" fencing_token=0 result=released "
                                 "previous_owner=svc-orders/job");
      },
      absl::Seconds(5)))
      << lockd_->process().Log();
}

}  // namespace
}  // namespace lockd::testing
