// Authorization end to end: every RPC allowed and denied, for bearer-token
// and certificate identities, anonymous callers and bad tokens; Session
// open, operations and resume; the owner prefix rule; token file reload;
// audit lines; lockctl's credentials and force-release. Against real lockd
// processes over TLS (client certificates requested, not required), with
// and without auth.owner_prefix.

#include <memory>
#include <optional>
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
- identities: svc-a
  namespaces: ["a*"]
  permissions: lock
- identities: svc-b
  namespaces: ["b*"]
  permissions: lock
- identities: viewer
  namespaces: ["*"]
  permissions: read
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
                          "tok-ops ops-alice\n"
                          "tok-a svc-a\n"
                          "tok-b svc-b\n"
                          "tok-viewer viewer\n")
                    .ok());
    const std::string rules = absl::StrReplaceAll(kRules, {{"\n", "\n    "}});
    ASSERT_TRUE(WriteFile(File("lockd.yaml"), absl::StrCat("auth:\n  owner_prefix: true\n"
                                                           "  reload_interval: 200ms\n"
                                                           "  rules:",
                                                           rules))
                    .ok());
    // The same rules without the owner prefix rule: any owner may be named.
    ASSERT_TRUE(WriteFile(File("lockd-any-owner.yaml"),
                          absl::StrCat("auth:\n  reload_interval: 200ms\n  rules:", rules))
                    .ok());
    auto flags = [](const std::string& config) {
      return std::vector<std::string>{"--backend=memory",
                                      "--config",
                                      File(config),
                                      "--tls.cert_file=" + File("server.pem"),
                                      "--tls.key_file=" + File("server.key"),
                                      "--tls.client_ca_file=" + File("ca.pem"),
                                      "--tls.client_auth=request",
                                      "--auth.tokens_file=" + File("tokens")};
    };
    auto p = LockdProcess::Launch(flags("lockd.yaml"), dir_->path());
    ASSERT_TRUE(p.ok()) << p.status();
    lockd_ = p->release();
    auto q = LockdProcess::Launch(flags("lockd-any-owner.yaml"), dir_->path());
    ASSERT_TRUE(q.ok()) << q.status();
    any_owner_lockd_ = q->release();
    ASSERT_TRUE(lockd_->WaitUntilServing().ok());
    ASSERT_TRUE(any_owner_lockd_->WaitUntilServing().ok());
  }

  static void TearDownTestSuite() {
    delete any_owner_lockd_;
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
  static LockdProcess* lockd_;            // auth.owner_prefix: true
  static LockdProcess* any_owner_lockd_;  // the same rules, without owner_prefix
  std::string last_owner_;
};

TempDir* AuthzTest::dir_ = nullptr;
LockdProcess* AuthzTest::lockd_ = nullptr;
LockdProcess* AuthzTest::any_owner_lockd_ = nullptr;

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

// A Session stream by `who`, used in lock step: every request the tests send
// is answered by one response, read before the next request goes out.
class SyncSession {
 public:
  SyncSession(const std::string& address, const ChannelSpec& who)
      : stub_(v1::LockService::NewStub(Channel(address, who))),
        ctx_(Ctx(who.token)),
        stream_(stub_->Session(ctx_.get())) {}
  ~SyncSession() {
    if (!finished_) {
      ctx_->TryCancel();
      Finish();
    }
  }

  // Sends `open`; the `opened`, or nullopt when the stream ended instead
  // (its status is then end()).
  std::optional<v1::SessionOpened> Open(const std::string& ns, const std::string& owner,
                                        const std::vector<v1::LockRef>& resume = {}) {
    v1::SessionRequest req;
    req.mutable_open()->set_namespace_(ns);
    req.mutable_open()->set_owner(owner);
    for (const v1::LockRef& r : resume) *req.mutable_open()->add_resume() = r;
    stream_->Write(req);
    v1::SessionResponse resp;
    if (stream_->Read(&resp) && resp.has_opened()) return resp.opened();
    Finish();
    return std::nullopt;
  }

  // Sends an acquire (a release when `acquire` is false) of ns/name.
  bool Send(uint64_t op_id, bool acquire, const std::string& ns, const std::string& name,
            absl::Duration wait = absl::ZeroDuration()) {
    v1::SessionRequest req;
    if (acquire) {
      req.mutable_acquire()->set_op_id(op_id);
      v1::AcquireRequest& a = *req.mutable_acquire()->mutable_request();
      a.set_namespace_(ns);
      a.set_name(name);
      if (wait > absl::ZeroDuration()) {
        a.mutable_wait_timeout()->set_seconds(absl::ToInt64Seconds(wait));
      }
    } else {
      req.mutable_release()->set_op_id(op_id);
      req.mutable_release()->mutable_request()->set_namespace_(ns);
      req.mutable_release()->mutable_request()->set_name(name);
    }
    return stream_->Write(req);
  }
  bool Cancel(uint64_t op_id) {
    v1::SessionRequest req;
    req.mutable_cancel()->set_op_id(op_id);
    return stream_->Write(req);
  }
  // The next result; nullopt if the stream ended (or sent something else).
  std::optional<v1::SessionResult> Next() {
    v1::SessionResponse resp;
    if (stream_->Read(&resp) && resp.has_result()) return resp.result();
    return std::nullopt;
  }
  std::optional<v1::SessionResult> Call(uint64_t op_id, bool acquire, const std::string& ns,
                                        const std::string& name) {
    if (!Send(op_id, acquire, ns, name)) return std::nullopt;
    return Next();
  }

  // Half-closes and returns the stream's status.
  grpc::Status HalfClose() {
    stream_->WritesDone();
    Finish();
    return end_;
  }
  const grpc::Status& end() const { return end_; }

 private:
  void Finish() {
    if (finished_) return;
    v1::SessionResponse ignored;
    while (stream_->Read(&ignored)) {
    }
    end_ = stream_->Finish();
    finished_ = true;
  }

  std::unique_ptr<v1::LockService::Stub> stub_;
  std::unique_ptr<grpc::ClientContext> ctx_;
  std::unique_ptr<grpc::ClientReaderWriter<v1::SessionRequest, v1::SessionResponse>> stream_;
  bool finished_ = false;
  grpc::Status end_;
};

v1::LockRef Ref(const std::string& ns, const std::string& name, uint64_t token) {
  v1::LockRef r;
  r.set_namespace_(ns);
  r.set_name(name);
  r.set_fencing_token(token);
  return r;
}

// google.rpc.Status codes in session results.
constexpr int kOk = 0, kCancelled = 1, kPermissionDenied = 7, kUnauthenticated = 16;

struct SessionCaller {
  std::string label;
  ChannelSpec who;
  int a1, b1;  // the code of an open (and of each operation) in namespaces a1 and b1
};

// Session open and every operation, allowed and denied, for each identity:
// opening needs `lock` on open.namespace; each operation needs `lock` on its
// own namespace (an operation refused is answered, the stream stays open).
TEST_F(AuthzTest, SessionOpenAndEveryOperationAreAllowedOrDeniedAsTheRulesSay) {
  const std::vector<SessionCaller> callers = {
      {"svc-a", Token("tok-a"), kOk, kPermissionDenied},
      {"svc-b", Token("tok-b"), kPermissionDenied, kOk},
      {"viewer", Token("tok-viewer"), kPermissionDenied, kPermissionDenied},
      {"anonymous", Anonymous(), kUnauthenticated, kUnauthenticated},
  };
  for (const SessionCaller& c : callers) {
    for (const std::string ns : {"a1", "b1"}) {
      const int want = ns == "a1" ? c.a1 : c.b1;
      const std::string other = ns == "a1" ? "b1" : "a1";
      const std::string what = absl::StrCat(c.label, " session in ", ns);
      SyncSession s(lockd_->address(), c.who);
      std::optional<v1::SessionOpened> opened = s.Open(ns, "");
      if (want != kOk) {
        EXPECT_FALSE(opened.has_value()) << what;
        EXPECT_EQ(static_cast<int>(s.end().error_code()), want)
            << what << ": " << s.end().error_message();
        EXPECT_THAT(s.end().error_message(), HasSubstr("permission lock")) << what;
        EXPECT_THAT(s.end().error_message(), HasSubstr("\"" + ns + "\"")) << what;
        continue;
      }
      ASSERT_TRUE(opened.has_value()) << what << ": " << s.end().error_message();
      EXPECT_THAT(opened->owner(), StartsWith(c.label + "/")) << what;
      // Allowed: acquire and release in the session's namespace, and a
      // waiting acquire cancelled.
      std::optional<v1::SessionResult> r = s.Call(1, true, ns, "s-" + c.label);
      ASSERT_TRUE(r.has_value()) << what;
      EXPECT_EQ(r->status().code(), kOk) << what << ": " << r->status().message();
      EXPECT_TRUE(r->acquire().acquired()) << what;
      r = s.Call(2, false, ns, "s-" + c.label);
      ASSERT_TRUE(r.has_value()) << what;
      EXPECT_EQ(r->status().code(), kOk) << what << ": " << r->status().message();
      EXPECT_TRUE(r->release().released()) << what;
      ASSERT_TRUE(Call("Acquire", c.who, ns, c.label + "/other", "busy-" + c.label).ok()) << what;
      ASSERT_TRUE(s.Send(3, true, ns, "busy-" + c.label, absl::Seconds(8)));
      ASSERT_TRUE(s.Cancel(3));
      r = s.Next();
      ASSERT_TRUE(r.has_value()) << what;
      EXPECT_EQ(r->status().code(), kCancelled) << what << ": " << r->status().message();
      // Denied: acquire (waiting or not) and release in another namespace,
      // answered at once; a cancel of the refused acquire has nothing to end.
      for (uint64_t op : {4, 5, 6}) {
        if (op == 5) {
          ASSERT_TRUE(s.Send(op, true, other, "s-" + c.label, absl::Seconds(8)));
          ASSERT_TRUE(s.Cancel(op));
          r = s.Next();
        } else {
          r = s.Call(op, op == 4, other, "s-" + c.label);
        }
        ASSERT_TRUE(r.has_value()) << what << " op " << op;
        EXPECT_EQ(r->op_id(), op) << what;
        EXPECT_EQ(r->status().code(), kPermissionDenied) << what << " op " << op;
        EXPECT_THAT(r->status().message(), HasSubstr("permission lock on namespace \"" + other))
            << what << " op " << op;
      }
      EXPECT_TRUE(s.HalfClose().ok()) << what;
    }
  }
}

// With auth.owner_prefix, open.owner obeys the rule of a unary owner.
TEST_F(AuthzTest, SessionOwnerMustStartWithTheCallersIdentity) {
  for (const std::string owner : {"svc-b/w1", "svc-aX", "svc-b"}) {
    SyncSession s(lockd_->address(), Token("tok-a"));
    EXPECT_FALSE(s.Open("a1", owner).has_value()) << owner;
    EXPECT_THAT(s.end(), StatusIs(Code::PERMISSION_DENIED)) << owner;
    EXPECT_THAT(s.end().error_message(), HasSubstr("owner: must be \"svc-a\" or start with"))
        << owner;
  }
  for (const std::string owner : {"svc-a", "svc-a/w1"}) {
    SyncSession s(lockd_->address(), Token("tok-a"));
    std::optional<v1::SessionOpened> opened = s.Open("a1", owner);
    ASSERT_TRUE(opened.has_value()) << owner << ": " << s.end().error_message();
    EXPECT_EQ(opened->owner(), owner);
    EXPECT_TRUE(s.HalfClose().ok());
  }
}

// The attack of issue 28: a caller without `lock` on b1 names svc-b's owner
// and token (any reader can learn them) in open.resume. It must not get the
// hold, and svc-b's hold must survive the attacker's half-close (which
// releases every hold of a session).
TEST_F(AuthzTest, SessionResumeCannotTakeOverAHoldWithoutLockOnItsNamespace) {
  for (LockdProcess* lockd : {lockd_, any_owner_lockd_}) {
    const bool prefix = lockd == lockd_;
    const std::string what0 = prefix ? "owner_prefix on" : "owner_prefix off";
    const std::string name = prefix ? "x" : "x2";
    auto call = [&](const std::string& rpc, const ChannelSpec& who, v1::LockInfo* info = nullptr) {
      auto stub = v1::LockService::NewStub(Channel(lockd->address(), who));
      auto ctx = Ctx(who.token);
      if (rpc == "Acquire") {
        v1::AcquireRequest req;
        req.set_namespace_("b1");
        req.set_name(name);
        req.set_owner("svc-b/w1");
        req.mutable_lease_ttl()->set_seconds(60);
        v1::AcquireResponse resp;
        return stub->Acquire(ctx.get(), req, &resp);
      }
      if (rpc == "Renew") {
        v1::RenewRequest req;
        req.set_namespace_("b1");
        req.set_name(name);
        req.set_owner("svc-b/w1");
        v1::RenewResponse resp;
        return stub->Renew(ctx.get(), req, &resp);
      }
      v1::DescribeRequest req;
      req.set_namespace_("b1");
      req.set_name(name);
      return stub->Describe(ctx.get(), req, info);
    };
    ASSERT_TRUE(call("Acquire", Token("tok-b")).ok()) << what0;
    v1::LockInfo before;
    ASSERT_TRUE(call("Describe", Token("tok-viewer"), &before).ok()) << what0;
    ASSERT_TRUE(before.held()) << what0;
    const std::vector<v1::LockRef> resume = {Ref("b1", name, before.fencing_token())};

    struct Attacker {
      std::string label;
      ChannelSpec who;
      Code code;
    };
    const std::vector<Attacker> attackers = {
        {"svc-a", Token("tok-a"), Code::PERMISSION_DENIED},
        {"viewer", Token("tok-viewer"), Code::PERMISSION_DENIED},
        {"anonymous", Anonymous(), Code::UNAUTHENTICATED},
    };
    for (const Attacker& a : attackers) {
      const std::string what = absl::StrCat(what0, ", ", a.label);
      // As the issue has it: open.namespace b1. Refused as a whole.
      {
        SyncSession s(lockd->address(), a.who);
        std::optional<v1::SessionOpened> opened = s.Open("b1", "svc-b/w1", resume);
        EXPECT_FALSE(opened.has_value()) << what << " got " << opened->DebugString();
        EXPECT_THAT(s.end(), StatusIs(a.code)) << what;
        EXPECT_THAT(s.end().error_message(), HasSubstr("permission lock on namespace \"b1\""))
            << what;
      }
      EXPECT_TRUE(call("Renew", Token("tok-b")).ok()) << what;
      if (a.label != "svc-a") continue;
      // In a namespace svc-a may lock: the open passes only without the
      // owner rule; the resume entry in b1 is refused either way, and so is
      // every operation on b1.
      SyncSession s(lockd->address(), a.who);
      std::optional<v1::SessionOpened> opened = s.Open("a1", "svc-b/w1", resume);
      if (prefix) {
        EXPECT_FALSE(opened.has_value()) << what;
        EXPECT_THAT(s.end(), StatusIs(Code::PERMISSION_DENIED)) << what;
      } else {
        ASSERT_TRUE(opened.has_value()) << what << ": " << s.end().error_message();
        EXPECT_EQ(opened->resumed_size(), 0) << what << ": " << opened->DebugString();
        for (uint64_t op : {1, 2}) {
          std::optional<v1::SessionResult> r = s.Call(op, op == 1, "b1", name);
          ASSERT_TRUE(r.has_value()) << what;
          EXPECT_EQ(r->status().code(), kPermissionDenied) << what << ": " << r->DebugString();
        }
        EXPECT_TRUE(s.HalfClose().ok()) << what;
        EXPECT_TRUE(WaitFor(
            [&] {
              return absl::StrContains(lockd->process().Log(),
                                       absl::StrCat("audit=denied identity=svc-a permission=lock "
                                                    "namespace=b1 name=",
                                                    name, " code=PERMISSION_DENIED"));
            },
            absl::Seconds(5)))
            << what << ": no audit line for the refused resume entry";
      }
      EXPECT_TRUE(call("Renew", Token("tok-b")).ok()) << what;
    }
    v1::LockInfo after;
    ASSERT_TRUE(call("Describe", Token("tok-viewer"), &after).ok()) << what0;
    EXPECT_TRUE(after.held()) << what0;
    EXPECT_EQ(after.owner(), "svc-b/w1") << what0;
    EXPECT_EQ(after.fencing_token(), before.fencing_token()) << what0;
    EXPECT_EQ(after.hold_count(), 1u) << what0;

    // The owner itself still resumes its hold.
    SyncSession own(lockd->address(), Token("tok-b"));
    std::optional<v1::SessionOpened> opened = own.Open("b1", "svc-b/w1", resume);
    ASSERT_TRUE(opened.has_value()) << what0 << ": " << own.end().error_message();
    ASSERT_EQ(opened->resumed_size(), 1) << what0;
    EXPECT_EQ(opened->resumed(0).fencing_token(), before.fencing_token()) << what0;
    EXPECT_TRUE(own.HalfClose().ok()) << what0;
  }
}

}  // namespace
}  // namespace lockd::testing
