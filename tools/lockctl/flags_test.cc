// Unit tests of lockctl's argument parsing, help and exit-code mapping.

#include <csignal>
#include <map>
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/support/status_matchers.h"
#include "tools/lockctl/lockctl.h"

namespace lockd::lockctl {
namespace {

using ::lockd::testing::StatusIs;
using ::testing::ElementsAre;
using ::testing::HasSubstr;

absl::StatusOr<Invocation> Parse(std::vector<std::string> args,
                                 std::map<std::string, std::string> env = {}) {
  return ParseArgs(args, env);
}

TEST(ParseArgsTest, RunTakesTheCommandAfterDoubleDash) {
  absl::StatusOr<Invocation> inv = Parse({"run", "--name", "nightly-report", "--ttl", "30s",
                                          "--wait", "10m", "--", "./report.sh", "--fast"});
  ASSERT_TRUE(inv.ok()) << inv.status();
  EXPECT_EQ(inv->command, "run");
  EXPECT_EQ(inv->name, "nightly-report");
  EXPECT_EQ(inv->ttl, absl::Seconds(30));
  EXPECT_EQ(inv->wait, absl::Minutes(10));
  EXPECT_EQ(inv->signal, SIGTERM);
  EXPECT_EQ(inv->kill_after, absl::Seconds(10));
  EXPECT_THAT(inv->argv, ElementsAre("./report.sh", "--fast"));
}

TEST(ParseArgsTest, GlobalFlagsGoBeforeOrAfterTheCommandAndAcceptEquals) {
  absl::StatusOr<Invocation> inv =
      Parse({"--server=10.0.0.1:7411", "describe", "--namespace", "ops", "--name=a b/c", "--output",
             "json", "--timeout=250ms"});
  ASSERT_TRUE(inv.ok()) << inv.status();
  EXPECT_EQ(inv->server, "10.0.0.1:7411");
  EXPECT_EQ(inv->ns, "ops");
  EXPECT_EQ(inv->name, "a b/c");
  EXPECT_EQ(inv->output, Output::kJson);
  EXPECT_EQ(inv->timeout, absl::Milliseconds(250));
}

TEST(ParseArgsTest, ServerAndNamespaceDefaultFromTheEnvironment) {
  absl::StatusOr<Invocation> inv =
      Parse({"list"}, {{"LOCKD_SERVER", "lockd:7411"}, {"LOCKD_NAMESPACE", "jobs"}});
  ASSERT_TRUE(inv.ok());
  EXPECT_EQ(inv->server, "lockd:7411");
  EXPECT_EQ(inv->ns, "jobs");
  inv = Parse({"list", "--server", "x:1"}, {{"LOCKD_SERVER", "lockd:7411"}});
  ASSERT_TRUE(inv.ok());
  EXPECT_EQ(inv->server, "x:1");
  inv = Parse({"list"});
  ASSERT_TRUE(inv.ok());
  EXPECT_EQ(inv->server, "127.0.0.1:7411");
  EXPECT_EQ(inv->ns, "");
}

TEST(ParseArgsTest, TlsFlagsImplyTls) {
  absl::StatusOr<Invocation> inv =
      Parse({"describe", "--name", "x", "--tls-ca", "/ca.pem", "--tls-server-name", "lockd.local"});
  ASSERT_TRUE(inv.ok());
  EXPECT_TRUE(inv->tls.enabled);
  EXPECT_EQ(inv->tls.ca_file, "/ca.pem");
  EXPECT_EQ(inv->tls.server_name, "lockd.local");
  inv = Parse({"describe", "--name", "x", "--tls"});
  ASSERT_TRUE(inv.ok());
  EXPECT_TRUE(inv->tls.enabled);
}

TEST(ParseArgsTest, ReleaseTakesAnAcquireRequestIdToUndo) {
  absl::StatusOr<Invocation> inv =
      Parse({"release", "--name", "x", "--owner", "me", "--acquire-request-id", "0af3"});
  ASSERT_TRUE(inv.ok()) << inv.status();
  EXPECT_EQ(inv->acquire_request_id, "0af3");
  inv = Parse({"release", "--name", "x", "--owner", "me"});
  ASSERT_TRUE(inv.ok());
  EXPECT_EQ(inv->acquire_request_id, "");
}

TEST(ParseArgsTest, ReleaseAndRenewTakeTheFencingTokenOfTheHoldTheyMean) {
  absl::StatusOr<Invocation> inv =
      Parse({"release", "--name", "x", "--owner", "me", "--fencing-token", "42"});
  ASSERT_TRUE(inv.ok()) << inv.status();
  EXPECT_EQ(inv->fencing_token, 42u);
  inv = Parse({"renew", "--name", "x", "--owner", "me", "--fencing-token=7", "--ttl", "5s"});
  ASSERT_TRUE(inv.ok()) << inv.status();
  EXPECT_EQ(inv->fencing_token, 7u);
  inv = Parse({"release", "--name", "x", "--owner", "me"});
  ASSERT_TRUE(inv.ok());
  EXPECT_EQ(inv->fencing_token, 0u);  // any hold of the owner
  for (const char* bad : {"0", "-1", "x", ""}) {
    EXPECT_THAT(Parse({"release", "--name", "x", "--owner", "me", "--fencing-token", bad}),
                StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("--fencing-token")))
        << bad;
  }
  EXPECT_THAT(Parse({"acquire", "--name", "x", "--fencing-token", "1"}),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("unknown flag --fencing-token for \"acquire\"")));
  EXPECT_THAT(Usage("release"), HasSubstr("--fencing-token T"));
  EXPECT_THAT(Usage("renew"), HasSubstr("--fencing-token T"));
}

TEST(ParseArgsTest, DurationsAcceptUnitsAndBareSeconds) {
  EXPECT_EQ(*ParseDurationFlag("ttl", "45"), absl::Seconds(45));
  EXPECT_EQ(*ParseDurationFlag("ttl", "1h30m"), absl::Minutes(90));
  EXPECT_EQ(*ParseDurationFlag("ttl", "250ms"), absl::Milliseconds(250));
  EXPECT_THAT(ParseDurationFlag("ttl", "soon"), StatusIs(absl::StatusCode::kInvalidArgument));
  EXPECT_THAT(ParseDurationFlag("ttl", "-5s"), StatusIs(absl::StatusCode::kInvalidArgument));
  EXPECT_THAT(ParseDurationFlag("ttl", "inf"), StatusIs(absl::StatusCode::kInvalidArgument));
}

TEST(ParseArgsTest, SignalsByNameOrNumber) {
  EXPECT_EQ(*ParseSignal("TERM"), SIGTERM);
  EXPECT_EQ(*ParseSignal("sigint"), SIGINT);
  EXPECT_EQ(*ParseSignal("9"), SIGKILL);
  EXPECT_THAT(ParseSignal("FOO"), StatusIs(absl::StatusCode::kInvalidArgument));
  EXPECT_THAT(ParseSignal("0"), StatusIs(absl::StatusCode::kInvalidArgument));
  absl::StatusOr<Invocation> inv =
      Parse({"run", "--name", "x", "--signal", "INT", "--kill-after", "0", "--", "true"});
  ASSERT_TRUE(inv.ok());
  EXPECT_EQ(inv->signal, SIGINT);
  EXPECT_EQ(inv->kill_after, absl::ZeroDuration());
}

TEST(ParseArgsTest, RunUsesTheSessionUnlessUnary) {
  absl::StatusOr<Invocation> inv = Parse({"run", "--name", "x", "--", "true"});
  ASSERT_TRUE(inv.ok());
  EXPECT_FALSE(inv->unary);
  inv = Parse({"run", "--name", "x", "--unary", "--", "true"});
  ASSERT_TRUE(inv.ok());
  EXPECT_TRUE(inv->unary);
  EXPECT_THAT(Parse({"acquire", "--name", "x", "--unary"}),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("unknown flag --unary")));
  EXPECT_THAT(Usage("run"), HasSubstr("--unary"));
}

TEST(ParseArgsTest, UsageErrorsNameTheProblem) {
  struct Case {
    std::vector<std::string> args;
    std::string says;
  };
  for (const Case& c : std::vector<Case>{
           {{}, "no command"},
           {{"frobnicate"}, "unknown command \"frobnicate\""},
           {{"describe"}, "needs --name"},
           {{"release", "--name", "x"}, "needs --owner"},
           {{"renew", "--name", "x"}, "needs --owner"},
           {{"run", "--name", "x"}, "needs a command after --"},
           {{"run", "--name", "x", "--"}, "needs a command after --"},
           {{"run", "--name", "x", "./job.sh"}, "put the command after --"},
           {{"describe", "--name", "x", "--", "ls"}, "takes no command"},
           {{"describe", "--name", "x", "--ttl", "5s"}, "unknown flag --ttl for \"describe\""},
           {{"describe", "--bogus", "1"}, "unknown flag --bogus"},
           {{"describe", "--name"}, "--name needs a value"},
           {{"describe", "--name", "x", "--output", "yaml"}, "--output must be text or json"},
           {{"acquire", "--name", "x", "--ttl", "0s"}, "--ttl must be positive"},
           {{"acquire", "--name", "x", "--wait", "later"}, "not a duration"},
           {{"list", "--limit", "-1"}, "--limit"},
           {{"release", "--name", "x", "--owner", "o", "--acquire-request-id="},
            "--acquire-request-id must not be empty"},
           {{"release", "--name", "x", "--acquire-request-id", "1"}, "needs --owner"},
           {{"acquire", "--name", "x", "--acquire-request-id", "1"},
            "unknown flag --acquire-request-id for \"acquire\""},
           {{"describe", "-x"}, "unknown option"},
       }) {
    absl::StatusOr<Invocation> inv = Parse(c.args);
    ASSERT_FALSE(inv.ok()) << c.says;
    EXPECT_THAT(inv, StatusIs(absl::StatusCode::kInvalidArgument));
    EXPECT_THAT(std::string(inv.status().message()), HasSubstr(c.says));
  }
}

TEST(ParseArgsTest, HelpForToolAndCommands) {
  absl::StatusOr<Invocation> inv = Parse({"--help"});
  ASSERT_TRUE(inv.ok());
  EXPECT_TRUE(inv->help);
  EXPECT_EQ(inv->command, "");
  inv = Parse({"run", "--help"});
  ASSERT_TRUE(inv.ok());
  EXPECT_TRUE(inv->help);
  EXPECT_EQ(inv->command, "run");
  inv = Parse({"help", "list"});
  ASSERT_TRUE(inv.ok());
  EXPECT_TRUE(inv->help);
  EXPECT_EQ(inv->command, "list");
  inv = Parse({"-h"});
  ASSERT_TRUE(inv.ok());
  EXPECT_TRUE(inv->help);
}

TEST(UsageTest, DocumentsEveryCommandAndEveryExitCode) {
  std::string top = Usage("");
  for (const char* c : {"acquire", "release", "renew", "describe", "list", "run"}) {
    EXPECT_THAT(top, HasSubstr(c));
    EXPECT_THAT(Usage(c), HasSubstr(absl::StrCat("Usage: lockctl ", c)));
  }
  for (const char* code : {"  0 ", "  1 ", "  64 ", "  69 ", "  75 ", "  76 ", "126", "127"}) {
    EXPECT_THAT(top, HasSubstr(code));
  }
  EXPECT_THAT(Usage("run"), HasSubstr("--kill-after"));
  EXPECT_THAT(Usage("run"), HasSubstr("LOCKD_FENCING_TOKEN"));
  EXPECT_THAT(Usage("release"), HasSubstr("--acquire-request-id"));
  EXPECT_THAT(Usage("acquire"), HasSubstr("acquire_request_id"));
}

TEST(ExitCodeTest, MapsStatusesToDocumentedCodes) {
  EXPECT_EQ(ExitCodeFor(absl::OkStatus(), false), kExitOk);
  EXPECT_EQ(ExitCodeFor(absl::UnavailableError("x"), false), kExitUnavailable);
  EXPECT_EQ(ExitCodeFor(absl::DeadlineExceededError("x"), true), kExitNotAcquired);
  EXPECT_EQ(ExitCodeFor(absl::DeadlineExceededError("x"), false), kExitUnavailable);
  EXPECT_EQ(ExitCodeFor(absl::InvalidArgumentError("x"), false), kExitError);
  EXPECT_EQ(ExitCodeFor(absl::FailedPreconditionError("not lost"), false), kExitError);
  EXPECT_EQ(kExitUsage, 64);
  EXPECT_EQ(kExitUnavailable, 69);
  EXPECT_EQ(kExitNotAcquired, 75);
  EXPECT_EQ(kExitLockLost, 76);
}

}  // namespace
}  // namespace lockd::lockctl

namespace lockd::lockctl {
namespace {

using ::lockd::testing::StatusIs;

TEST(ForceReleaseFlagsTest, NeedsNameAndReasonAndTakesAToken) {
  auto inv =
      ParseArgs({"force-release", "--name", "job", "--reason", "job died", "--token", "42"}, {});
  ASSERT_TRUE(inv.ok()) << inv.status();
  EXPECT_EQ(inv->command, "force-release");
  EXPECT_EQ(inv->name, "job");
  EXPECT_EQ(inv->reason, "job died");
  EXPECT_EQ(inv->fencing_token, 42u);
  EXPECT_THAT(ParseArgs({"force-release", "--name", "job"}, {}),
              StatusIs(absl::StatusCode::kInvalidArgument));
  EXPECT_THAT(ParseArgs({"force-release", "--reason", "r"}, {}),
              StatusIs(absl::StatusCode::kInvalidArgument));
  EXPECT_THAT(ParseArgs({"force-release", "--name", "j", "--reason", "r", "--token", "x"}, {}),
              StatusIs(absl::StatusCode::kInvalidArgument));
  EXPECT_THAT(ParseArgs({"release", "--name", "j", "--owner", "o", "--reason", "r"}, {}),
              StatusIs(absl::StatusCode::kInvalidArgument));
  EXPECT_THAT(Usage("force-release"), ::testing::HasSubstr("Usage: lockctl force-release"));
  EXPECT_THAT(Usage(""), ::testing::HasSubstr("force-release"));
  EXPECT_THAT(Usage(""), ::testing::HasSubstr("  77 "));
}

TEST(ForceReleaseFlagsTest, BearerTokenFromFlagOrEnvironment) {
  auto inv = ParseArgs({"describe", "--name", "x"},
                       {{"LOCKD_AUTH_TOKEN", "t0"}, {"LOCKD_AUTH_TOKEN_FILE", "/env/file"}});
  ASSERT_TRUE(inv.ok());
  EXPECT_EQ(inv->auth.bearer_token, "t0");
  EXPECT_EQ(inv->auth.bearer_token_file, "/env/file");
  inv = ParseArgs({"describe", "--name", "x", "--auth-token-file", "/flag/file"},
                  {{"LOCKD_AUTH_TOKEN", "t0"}});
  ASSERT_TRUE(inv.ok());
  EXPECT_EQ(inv->auth.bearer_token, "");
  EXPECT_EQ(inv->auth.bearer_token_file, "/flag/file");
  EXPECT_EQ(ExitCodeFor(absl::PermissionDeniedError("x"), false), kExitNoPermission);
  EXPECT_EQ(ExitCodeFor(absl::UnauthenticatedError("x"), false), kExitNoPermission);
  EXPECT_EQ(kExitNoPermission, 77);
}

}  // namespace
}  // namespace lockd::lockctl
