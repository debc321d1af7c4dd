// Unit tests of lockctl's argument parsing, help, exit-code mapping, proto3
// JSON output and completion scripts.

#include <unistd.h>

#include <csignal>
#include <cstdio>
#include <fstream>
#include <map>
#include <string>
#include <vector>

#include "absl/strings/str_join.h"
#include "gmock/gmock.h"
#include "google/protobuf/util/json_util.h"
#include "gtest/gtest.h"
#include "tests/support/status_matchers.h"
#include "tools/lockctl/lockctl.h"
#include "tools/lockctl/proto_json.h"

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
           {{"completion"}, "needs the shell"},
           {{"completion", "fish"}, "needs the shell"},
           {{"health", "--name", "x"}, "unknown flag --name for \"health\""},
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

TEST(ParseArgsTest, VersionHealthAndCompletion) {
  absl::StatusOr<Invocation> inv = Parse({"--version"});
  ASSERT_TRUE(inv.ok()) << inv.status();
  EXPECT_TRUE(inv->version);
  EXPECT_FALSE(inv->help);
  inv = Parse({"health"});
  ASSERT_TRUE(inv.ok()) << inv.status();
  EXPECT_EQ(inv->command, "health");
  EXPECT_EQ(inv->service, "");
  inv = Parse({"health", "--service", "lockd.v1.LockService", "--timeout", "2s"});
  ASSERT_TRUE(inv.ok()) << inv.status();
  EXPECT_EQ(inv->service, "lockd.v1.LockService");
  EXPECT_EQ(inv->timeout, absl::Seconds(2));
  for (const char* shell : {"bash", "zsh"}) {
    inv = Parse({"completion", shell});
    ASSERT_TRUE(inv.ok()) << inv.status();
    EXPECT_EQ(inv->command, "completion");
    EXPECT_EQ(inv->shell, shell);
  }
}

TEST(UsageTest, DocumentsEveryCommandAndEveryExitCode) {
  std::string top = Usage("");
  for (const char* c : {"acquire", "release", "renew", "describe", "list", "run"}) {
    EXPECT_THAT(top, HasSubstr(c));
    EXPECT_THAT(Usage(c), HasSubstr(absl::StrCat("Usage: lockctl ", c)));
  }
  // The table is the one list of commands and flags: each is in the
  // overview, has its help, and its help names each of its flags.
  for (const CommandSpec& c : CommandTable()) {
    EXPECT_THAT(top, HasSubstr(absl::StrCat("  ", c.name, " ")));
    EXPECT_THAT(Usage(c.name), HasSubstr(absl::StrCat("Usage: lockctl ", c.name)));
    for (const std::string& f : c.flags) {
      EXPECT_THAT(Usage(c.name), HasSubstr(absl::StrCat("--", f))) << c.name;
    }
  }
  for (const std::string& f : GlobalFlags()) EXPECT_THAT(top, HasSubstr(absl::StrCat("--", f)));
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

namespace lockd::lockctl {
namespace {

// Proto3 JSON parsed back strictly (an unknown field name is an error).
template <typename Message>
Message ParseJson(const std::string& json) {
  Message m;
  google::protobuf::util::JsonParseOptions strict;
  strict.ignore_unknown_fields = false;
  EXPECT_TRUE(google::protobuf::util::JsonStringToMessage(json, &m, strict).ok()) << json;
  return m;
}

LockInfo HeldLock() {
  LockInfo info;
  info.ns = "ops";
  info.name = "orders/42";
  info.held = true;
  info.owner = "me";
  info.hold_count = 2;
  info.fencing_token = 9007199254740993;  // above 2^53: a JSON number would lose it
  info.ttl_remaining = absl::Milliseconds(59800);
  info.waiters = 1;
  info.backend = "memory";
  return info;
}

TEST(ProtoJsonTest, LockInfoIsProto3JsonAsGrpcurlPrintsIt) {
  const std::string json = ProtoJson(ToProto(HeldLock()));
  EXPECT_THAT(json, HasSubstr("\"ttlRemaining\":\"59.800s\""));
  EXPECT_THAT(json, HasSubstr("\"fencingToken\":\"9007199254740993\""));
  EXPECT_THAT(json, HasSubstr("\"holdCount\":2"));
  EXPECT_THAT(json, HasSubstr("\"namespace\":\"ops\""));
  EXPECT_THAT(json, ::testing::Not(HasSubstr("ttl_remaining")));
  EXPECT_THAT(json, ::testing::Not(HasSubstr("\n")));
  v1::LockInfo back = ParseJson<v1::LockInfo>(json);
  EXPECT_EQ(back.name(), "orders/42");
  EXPECT_TRUE(back.held());
  EXPECT_EQ(back.owner(), "me");
  EXPECT_EQ(back.fencing_token(), 9007199254740993u);
  EXPECT_EQ(back.ttl_remaining().seconds(), 59);
  EXPECT_EQ(back.ttl_remaining().nanos(), 800000000);
  EXPECT_EQ(back.waiters(), 1u);
  EXPECT_EQ(back.backend(), "memory");
}

TEST(ProtoJsonTest, DefaultValuesArePrintedAndAFreeLockHasNoTtl) {
  LockInfo free_lock;
  free_lock.name = "x";
  free_lock.backend = "memory";
  const std::string json = ProtoJson(ToProto(free_lock));
  EXPECT_THAT(json, HasSubstr("\"held\":false"));
  EXPECT_THAT(json, HasSubstr("\"fencingToken\":\"0\""));
  EXPECT_THAT(json, ::testing::Not(HasSubstr("ttlRemaining")));
  EXPECT_THAT(ProtoJson(ToProto(ReleaseOutcome{true, 0})),
              ::testing::Eq("{\"released\":true,\"holdCount\":0}"));
  RenewOutcome renewed;
  renewed.ttl = absl::Seconds(40);
  renewed.fencing_token = 3;
  v1::RenewResponse r = ParseJson<v1::RenewResponse>(ProtoJson(ToProto(renewed)));
  EXPECT_EQ(r.lease_ttl().seconds(), 40);
  EXPECT_EQ(r.fencing_token(), 3u);
  EXPECT_THAT(ProtoJson(ToProto(renewed)), HasSubstr("\"leaseTtl\":\"40s\""));
}

TEST(ProtoJsonTest, ListAndForceReleaseAndNotAcquiredNestTheLockInfo) {
  v1::ListResponse list = ParseJson<v1::ListResponse>(ProtoJson(ToListResponse({HeldLock()})));
  ASSERT_EQ(list.locks_size(), 1);
  EXPECT_EQ(list.locks(0).owner(), "me");
  ForceReleaseOutcome forced;
  forced.released = true;
  forced.previous = HeldLock();
  v1::ForceReleaseResponse f = ParseJson<v1::ForceReleaseResponse>(ProtoJson(ToProto(forced)));
  EXPECT_TRUE(f.released());
  EXPECT_EQ(f.previous().fencing_token(), 9007199254740993u);
  LockInfo holder = HeldLock();
  v1::AcquireResponse no = ParseJson<v1::AcquireResponse>(ProtoJson(NotAcquiredResponse(&holder)));
  EXPECT_FALSE(no.acquired());
  EXPECT_EQ(no.current().owner(), "me");
  EXPECT_THAT(ProtoJson(NotAcquiredResponse(nullptr)), HasSubstr("\"acquired\":false"));
}

TEST(ProtoJsonTest, LockInfoCarriesModeLimitAndEveryHolder) {
  LockInfo sem = HeldLock();
  sem.limit = 4;
  Holder h;
  h.owner = "a";
  h.hold_count = 1;
  h.permits = 3;
  h.fencing_token = 12;
  h.ttl_remaining = absl::Seconds(9);
  sem.holders = {h, h};
  sem.holders[1].owner = "b";
  v1::LockInfo back = ParseJson<v1::LockInfo>(ProtoJson(ToProto(sem)));
  EXPECT_EQ(back.limit(), 4u);
  ASSERT_EQ(back.holders_size(), 2);
  EXPECT_EQ(back.holders(1).owner(), "b");
  EXPECT_EQ(back.holders(0).permits(), 3u);
  EXPECT_EQ(back.holders(0).fencing_token(), 12u);
  EXPECT_EQ(back.holders(0).ttl_remaining().seconds(), 9);
  LockInfo shared = HeldLock();
  shared.mode = HoldMode::kShared;
  EXPECT_THAT(ProtoJson(ToProto(shared)), HasSubstr("\"mode\":\"LOCK_MODE_SHARED\""));
}

TEST(KindFlagsTest, AcquireAndRunTakeSharedLimitAndPermits) {
  absl::StatusOr<Invocation> inv = Parse({"acquire", "--name", "catalog", "--shared"});
  ASSERT_TRUE(inv.ok()) << inv.status();
  EXPECT_TRUE(inv->shared);
  EXPECT_EQ(inv->semaphore_limit, 0u);
  inv = Parse({"run", "--name", "api", "--limit", "4", "--permits=2", "--", "true"});
  ASSERT_TRUE(inv.ok()) << inv.status();
  EXPECT_FALSE(inv->shared);
  EXPECT_EQ(inv->semaphore_limit, 4u);
  EXPECT_EQ(inv->permits, 2u);
  // list --limit is still the number of locks listed.
  inv = Parse({"list", "--limit", "20000"});
  ASSERT_TRUE(inv.ok()) << inv.status();
  EXPECT_EQ(inv->limit, 20000);
  EXPECT_EQ(inv->semaphore_limit, 0u);
}

TEST(KindFlagsTest, RunTakesSeveralLocksInTheirOrder) {
  absl::StatusOr<Invocation> inv =
      Parse({"run", "--lock", "acct/2", "--lock", "acct/1", "--wait", "5s", "--", "./move.sh"});
  ASSERT_TRUE(inv.ok()) << inv.status();
  EXPECT_THAT(inv->locks, ElementsAre("acct/2", "acct/1"));
  EXPECT_EQ(inv->name, "");
  EXPECT_THAT(Parse({"acquire", "--lock", "a"}),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("--lock")));
}

TEST(KindFlagsTest, KindUsageErrorsNameTheProblem) {
  auto fails = [](std::vector<std::string> args, const std::string& why) {
    EXPECT_THAT(Parse(args), StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr(why)))
        << absl::StrJoin(args, " ");
  };
  fails({"acquire", "--name", "x", "--shared", "--limit", "4"}, "not both");
  fails({"acquire", "--name", "x", "--permits", "2"}, "--permits needs --limit");
  fails({"acquire", "--name", "x", "--limit", "4", "--permits", "5"}, "at most --limit");
  fails({"acquire", "--name", "x", "--limit", "0"}, "--limit");
  fails({"acquire", "--name", "x", "--limit", "10001"}, "--limit");
  fails({"acquire", "--name", "x", "--limit", "2", "--permits", "0"}, "--permits");
  fails({"run", "--name", "x", "--lock", "y", "--", "true"}, "--name or --lock");
  fails({"run", "--", "true"}, "(or --lock)");
  fails({"describe", "--name", "x", "--shared"}, "unknown flag --shared");
}

// Runs `script` in bash; returns its stdout.
std::string Bash(const std::string& script) {
  const std::string file = absl::StrCat(::testing::TempDir(), "/lockctl-bash-", getpid(), ".sh");
  std::ofstream(file) << script;
  std::string out;
  if (FILE* p = popen(absl::StrCat("bash ", file, " 2>&1").c_str(), "r")) {
    char buf[4096];
    size_t n;
    while ((n = fread(buf, 1, sizeof(buf), p)) > 0) out.append(buf, n);
    pclose(p);
  }
  std::remove(file.c_str());
  return out;
}

TEST(CompletionTest, BashScriptIsValidAndOffersEveryCommandAndFlag) {
  const std::string script = CompletionScript("bash");
  for (const CommandSpec& c : CommandTable()) {
    EXPECT_THAT(script, HasSubstr(absl::StrCat(" ", c.name))) << c.name;
    for (const std::string& f : c.flags) EXPECT_THAT(script, HasSubstr(absl::StrCat("--", f)));
  }
  for (const std::string& f : GlobalFlags()) EXPECT_THAT(script, HasSubstr(absl::StrCat("--", f)));
  EXPECT_THAT(script, HasSubstr("complete -o default -F _lockctl lockctl"));

  // `bash -n`: the script parses.
  const std::string file = absl::StrCat(::testing::TempDir(), "/lockctl-completion.bash");
  std::ofstream(file) << script;
  EXPECT_EQ(Bash(absl::StrCat("bash -n ", file, " && echo parsed")), "parsed\n");

  // It completes: commands, a command's flags, a flag's values, and skips
  // the value of a flag when it looks for the command.
  auto complete = [&](const std::string& words, int cword) {
    return Bash(absl::StrCat("source ", file, "\nCOMP_WORDS=(", words, ")\nCOMP_CWORD=", cword,
                             "\n_lockctl\necho \"${COMPREPLY[*]}\"\n"));
  };
  EXPECT_EQ(complete("lockctl ac", 1), "acquire\n");
  EXPECT_EQ(complete("lockctl he", 1), "health help\n");
  EXPECT_EQ(complete("lockctl --server x:1 desc", 3), "describe\n");
  EXPECT_EQ(complete("lockctl health --se", 2), "--service --server\n");
  EXPECT_EQ(complete("lockctl describe --output ''", 3), "text json\n");
  EXPECT_EQ(complete("lockctl completion ''", 2), "bash zsh\n");
  EXPECT_EQ(complete("lockctl acquire --sh", 2), "--shared\n");
  EXPECT_EQ(complete("lockctl run --lo", 2), "--lock\n");
  std::remove(file.c_str());
}

TEST(CompletionTest, ZshScriptRunsTheBashOneThroughBashcompinit) {
  const std::string zsh = CompletionScript("zsh");
  EXPECT_THAT(zsh, HasSubstr("bashcompinit"));
  EXPECT_THAT(zsh, HasSubstr(CompletionScript("bash")));
  EXPECT_EQ(CompletionScript("fish"), "");
}

TEST(VerifyFlagsTest, DefaultsAreItsOwnNamespaceAllWorkloadsAndNoNemesis) {
  absl::StatusOr<Invocation> inv =
      Parse({"verify", "--server", "a:1,b:2"}, {{"LOCKD_NAMESPACE", "payments"}});
  ASSERT_TRUE(inv.ok()) << inv.status();
  const verify::VerifyOptions& o = inv->verify;
  EXPECT_EQ(o.server, "a:1,b:2");
  EXPECT_EQ(o.ns, "lockd-verify");  // never the application's namespace by accident
  EXPECT_EQ(o.duration, absl::Seconds(60));
  EXPECT_EQ(o.workers, 16);
  EXPECT_EQ(o.workloads.size(), 4u);
  EXPECT_EQ(o.nemesis, verify::NemesisKind::kNone);
  EXPECT_EQ(o.api, verify::ApiMode::kBoth);
  EXPECT_EQ(o.ttl, absl::Seconds(10));
  EXPECT_FALSE(o.force);
  EXPECT_FALSE(o.json);
  EXPECT_TRUE(inv->verify_check_file.empty());
}

TEST(VerifyFlagsTest, EveryFlagIsParsed) {
  absl::StatusOr<Invocation> inv = Parse(
      {"verify",  "--namespace", "v2",       "--duration", "20s",          "--workers",
       "4",       "--workload",  "rw,mutex", "--nemesis",  "kill-holders", "--nemesis-interval",
       "3s",      "--api",       "unary",    "--ttl",      "2s",           "--wait",
       "1s",      "--hold",      "20ms",     "--rate",     "50",           "--history",
       "h.jsonl", "--force",     "--seed",   "7",          "--output",     "json"});
  ASSERT_TRUE(inv.ok()) << inv.status();
  const verify::VerifyOptions& o = inv->verify;
  EXPECT_EQ(o.ns, "v2");
  EXPECT_EQ(o.duration, absl::Seconds(20));
  EXPECT_EQ(o.workers, 4);
  EXPECT_THAT(o.workloads, ElementsAre(verify::Workload::kRw, verify::Workload::kMutex));
  EXPECT_EQ(o.nemesis, verify::NemesisKind::kKillHolders);
  EXPECT_EQ(o.nemesis_interval, absl::Seconds(3));
  EXPECT_EQ(o.api, verify::ApiMode::kUnary);
  EXPECT_EQ(o.ttl, absl::Seconds(2));
  EXPECT_EQ(o.wait, absl::Seconds(1));
  EXPECT_EQ(o.hold, absl::Milliseconds(20));
  EXPECT_EQ(o.rate, 50);
  EXPECT_EQ(o.history_file, "h.jsonl");
  EXPECT_TRUE(o.force);
  EXPECT_EQ(o.seed, 7u);
  EXPECT_TRUE(o.json);

  inv = Parse({"verify", "--check", "saved.jsonl"});
  ASSERT_TRUE(inv.ok()) << inv.status();
  EXPECT_EQ(inv->verify_check_file, "saved.jsonl");
}

TEST(VerifyFlagsTest, UsageErrorsNameTheFlag) {
  for (const auto& [args, message] : std::vector<std::pair<std::vector<std::string>, std::string>>{
           {{"verify", "--workers", "0"}, "--workers"},
           {{"verify", "--workers", "300"}, "--workers"},
           {{"verify", "--workload", "mutex,queue"}, "\"queue\""},
           {{"verify", "--nemesis", "partition"}, "--nemesis"},
           {{"verify", "--api", "rest"}, "--api"},
           {{"verify", "--duration", "0s"}, "--duration must be positive"},
           {{"verify", "--rate", "-1"}, "--rate"},
           {{"verify", "--namespace", ""}, "--namespace must not be empty"},
           {{"verify", "--nemesis", "abandon", "--nemesis-interval", "10ms"}, "at least 100ms"},
           {{"verify", "--name", "x"}, "unknown flag --name"},
       }) {
    absl::StatusOr<Invocation> inv = Parse(args);
    EXPECT_THAT(inv, StatusIs(absl::StatusCode::kInvalidArgument)) << absl::StrJoin(args, " ");
    EXPECT_THAT(inv.status().message(), HasSubstr(message)) << absl::StrJoin(args, " ");
  }
}

TEST(VerifyFlagsTest, CommandOfSkipsFlagsAndTheirValues) {
  EXPECT_EQ(CommandOf({"--server", "a:1", "verify", "--workers", "x"}), "verify");
  EXPECT_EQ(CommandOf({"--tls", "verify"}), "verify");
  EXPECT_EQ(CommandOf({"--output=json", "acquire", "--name", "verify"}), "acquire");
  EXPECT_EQ(CommandOf({"--server", "verify"}), "");
  EXPECT_EQ(CommandOf({}), "");
}

}  // namespace
}  // namespace lockd::lockctl
