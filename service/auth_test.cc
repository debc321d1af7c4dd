// Unit tests of authorization rules, bearer-token files and the security,
// metrics and logging configuration keys.

#include "service/auth.h"

#include <cstdio>
#include <fstream>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "service/auth_config.h"
#include "service/config.h"
#include "tests/support/status_matchers.h"
#include "tests/support/temp_file.h"

namespace lockd {
namespace {

using ::lockd::testing::StatusIs;
using ::lockd::testing::WriteTempFile;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::Not;

TEST(AuthRulesTest, ParsesBlockAndFlowStyle) {
  auto rules = ParseAuthRules(
      "- identities: [svc-a, \"spiffe://x/*\"]\n"
      "  namespaces: orders\n"
      "  permissions: [lock, read]\n"
      "- {identities: ops, namespaces: ['*'], permissions: admin}\n");
  ASSERT_TRUE(rules.ok()) << rules.status();
  ASSERT_EQ(rules->size(), 2u);
  EXPECT_THAT((*rules)[0].identities, ElementsAre("svc-a", "spiffe://x/*"));
  EXPECT_THAT((*rules)[0].namespaces, ElementsAre("orders"));
  EXPECT_EQ((*rules)[0].permissions,
            static_cast<uint8_t>(Permission::kLock) | static_cast<uint8_t>(Permission::kRead));
  EXPECT_EQ((*rules)[1].permissions, static_cast<uint8_t>(Permission::kAdmin));
  EXPECT_TRUE(ParseAuthRules("")->empty());
  EXPECT_TRUE(ParseAuthRules("[]")->empty());
}

TEST(AuthRulesTest, ErrorsNameTheRuleAndKey) {
  EXPECT_THAT(ParseAuthRules("- {identities: a, namespaces: b, permissions: write}").status(),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("auth.rules[0].permissions: unknown permission \"write\"")));
  EXPECT_THAT(ParseAuthRules("- {identities: a, namespaces: b, permissions: read}\n"
                             "- {identities: a, namespace: b, permissions: read}")
                  .status(),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("auth.rules[1]: unknown key \"namespace\"")));
  EXPECT_THAT(
      ParseAuthRules("- {identities: a, permissions: read}").status(),
      StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("auth.rules[0].namespaces: missing")));
  EXPECT_THAT(ParseAuthRules("- {identities: [], namespaces: b, permissions: read}").status(),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("auth.rules[0].identities")));
  EXPECT_THAT(ParseAuthRules("identities: a").status(),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("expected a list")));
}

TEST(AuthRulesTest, GlobsMatchLikeFnmatchAndLiteralsExactly) {
  EXPECT_TRUE(GlobMatch("orders", "orders"));
  EXPECT_FALSE(GlobMatch("orders", "orders-eu"));
  EXPECT_TRUE(GlobMatch("orders-*", "orders-eu"));
  EXPECT_TRUE(GlobMatch("*", "anything/with/slashes"));
  EXPECT_TRUE(GlobMatch("spiffe://shop/*", "spiffe://shop/ns/orders/sa/api"));
  EXPECT_TRUE(GlobMatch("svc-?", "svc-a"));
  EXPECT_FALSE(GlobMatch("svc-?", "svc-ab"));
  EXPECT_TRUE(GlobMatch("team-[ab]", "team-b"));
  EXPECT_FALSE(GlobMatch("team-[ab]", "team-c"));
  EXPECT_TRUE(GlobMatch("team-[a-c]", "team-c"));
  EXPECT_TRUE(GlobMatch("team-[!a-c]", "team-d"));
  EXPECT_FALSE(GlobMatch("team-[!a-c]", "team-b"));
  EXPECT_TRUE(GlobMatch("a*b*c", "aXXbYYbZc"));
  EXPECT_FALSE(GlobMatch("a*b*c", "aXXbYYbZ"));
  EXPECT_TRUE(GlobMatch("*.orders", ".orders"));
  EXPECT_TRUE(GlobMatch("[unclosed", "[unclosed"));
  EXPECT_FALSE(GlobMatch("?", ""));
  EXPECT_TRUE(GlobMatch("**", ""));
}

TEST(AuthorizerTest, RulesGrantPermissionsPerIdentityAndNamespace) {
  auto rules = ParseAuthRules(
      "- {identities: [svc-*], namespaces: [orders], permissions: [lock, read]}\n"
      "- {identities: [ops], namespaces: ['*'], permissions: [admin]}\n");
  ASSERT_TRUE(rules.ok());
  Authorizer authz(*rules, false, nullptr, nullptr);
  EXPECT_TRUE(authz.enabled());
  EXPECT_TRUE(authz.Allowed("svc-a", Permission::kLock, "orders"));
  EXPECT_TRUE(authz.Allowed("svc-a", Permission::kRead, "orders"));
  EXPECT_FALSE(authz.Allowed("svc-a", Permission::kAdmin, "orders"));
  EXPECT_FALSE(authz.Allowed("svc-a", Permission::kLock, "billing"));
  EXPECT_TRUE(authz.Allowed("ops", Permission::kAdmin, "billing"));
  EXPECT_FALSE(authz.Allowed("ops", Permission::kRead, "billing"));
  EXPECT_FALSE(authz.Allowed("anonymous", Permission::kRead, "orders"));
}

// A session's memo: its later calls get the outcomes the rules give (no
// client certificate looked for: a test context has no call).
TEST(AuthorizerTest, AMemoKeepsOnlyWhatTheRulesAllowedThatCaller) {
  auto rules =
      ParseAuthRules("- {identities: [anonymous], namespaces: [orders], permissions: [lock]}\n");
  ASSERT_TRUE(rules.ok());
  Authorizer authz(*rules, /*owner_prefix=*/true, nullptr, nullptr,
                   /*client_certificates=*/false);
  grpc::ServerContext ctx;
  AuthorizeMemo memo;
  const std::string mine = "anonymous/1", other = "someone-else";
  for (int round = 0; round < 2; ++round) {  // the second round meets a filled memo
    SCOPED_TRACE(round);
    absl::StatusOr<std::string> id =
        authz.Authorize(ctx, Permission::kLock, "orders", "n", &mine, &memo);
    ASSERT_TRUE(id.ok()) << id.status();
    EXPECT_EQ(*id, "anonymous");
    EXPECT_THAT(authz.Authorize(ctx, Permission::kLock, "billing", "n", &mine, &memo).status(),
                StatusIs(absl::StatusCode::kUnauthenticated));
    EXPECT_THAT(authz.Authorize(ctx, Permission::kRead, "orders", "n", &mine, &memo).status(),
                StatusIs(absl::StatusCode::kUnauthenticated));
  }
  // Another owner on an allowed namespace is checked (owner_prefix), and
  // denied, whatever the memo holds.
  EXPECT_THAT(authz.Authorize(ctx, Permission::kLock, "orders", "n", &other, &memo).status(),
              StatusIs(absl::StatusCode::kPermissionDenied));
  EXPECT_TRUE(authz.Authorize(ctx, Permission::kLock, "orders", "n", &mine, &memo).ok());
}

TEST(AuthorizerTest, NoRulesAllowEverythingAndNeedNoCheck) {
  Authorizer authz({}, false, nullptr, nullptr);
  EXPECT_FALSE(authz.enabled());
  EXPECT_TRUE(authz.Allowed("anonymous", Permission::kAdmin, "x"));
  Authorizer prefixed({}, true, nullptr, nullptr);
  EXPECT_TRUE(prefixed.enabled());
  EXPECT_THAT(prefixed.NewOwnerFor("svc-a"), ::testing::StartsWith("svc-a/"));
  EXPECT_THAT(authz.NewOwnerFor("svc-a"), Not(HasSubstr("/")));
}

TEST(TokenStoreTest, MapsTokensToIdentitiesAndReloadsWhenTheFileChanges) {
  std::string path = WriteTempFile("tokens", "# comment\n\nabc123 svc-a\n  def456   ops  \n");
  auto store = TokenStore::Open(path);
  ASSERT_TRUE(store.ok()) << store.status();
  EXPECT_EQ((*store)->Find("abc123"), "svc-a");
  EXPECT_EQ((*store)->Find("def456"), "ops");
  EXPECT_EQ((*store)->Find("nope"), std::nullopt);
  EXPECT_EQ((*store)->size(), 2u);

  std::string tmp = path + ".new";
  std::ofstream(tmp) << "ghi789 svc-b\n";
  ASSERT_EQ(std::rename(tmp.c_str(), path.c_str()), 0);
  ASSERT_TRUE((*store)->ReloadIfChanged().ok());
  EXPECT_EQ((*store)->Find("abc123"), std::nullopt);
  EXPECT_EQ((*store)->Find("ghi789"), "svc-b");

  // A broken file keeps the previous tokens; the error never shows a token.
  std::ofstream(tmp) << "ghi789 svc-b\nsecret-token-xyz\n";
  ASSERT_EQ(std::rename(tmp.c_str(), path.c_str()), 0);
  absl::Status s = (*store)->ReloadIfChanged();
  EXPECT_THAT(s, StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("line 2")));
  EXPECT_THAT(std::string(s.message()), Not(HasSubstr("secret-token-xyz")));
  EXPECT_EQ((*store)->Find("ghi789"), "svc-b");
}

TEST(TokenStoreTest, UnreadableOrMalformedFileIsAnError) {
  EXPECT_THAT(TokenStore::Open("/nonexistent/tokens").status(),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("auth.tokens_file")));
  EXPECT_THAT(TokenStore::Open(WriteTempFile("dup", "t1 a\nt1 b\n")).status(),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("line 2: duplicate token")));
}

TEST(SecurityConfigTest, DefaultsAreOff) {
  auto parsed = ParseConfig({}, {});
  ASSERT_TRUE(parsed.ok());
  const Config& c = parsed->config;
  EXPECT_EQ(c.metrics.listen, "");
  EXPECT_TRUE(c.metrics.namespaces.empty());
  EXPECT_EQ(c.health.listen, "");
  EXPECT_EQ(c.tls.cert_file, "");
  EXPECT_EQ(c.tls.client_auth, "none");
  EXPECT_EQ(c.tls.reload_interval, absl::Seconds(10));
  EXPECT_TRUE(c.auth.rules.empty());
  EXPECT_FALSE(c.auth.owner_prefix);
  EXPECT_EQ(c.log.format, "text");
}

TEST(SecurityConfigTest, StructuredRulesFromFileEnvironmentAndFlag) {
  std::string path =
      WriteTempFile("config.yaml",
                    "metrics:\n  listen: 0.0.0.0:9411\n  namespaces: [orders, billing]\n"
                    "auth:\n  owner_prefix: true\n  rules:\n"
                    "    - identities: [svc-a]\n      namespaces: [orders]\n"
                    "      permissions: [lock]\n"
                    "log:\n  format: json\n");
  auto parsed = ParseConfig({"--config", path}, {});
  ASSERT_TRUE(parsed.ok()) << parsed.status();
  EXPECT_EQ(parsed->config.metrics.listen, "0.0.0.0:9411");
  EXPECT_THAT(parsed->config.metrics.namespaces, ElementsAre("orders", "billing"));
  ASSERT_EQ(parsed->config.auth.rules.size(), 1u);
  EXPECT_THAT(parsed->config.auth.rules[0].identities, ElementsAre("svc-a"));
  EXPECT_TRUE(parsed->config.auth.owner_prefix);
  EXPECT_EQ(parsed->config.log.format, "json");

  parsed = ParseConfig(
      {"--config", path},
      {{"LOCKD_AUTH_RULES", "[{identities: ops, namespaces: '*', permissions: [admin, read]}]"}});
  ASSERT_TRUE(parsed.ok()) << parsed.status();
  ASSERT_EQ(parsed->config.auth.rules.size(), 1u);
  EXPECT_THAT(parsed->config.auth.rules[0].identities, ElementsAre("ops"));
}

TEST(SecurityConfigTest, BadValuesAreErrorsNamingTheKey) {
  auto err = [](std::vector<std::string> args) {
    auto parsed = ParseConfig(args, {});
    return parsed.ok() ? std::string("ok") : std::string(parsed.status().message());
  };
  EXPECT_THAT(err({"--tls.cert_file=/c.pem"}), HasSubstr("tls.cert_file and tls.key_file"));
  EXPECT_THAT(err({"--tls.client_auth=require"}), HasSubstr("tls.client_auth"));
  EXPECT_THAT(err({"--tls.cert_file=/c", "--tls.key_file=/k", "--tls.client_auth=require"}),
              HasSubstr("tls.client_ca_file"));
  EXPECT_THAT(err({"--tls.client_auth=always"}), HasSubstr("--tls.client_auth"));
  EXPECT_THAT(err({"--log.format=xml"}), HasSubstr("--log.format"));
  EXPECT_THAT(err({"--auth.owner_prefix=yes"}), HasSubstr("--auth.owner_prefix"));
  EXPECT_THAT(err({"--metrics.namespaces=ok,not ok"}), HasSubstr("--metrics.namespaces"));
  EXPECT_THAT(err({"--auth.rules=[{identities: a}]"}),
              HasSubstr("auth.rules[0].namespaces: missing"));
  std::string path =
      WriteTempFile("badrule.yaml", "auth:\n  rules:\n    - {identities: a, oops: 1}\n");
  EXPECT_THAT(err({"--config", path}), HasSubstr("unknown key \"oops\""));
}

TEST(SecurityConfigTest, HelpListsEveryNewKey) {
  std::string help = HelpText();
  for (const char* key :
       {"--metrics.listen", "--metrics.namespaces", "--health.listen", "--tls.cert_file",
        "--tls.key_file", "--tls.client_ca_file", "--tls.client_auth", "--tls.reload_interval",
        "--auth.tokens_file", "--auth.reload_interval", "--auth.rules", "--auth.owner_prefix",
        "--log.format"}) {
    EXPECT_THAT(help, HasSubstr(key));
  }
}

}  // namespace
}  // namespace lockd
