// lockctl end to end against a real lockd: every subcommand, the documented
// exit codes, --output json as proto3 JSON (parsed back), health checks,
// the completion script, --version of lockctl and lockd, release/renew of the hold with a given
// fencing token, a --server list with a dead address, `run` as a distributed flock (mutual
// exclusion between racing runs, exit status pass-through, signals on loss, forwarding), shared
// locks, semaphores and `run --lock a --lock b` (AcquireAll), and
// acquires whose reply never comes (through StallProxy): undone automatically, or by hand with
// `release
// --acquire-request-id` when even the undo gets no answer.

#include <signal.h>
#include <sys/wait.h>

#include <algorithm>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "gmock/gmock.h"
#include "google/protobuf/util/json_util.h"
#include "gtest/gtest.h"
#include "lockd/client.h"
#include "lockd/v1/lock.pb.h"
#include "tests/integration/clients/restartable_lockd.h"
#include "tests/integration/clients/tls_server.h"
#include "tests/support/lockd_process.h"
#include "tests/support/process.h"
#include "tests/support/stall_proxy.h"

namespace lockd {
namespace {

using ::lockd::testing::ReadFileOrEmpty;
using ::lockd::testing::RestartableLockd;
using ::lockd::testing::StallProxy;
using ::lockd::testing::Subprocess;
using ::lockd::testing::TempDir;
using ::lockd::testing::WaitFor;
using ::testing::HasSubstr;

constexpr int kNotAcquired = 75;
constexpr int kLockLost = 76;
constexpr int kUnavailable = 69;
constexpr int kUsage = 64;

int ExitCode(int wait_status) {
  if (wait_status == -1) return -1;
  if (WIFEXITED(wait_status)) return WEXITSTATUS(wait_status);
  if (WIFSIGNALED(wait_status)) return 128 + WTERMSIG(wait_status);
  return -2;
}

// The value of the "key: value" line in lockctl's text output.
std::string Field(const std::string& output, absl::string_view key) {
  for (absl::string_view line : absl::StrSplit(output, '\n')) {
    if (absl::ConsumePrefix(&line, absl::StrCat(key, ": "))) return std::string(line);
  }
  return "";
}

// The one line of `output` that is a JSON object, parsed strictly (an
// unknown field name fails) into Message.
template <typename Message>
Message JsonLine(const std::string& output) {
  Message m;
  google::protobuf::util::JsonParseOptions strict;
  strict.ignore_unknown_fields = false;
  for (absl::string_view line : absl::StrSplit(output, '\n')) {
    if (!absl::StartsWith(line, "{")) continue;
    auto s = google::protobuf::util::JsonStringToMessage(std::string(line), &m, strict);
    EXPECT_TRUE(s.ok()) << s << ": " << line;
    return m;
  }
  ADD_FAILURE() << "no JSON line in: " << output;
  return m;
}

class LockctlTest : public ::testing::Test {
 protected:
  struct Result {
    int code;
    std::string output;  // stdout and stderr
  };

  void SetUp() override {
    lockd_.emplace(tmp_.path());
    ASSERT_TRUE(lockd_->Start().ok());
  }

  // lockctl with `args` against lockd (a later --server overrides it).
  std::unique_ptr<Subprocess> Start(std::vector<std::string> args) {
    std::vector<std::string> argv = {LOCKCTL_BINARY, "--server", lockd_->address()};
    argv.insert(argv.end(), args.begin(), args.end());
    absl::StatusOr<std::unique_ptr<Subprocess>> p =
        Subprocess::Start(argv, absl::StrCat(tmp_.path(), "/lockctl-", ++runs_, ".log"));
    EXPECT_TRUE(p.ok()) << p.status();
    return p.ok() ? *std::move(p) : nullptr;
  }

  Result Run(std::vector<std::string> args, absl::Duration timeout = absl::Seconds(20)) {
    std::unique_ptr<Subprocess> p = Start(std::move(args));
    if (p == nullptr) return {-1, ""};
    int status = p->Wait(timeout);
    return {ExitCode(status), p->Log()};
  }

  std::string Path(absl::string_view name) const { return absl::StrCat(tmp_.path(), "/", name); }

  // The lock's state as a direct client sees it.
  LockInfo Describe(const std::string& name) {
    absl::StatusOr<Client> c = Client::Connect(lockd_->address());
    if (!c.ok()) return {};
    absl::StatusOr<LockInfo> info = c->Describe(name);
    return info.ok() ? *info : LockInfo{};
  }

  std::unique_ptr<Subprocess> StartAcquireWhoseReplyIsHeld(StallProxy& proxy,
                                                           const std::string& name);

  bool WaitForHolder(const std::string& name, const std::string& owner,
                     absl::Duration timeout = absl::Seconds(10)) {
    return WaitFor(
        [&] {
          LockInfo info = Describe(name);
          return owner.empty() ? !info.held : info.held && info.owner == owner;
        },
        timeout, absl::Milliseconds(5));
  }

  TempDir tmp_;
  std::optional<RestartableLockd> lockd_;
  int runs_ = 0;
};

TEST_F(LockctlTest, AcquireRenewDescribeReleaseRoundTrip) {
  Result acq = Run({"acquire", "--name", "orders/42", "--owner", "me", "--ttl", "20s"});
  ASSERT_EQ(acq.code, 0) << acq.output;
  EXPECT_EQ(Field(acq.output, "owner"), "me");
  std::string token = Field(acq.output, "fencing_token");
  EXPECT_FALSE(token.empty());

  Result desc = Run({"describe", "--name", "orders/42"});
  ASSERT_EQ(desc.code, 0) << desc.output;
  EXPECT_EQ(Field(desc.output, "held"), "true");
  EXPECT_EQ(Field(desc.output, "owner"), "me");
  EXPECT_EQ(Field(desc.output, "fencing_token"), token);

  Result other = Run({"acquire", "--name", "orders/42", "--owner", "other"});
  EXPECT_EQ(other.code, kNotAcquired) << other.output;
  EXPECT_THAT(other.output, HasSubstr("\"me\""));
  Result other_json =
      Run({"acquire", "--name", "orders/42", "--owner", "other", "--output", "json"});
  EXPECT_EQ(other_json.code, kNotAcquired);
  EXPECT_THAT(other_json.output, HasSubstr("{\"acquired\":false"));
  EXPECT_THAT(other_json.output, HasSubstr("\"owner\":\"me\""));
  v1::AcquireResponse not_acquired = JsonLine<v1::AcquireResponse>(other_json.output);
  EXPECT_FALSE(not_acquired.acquired());
  EXPECT_EQ(not_acquired.current().owner(), "me");
  EXPECT_EQ(absl::StrCat(not_acquired.current().fencing_token()), token);

  Result desc_json = Run({"describe", "--name", "orders/42", "--output", "json"});
  ASSERT_EQ(desc_json.code, 0) << desc_json.output;
  // proto3 JSON as grpcurl prints it: lowerCamelCase, uint64 as a string,
  // durations in seconds.
  EXPECT_THAT(desc_json.output, HasSubstr(absl::StrCat("\"fencingToken\":\"", token, "\"")));
  EXPECT_THAT(desc_json.output,
              ::testing::ContainsRegex("\"ttlRemaining\":\"[0-9]+(\\.[0-9]+)?s\""));
  EXPECT_THAT(desc_json.output, ::testing::Not(HasSubstr("ttl_remaining")));
  v1::LockInfo described = JsonLine<v1::LockInfo>(desc_json.output);
  EXPECT_EQ(described.name(), "orders/42");
  EXPECT_TRUE(described.held());
  EXPECT_EQ(described.owner(), "me");
  EXPECT_EQ(described.hold_count(), 1u);
  EXPECT_GT(described.ttl_remaining().seconds(), 0);
  EXPECT_LE(described.ttl_remaining().seconds(), 20);
  EXPECT_EQ(described.backend(), "memory");

  Result renew = Run({"renew", "--name", "orders/42", "--owner", "me", "--ttl", "40s"});
  ASSERT_EQ(renew.code, 0) << renew.output;
  EXPECT_EQ(Field(renew.output, "ttl"), "40s");
  EXPECT_EQ(Field(renew.output, "fencing_token"), token);
  Result renew_json =
      Run({"renew", "--name", "orders/42", "--owner", "me", "--ttl", "40s", "--output", "json"});
  ASSERT_EQ(renew_json.code, 0) << renew_json.output;
  EXPECT_THAT(renew_json.output, HasSubstr("\"leaseTtl\":\"40s\""));
  EXPECT_EQ(absl::StrCat(JsonLine<v1::RenewResponse>(renew_json.output).fencing_token()), token);

  Result wrong = Run({"release", "--name", "orders/42", "--owner", "other"});
  EXPECT_EQ(wrong.code, kLockLost) << wrong.output;
  Result rel = Run({"release", "--name", "orders/42", "--owner", "me", "--output", "json"});
  ASSERT_EQ(rel.code, 0) << rel.output;
  EXPECT_THAT(rel.output, HasSubstr("{\"released\":true,\"holdCount\":0}"));
  EXPECT_TRUE(JsonLine<v1::ReleaseResponse>(rel.output).released());
  EXPECT_EQ(Field(Run({"describe", "--name", "orders/42"}).output, "held"), "false");
  EXPECT_EQ(Run({"renew", "--name", "orders/42", "--owner", "me"}).code, kLockLost);
}

// `release`/`renew --fencing-token T` act only on the hold with token T: once
// the owner released the lock and acquired it again (a new token), a release
// or renew meant for the old hold leaves the new one alone (exit 76).
TEST_F(LockctlTest, ReleaseAndRenewWithAnOldFencingTokenLeaveTheOwnersNewHoldAlone) {
  Result first = Run({"acquire", "--name", "x", "--owner", "me", "--ttl", "30s"});
  ASSERT_EQ(first.code, 0) << first.output;
  const std::string t1 = Field(first.output, "fencing_token");
  ASSERT_EQ(Run({"release", "--name", "x", "--owner", "me", "--fencing-token", t1}).code, 0);
  Result second = Run({"acquire", "--name", "x", "--owner", "me", "--ttl", "5s"});
  ASSERT_EQ(second.code, 0) << second.output;
  const std::string t2 = Field(second.output, "fencing_token");
  ASSERT_NE(t2, t1);

  Result late_renew =
      Run({"renew", "--name", "x", "--owner", "me", "--ttl", "30s", "--fencing-token", t1});
  EXPECT_EQ(late_renew.code, kLockLost) << late_renew.output;
  Result late_release = Run({"release", "--name", "x", "--owner", "me", "--fencing-token", t1});
  EXPECT_EQ(late_release.code, kLockLost) << late_release.output;
  LockInfo info = Describe("x");
  EXPECT_TRUE(info.held);
  EXPECT_EQ(absl::StrCat(info.fencing_token), t2);
  EXPECT_LE(info.ttl_remaining, absl::Seconds(5));  // not renewed to 30 s

  Result renew = Run({"renew", "--name", "x", "--owner", "me", "--fencing-token", t2});
  EXPECT_EQ(renew.code, 0) << renew.output;
  Result release = Run({"release", "--name", "x", "--owner", "me", "--fencing-token", t2});
  EXPECT_EQ(release.code, 0) << release.output;
  EXPECT_FALSE(Describe("x").held);
}

TEST_F(LockctlTest, ListShowsHeldLocksByPrefixAsTextAndJson) {
  for (const char* n : {"jobs/a", "jobs/b", "other"}) {
    ASSERT_EQ(Run({"acquire", "--name", n, "--namespace", "ops"}).code, 0);
  }
  for (const char* reader : {"r1", "r2"}) {
    ASSERT_EQ(
        Run({"acquire", "--name", "jobs/r", "--namespace", "ops", "--shared", "--owner", reader})
            .code,
        0);
  }
  ASSERT_EQ(Run({"acquire", "--name", "jobs/s", "--namespace", "ops", "--limit", "4", "--permits",
                 "3", "--owner", "s1"})
                .code,
            0);
  Result text = Run({"list", "--namespace", "ops", "--prefix", "jobs/"});
  ASSERT_EQ(text.code, 0) << text.output;
  // A line per name: NAME MODE HOLDERS OWNER FENCING_TOKEN HOLDS TTL WAITERS.
  std::map<std::string, std::vector<std::string>> rows;
  for (absl::string_view line : absl::StrSplit(text.output, '\n', absl::SkipEmpty())) {
    std::vector<std::string> cells = absl::StrSplit(line, ' ', absl::SkipEmpty());
    rows[cells[0]] = cells;
  }
  EXPECT_THAT(rows["NAME"], ::testing::ElementsAre("NAME", "MODE", "HOLDERS", "OWNER",
                                                   "FENCING_TOKEN", "HOLDS", "TTL", "WAITERS"));
  EXPECT_THAT(rows, ::testing::Not(::testing::Contains(::testing::Key("other"))));
  ASSERT_EQ(rows["jobs/a"].size(), 8u) << text.output;
  ASSERT_EQ(rows["jobs/r"].size(), 8u) << text.output;
  ASSERT_EQ(rows["jobs/s"].size(), 8u) << text.output;
  EXPECT_EQ(rows["jobs/a"][1], "exclusive");
  EXPECT_EQ(rows["jobs/a"][2], "1");
  EXPECT_EQ(rows["jobs/b"][1], "exclusive");
  EXPECT_EQ(rows["jobs/r"][1], "shared");
  EXPECT_EQ(rows["jobs/r"][2], "2");
  EXPECT_EQ(rows["jobs/r"][3], "r2") << "the newest holder";
  EXPECT_EQ(rows["jobs/s"][1], "semaphore/4");
  EXPECT_EQ(rows["jobs/s"][2], "1");
  EXPECT_EQ(rows["jobs/s"][3], "s1");
  Result json = Run({"list", "--namespace", "ops", "--output", "json", "--limit", "1"});
  ASSERT_EQ(json.code, 0) << json.output;
  EXPECT_THAT(json.output, HasSubstr("{\"locks\":[{\"namespace\":\"ops\",\"name\":\"jobs/a\""));
  EXPECT_THAT(json.output, ::testing::Not(HasSubstr("jobs/b")));
  v1::ListResponse listed = JsonLine<v1::ListResponse>(json.output);
  ASSERT_EQ(listed.locks_size(), 1);
  EXPECT_EQ(listed.locks(0).namespace_(), "ops");
  EXPECT_EQ(listed.locks(0).name(), "jobs/a");
  EXPECT_TRUE(listed.locks(0).held());
  EXPECT_TRUE(listed.locks(0).has_ttl_remaining());
}

TEST_F(LockctlTest, ExitCodesForUsageHelpAndUnavailableServer) {
  EXPECT_EQ(Run({"frobnicate"}).code, kUsage);
  EXPECT_EQ(Run({"describe"}).code, kUsage);
  Result help = Run({"--help"});
  EXPECT_EQ(help.code, 0);
  EXPECT_THAT(help.output, HasSubstr("Exit codes"));
  EXPECT_EQ(Run({"run", "--help"}).code, 0);
  lockd_->Kill();
  Result down = Run({"describe", "--name", "x", "--timeout", "1s"});
  EXPECT_EQ(down.code, kUnavailable) << down.output;
  EXPECT_EQ(Run({"run", "--name", "x", "--timeout", "1s", "--", "true"}).code, kUnavailable);
}

// `lockctl health` is a gRPC health check usable as a probe: exit 0 only
// for SERVING.
TEST_F(LockctlTest, HealthIsServingAgainstARunningLockdAndFailsOtherwise) {
  Result live = Run({"health"});
  EXPECT_EQ(live.code, 0) << live.output;
  EXPECT_EQ(live.output, "SERVING\n");
  Result ready = Run({"health", "--service", "lockd.v1.LockService", "--output", "json"});
  EXPECT_EQ(ready.code, 0) << ready.output;
  EXPECT_EQ(ready.output, "{\"status\":\"SERVING\"}\n");
  Result unknown = Run({"health", "--service", "no.such.Service"});
  EXPECT_EQ(unknown.code, 1) << unknown.output;
  EXPECT_THAT(unknown.output, HasSubstr("no.such.Service"));
  const std::string closed = absl::StrCat("127.0.0.1:", testing::FreePort());
  Result down = Run({"--server", closed, "health", "--timeout", "2s"});
  EXPECT_EQ(down.code, kUnavailable) << down.output;
  EXPECT_THAT(down.output, HasSubstr("health check"));
}

// Both binaries print the one version (the VERSION file) and git revision,
// which lockd's start log line also shows.
TEST_F(LockctlTest, VersionAndCompletion) {
  std::vector<std::string> versions;  // "0.1.0 (git REV)" of lockctl, then of lockd
  for (const std::string& binary : {std::string(LOCKCTL_BINARY), testing::LockdBinary()}) {
    absl::StatusOr<std::unique_ptr<Subprocess>> p =
        Subprocess::Start({binary, "--version"}, Path(absl::StrCat("version-", ++runs_, ".log")));
    ASSERT_TRUE(p.ok()) << p.status();
    EXPECT_EQ(ExitCode((*p)->Wait(absl::Seconds(20))), 0) << (*p)->Log();
    const std::string program = binary == LOCKCTL_BINARY ? "lockctl" : "lockd";
    std::string out = (*p)->Log();
    EXPECT_THAT(out, ::testing::MatchesRegex(
                         absl::StrCat(program, " [0-9]+\\.[0-9]+\\.[0-9]+ \\(git [0-9a-z]+\\)\n")));
    absl::string_view rest = out;
    absl::ConsumePrefix(&rest, program + " ");
    absl::ConsumeSuffix(&rest, "\n");
    versions.emplace_back(rest);
  }
  ASSERT_EQ(versions.size(), 2u);
  EXPECT_EQ(versions[0], versions[1]);
  // "0.1.0 (git REV)" -> "version=0.1.0 revision=REV" in the start line.
  std::vector<std::string> parts =
      absl::StrSplit(versions[1], absl::ByAnyChar(" ()"), absl::SkipEmpty());
  ASSERT_EQ(parts.size(), 3u) << versions[1];
  absl::StatusOr<std::unique_ptr<testing::LockdProcess>> lockd =
      testing::LockdProcess::Start({}, tmp_.path());
  ASSERT_TRUE(lockd.ok()) << lockd.status();
  EXPECT_THAT((*lockd)->process().Log(),
              HasSubstr(absl::StrCat("version=", parts[0], " revision=", parts[2])));

  Result bash = Run({"completion", "bash"});
  EXPECT_EQ(bash.code, 0) << bash.output;
  EXPECT_THAT(bash.output, HasSubstr("complete -o default -F _lockctl lockctl"));
  EXPECT_THAT(bash.output, HasSubstr("force-release"));
  EXPECT_EQ(Run({"completion", "fish"}).code, kUsage);
}

TEST_F(LockctlTest, ServerListWithADeadAddressStillWorks) {
  const std::string dead = absl::StrCat("127.0.0.1:", testing::FreePort());
  for (const std::string& list :
       {absl::StrCat(dead, ",", lockd_->address()), absl::StrCat(lockd_->address(), ", ", dead)}) {
    Result acq = Run({"--server", list, "acquire", "--name", "listed", "--owner", "me"});
    ASSERT_EQ(acq.code, 0) << list << ": " << acq.output;
    Result desc = Run({"--server", list, "describe", "--name", "listed"});
    EXPECT_EQ(Field(desc.output, "owner"), "me") << list << ": " << desc.output;
    Result rel = Run({"--server", list, "release", "--name", "listed", "--owner", "me"});
    EXPECT_EQ(rel.code, 0) << list << ": " << rel.output;
    EXPECT_EQ(Run({"--server", list, "run", "--name", "listed", "--", "true"}).code, 0) << list;
  }
  EXPECT_EQ(Run({"--server", absl::StrCat(dead, ",127.0.0.1:1"), "describe", "--name", "x",
                 "--timeout", "1s"})
                .code,
            kUnavailable);
  Result bad = Run({"--server", absl::StrCat(dead, ",127.0.0.1"), "describe", "--name", "x"});
  EXPECT_EQ(bad.code, kUsage) << bad.output;
  EXPECT_THAT(bad.output, HasSubstr("\"127.0.0.1\""));
}

TEST_F(LockctlTest, RunPassesTheExitCodeThroughAndReleases) {
  Result r = Run({"run", "--name", "job", "--", "sh", "-c",
                  "echo token=$LOCKD_FENCING_TOKEN name=$LOCKD_LOCK_NAME; exit 7"});
  EXPECT_EQ(r.code, 7) << r.output;
  EXPECT_THAT(r.output, HasSubstr("name=job"));
  EXPECT_THAT(r.output, ::testing::ContainsRegex("token=[1-9][0-9]*"));
  EXPECT_EQ(Field(Run({"describe", "--name", "job"}).output, "held"), "false");
  EXPECT_EQ(Run({"run", "--name", "job", "--", "true"}).code, 0);
  EXPECT_EQ(Run({"run", "--name", "job", "--", "/nonexistent/command"}).code, 127);
  EXPECT_EQ(Field(Run({"describe", "--name", "job"}).output, "held"), "false");
}

TEST_F(LockctlTest, SharedAcquiresOverlapAndDescribeListsEveryHolder) {
  Result r1 = Run({"acquire", "--name", "catalog", "--shared", "--owner", "r1", "--ttl", "20s"});
  ASSERT_EQ(r1.code, 0) << r1.output;
  EXPECT_EQ(Field(r1.output, "mode"), "shared");
  Result r2 = Run({"acquire", "--name", "catalog", "--shared", "--owner", "r2", "--ttl", "20s"});
  ASSERT_EQ(r2.code, 0) << r2.output;
  EXPECT_EQ(Run({"acquire", "--name", "catalog", "--owner", "w"}).code, kNotAcquired);
  Result d = Run({"describe", "--name", "catalog"});
  ASSERT_EQ(d.code, 0) << d.output;
  EXPECT_EQ(Field(d.output, "mode"), "shared");
  EXPECT_EQ(Field(d.output, "holders"), "2");
  EXPECT_THAT(d.output, HasSubstr("  - owner: r1  mode: shared  hold_count: 1  permits: 0"));
  EXPECT_THAT(d.output, HasSubstr("  - owner: r2  mode: shared"));
  v1::LockInfo json =
      JsonLine<v1::LockInfo>(Run({"describe", "--name", "catalog", "--output", "json"}).output);
  EXPECT_EQ(json.mode(), v1::LOCK_MODE_SHARED);
  ASSERT_EQ(json.holders_size(), 2);
  EXPECT_EQ(json.holders(0).owner(), "r1");
  EXPECT_TRUE(json.holders(1).has_ttl_remaining());
  // Another kind: refused at once with lockd's reason, exit 1.
  Result sem = Run({"acquire", "--name", "catalog", "--limit", "4", "--wait", "10s"});
  EXPECT_EQ(sem.code, 1) << sem.output;
  EXPECT_THAT(sem.output, HasSubstr("LOCK_KIND_MISMATCH"));
}

TEST_F(LockctlTest, SemaphoreRunsHoldTheirPermitsWhileTheCommandRuns) {
  Result held = Run({"acquire", "--name", "api", "--limit", "3", "--permits", "2", "--owner", "a",
                     "--ttl", "20s"});
  ASSERT_EQ(held.code, 0) << held.output;
  EXPECT_EQ(Field(held.output, "permits"), "2");
  // One permit left: a run of 1 fits, a run of 2 does not.
  EXPECT_EQ(Run({"run", "--name", "api", "--limit", "3", "--", "true"}).code, 0);
  EXPECT_EQ(Run({"run", "--name", "api", "--limit", "3", "--permits", "2", "--", "true"}).code,
            kNotAcquired);
  Result d = Run({"describe", "--name", "api"});
  EXPECT_EQ(Field(d.output, "limit"), "3");
  EXPECT_EQ(Field(d.output, "holders"), "1");
}

TEST_F(LockctlTest, RunWithSeveralLocksTakesThemAllOrNone) {
  Result r = Run({"run", "--lock", "acct/2", "--lock", "acct/1", "--", "sh", "-c",
                  "echo names=$LOCKD_LOCK_NAME tokens=$LOCKD_FENCING_TOKEN"});
  EXPECT_EQ(r.code, 0) << r.output;
  EXPECT_THAT(r.output, HasSubstr("names=acct/2,acct/1"));
  EXPECT_THAT(r.output, ::testing::ContainsRegex("tokens=[1-9][0-9]*,[1-9][0-9]*"));
  EXPECT_EQ(Field(Run({"describe", "--name", "acct/1"}).output, "held"), "false");
  // One of them held by someone else: none is taken.
  ASSERT_EQ(Run({"acquire", "--name", "acct/1", "--owner", "other", "--ttl", "20s"}).code, 0);
  Result blocked = Run({"run", "--lock", "acct/2", "--lock", "acct/1", "--", "true"});
  EXPECT_EQ(blocked.code, kNotAcquired) << blocked.output;
  EXPECT_EQ(Field(Run({"describe", "--name", "acct/2"}).output, "held"), "false");
}

TEST_F(LockctlTest, RacingRunsNeverRunTheirCommandsAtTheSameTime) {
  const std::string log = Path("race.log");
  const std::string script =
      absl::StrCat("echo start $$ >> ", log, "; sleep 0.3; echo end $$ >> ", log);
  std::vector<std::unique_ptr<Subprocess>> runs;
  for (int i = 0; i < 4; ++i) {
    runs.push_back(Start({"run", "--name", "nightly-report", "--ttl", "5s", "--wait", "30s", "--",
                          "sh", "-c", script}));
  }
  for (auto& p : runs) {
    ASSERT_NE(p, nullptr);
    EXPECT_EQ(ExitCode(p->Wait(absl::Seconds(30))), 0) << p->Log();
  }
  std::vector<std::string> lines = absl::StrSplit(ReadFileOrEmpty(log), '\n', absl::SkipEmpty());
  ASSERT_EQ(lines.size(), 8u) << ReadFileOrEmpty(log);
  for (size_t i = 0; i < lines.size(); i += 2) {
    // Each start is immediately followed by the end of the same command.
    ASSERT_TRUE(absl::StartsWith(lines[i], "start ")) << ReadFileOrEmpty(log);
    EXPECT_EQ(lines[i + 1], absl::StrCat("end ", lines[i].substr(6))) << ReadFileOrEmpty(log);
  }
}

TEST_F(LockctlTest, RacingRunsWithoutWaitRunExactlyOneCommand) {
  const std::string log = Path("once.log");
  std::vector<std::unique_ptr<Subprocess>> runs;
  for (int i = 0; i < 3; ++i) {
    runs.push_back(Start({"run", "--name", "cron", "--", "sh", "-c",
                          absl::StrCat("echo ran >> ", log, "; sleep 1.5")}));
  }
  int ok = 0, busy = 0;
  for (auto& p : runs) {
    ASSERT_NE(p, nullptr);
    int code = ExitCode(p->Wait(absl::Seconds(20)));
    if (code == 0) ++ok;
    if (code == kNotAcquired) ++busy;
  }
  EXPECT_EQ(ok, 1);
  EXPECT_EQ(busy, 2);
  EXPECT_EQ(ReadFileOrEmpty(log), "ran\n");
}

TEST_F(LockctlTest, LostLockSendsTheSignalAndExitsWithTheLostCode) {
  const std::string log = Path("lost.log");
  std::unique_ptr<Subprocess> run =
      Start({"run", "--name", "lost", "--ttl", "1s", "--", "sh", "-c",
             absl::StrCat("trap 'echo got-term >> ", log, "; exit 0' TERM; echo started >> ", log,
                          "; sleep 30 & wait")});
  ASSERT_NE(run, nullptr);
  ASSERT_TRUE(WaitFor([&] { return absl::StrContains(ReadFileOrEmpty(log), "started"); },
                      absl::Seconds(10)));
  ASSERT_TRUE(lockd_->Restart().ok());  // the hold is gone: the next renew is LOCK_NOT_HELD
  int code = ExitCode(run->Wait(absl::Seconds(10)));
  EXPECT_EQ(code, kLockLost) << run->Log();
  EXPECT_THAT(ReadFileOrEmpty(log), HasSubstr("got-term"));
  EXPECT_THAT(run->Log(), HasSubstr("lost"));
}

TEST_F(LockctlTest, CommandIgnoringTheSignalIsKilledAfterKillAfter) {
  const std::string log = Path("stubborn.log");
  std::unique_ptr<Subprocess> run =
      Start({"run", "--name", "stubborn", "--ttl", "600ms", "--kill-after", "500ms", "--", "sh",
             "-c", absl::StrCat("trap '' TERM; echo started >> ", log, "; sleep 30")});
  ASSERT_NE(run, nullptr);
  ASSERT_TRUE(WaitFor([&] { return absl::StrContains(ReadFileOrEmpty(log), "started"); },
                      absl::Seconds(10)));
  lockd_->Kill();  // renewals fail; the lease's validity runs out
  int code = ExitCode(run->Wait(absl::Seconds(10)));
  EXPECT_EQ(code, kLockLost) << run->Log();
  EXPECT_THAT(run->Log(), HasSubstr("SIGKILL"));
}

// `run` holds over a session without keep_on_disconnect: lockd frees the
// lock as soon as the stream breaks, not when the 30 s lease ends.
TEST_F(LockctlTest, KilledRunFreesTheLockAtOnce) {
  const std::string log = Path("killed.log");
  std::unique_ptr<Subprocess> run =
      Start({"run", "--name", "killed", "--ttl", "30s", "--", "sh", "-c",
             absl::StrCat("echo started >> ", log, "; sleep 30")});
  ASSERT_NE(run, nullptr);
  ASSERT_TRUE(WaitFor([&] { return absl::StrContains(ReadFileOrEmpty(log), "started"); },
                      absl::Seconds(10)));
  ASSERT_TRUE(Describe("killed").held);
  run->Kill();  // SIGKILL: no release
  EXPECT_TRUE(WaitFor([&] { return !Describe("killed").held; }, absl::Seconds(1)))
      << "the lock outlived the killed lockctl: " << Describe("killed").owner;
}

// A lockctl that hangs (SIGSTOP: its TCP connection stays up, nothing
// answers) stops answering lockd's keepalive pings; lockd closes the
// connection and frees the lock within keepalive_time + keepalive_timeout,
// instead of renewing the hold for as long as the connection looks open.
TEST_F(LockctlTest, HungRunFreesTheLockWhenLockdsPingGoesUnanswered) {
  RestartableLockd pinging(tmp_.path(), {"--keepalive_time=1s", "--keepalive_timeout=1s"});
  ASSERT_TRUE(pinging.Start().ok());
  const std::string log = Path("hung.log");
  std::unique_ptr<Subprocess> run =
      Start({"--server", pinging.address(), "run", "--name", "hung", "--ttl", "30s", "--", "sh",
             "-c", absl::StrCat("echo started >> ", log, "; sleep 30")});
  ASSERT_NE(run, nullptr);
  ASSERT_TRUE(WaitFor([&] { return absl::StrContains(ReadFileOrEmpty(log), "started"); },
                      absl::Seconds(10)));
  auto held = [&] {
    return Field(Run({"--server", pinging.address(), "describe", "--name", "hung"}).output,
                 "held") == "true";
  };
  ASSERT_TRUE(held());
  run->Signal(SIGSTOP);
  absl::SleepFor(absl::Milliseconds(500));
  EXPECT_TRUE(held()) << "freed before any ping could go unanswered";
  EXPECT_TRUE(WaitFor([&] { return !held(); }, absl::Seconds(6)))
      << "the hung lockctl kept the lock: lockd never noticed it had stopped answering";
  run->Kill();
}

// --unary: no session; the hold of a killed lockctl ends with its lease.
TEST_F(LockctlTest, KilledUnaryRunHoldsTheLockUntilItsLeaseEnds) {
  const std::string log = Path("unary.log");
  std::unique_ptr<Subprocess> run =
      Start({"run", "--unary", "--name", "unary", "--ttl", "30s", "--", "sh", "-c",
             absl::StrCat("echo started >> ", log, "; sleep 30")});
  ASSERT_NE(run, nullptr);
  ASSERT_TRUE(WaitFor([&] { return absl::StrContains(ReadFileOrEmpty(log), "started"); },
                      absl::Seconds(10)));
  run->Kill();
  absl::SleepFor(absl::Milliseconds(1500));
  EXPECT_TRUE(Describe("unary").held);
}

TEST_F(LockctlTest, SigtermToLockctlIsForwardedAndTheLockReleased) {
  const std::string log = Path("fwd.log");
  std::unique_ptr<Subprocess> run =
      Start({"run", "--name", "fwd", "--", "sh", "-c",
             absl::StrCat("echo started >> ", log, "; sleep 30 & wait")});
  ASSERT_NE(run, nullptr);
  ASSERT_TRUE(WaitFor([&] { return absl::StrContains(ReadFileOrEmpty(log), "started"); },
                      absl::Seconds(10)));
  run->Signal(SIGTERM);
  EXPECT_EQ(ExitCode(run->Wait(absl::Seconds(10))), 128 + SIGTERM) << run->Log();
  EXPECT_EQ(Field(Run({"describe", "--name", "fwd"}).output, "held"), "false");
}

// Starts `lockctl acquire` (owner "me", through `proxy`) that waits for the
// lock `name`, held meanwhile by another owner, and returns it once lockd has
// parked it as a waiter. Then holds back lockd's replies and frees the lock:
// lockd grants it to "me" and writes the reply, which the proxy keeps, so for
// lockd the reply went out and only lockctl can give the hold back. --wait 3s
// --timeout 1s: lockctl's deadline passes 4 s after it started. Only that
// connection is held back: lockctl's keepalive gives up on it (a server that
// stopped answering) and its undo goes over a new one.
std::unique_ptr<Subprocess> LockctlTest::StartAcquireWhoseReplyIsHeld(StallProxy& proxy,
                                                                      const std::string& name) {
  ClientOptions co;
  co.owner = "other";
  absl::StatusOr<Client> other = Client::Connect(lockd_->address(), co);
  EXPECT_TRUE(other.ok());
  AcquireOptions o;
  o.ttl = absl::Minutes(1);
  absl::StatusOr<Lease> held = other->Acquire(name, o);
  EXPECT_TRUE(held.ok()) << held.status();
  if (!held.ok()) return nullptr;
  std::unique_ptr<Subprocess> acq =
      Start({"acquire", "--server", proxy.address(), "--name", name, "--owner", "me", "--ttl", "1m",
             "--wait", "3s", "--timeout", "1s"});
  if (acq == nullptr) return nullptr;
  EXPECT_TRUE(WaitFor([&] { return Describe(name).waiters == 1; }, absl::Seconds(10)))
      << acq->Log();
  proxy.HoldRepliesOnOpenConnections();
  EXPECT_TRUE(held->Release().ok());
  EXPECT_TRUE(WaitForHolder(name, "me")) << acq->Log();
  return acq;
}

TEST_F(LockctlTest, AcquireWithoutAReplyWithinTimeoutIsUndoneAndLeavesNoHold) {
  absl::StatusOr<std::unique_ptr<StallProxy>> proxy = StallProxy::Start(lockd_->port());
  ASSERT_TRUE(proxy.ok()) << proxy.status();
  std::unique_ptr<Subprocess> acq = StartAcquireWhoseReplyIsHeld(**proxy, "late");
  ASSERT_NE(acq, nullptr);
  // The deadline passes; lockctl's undo gets through and gives the hold back.
  EXPECT_TRUE(WaitForHolder("late", "", absl::Seconds(10)))
      << "the hold of an acquire that timed out was left behind";
  (*proxy)->HoldReplies(false);  // the undo's answer arrives
  EXPECT_EQ(ExitCode(acq->Wait(absl::Seconds(10))), kUnavailable) << acq->Log();
  EXPECT_THAT(acq->Log(), ::testing::Not(HasSubstr("acquire_request_id"))) << acq->Log();
  EXPECT_FALSE(Describe("late").held);
}

TEST_F(LockctlTest, AcquireWhoseUndoGetsNoAnswerPrintsHowToUndoItByHand) {
  absl::StatusOr<std::unique_ptr<StallProxy>> proxy = StallProxy::Start(lockd_->port());
  ASSERT_TRUE(proxy.ok()) << proxy.status();
  std::unique_ptr<Subprocess> acq = StartAcquireWhoseReplyIsHeld(**proxy, "orders/42");
  ASSERT_NE(acq, nullptr);
  // From now on nothing gets through: the undo, sent when the deadline
  // passes, never reaches lockd.
  (*proxy)->HoldRequests(true);
  EXPECT_EQ(ExitCode(acq->Wait(absl::Seconds(15))), kUnavailable) << acq->Log();
  (*proxy)->CutConnections();  // drops the undo that was held back
  std::string out = acq->Log();
  EXPECT_EQ(Field(out, "acquired"), "unknown") << out;
  EXPECT_EQ(Field(out, "owner"), "me");
  const std::string id = Field(out, "acquire_request_id");
  ASSERT_FALSE(id.empty()) << out;
  EXPECT_THAT(out, HasSubstr(absl::StrCat("lockctl release --namespace default --name orders/42 "
                                          "--owner me --acquire-request-id ",
                                          id)));
  // The hold is still there: the automatic undo really did not arrive.
  ASSERT_EQ(Describe("orders/42").owner, "me");
  // Undo by hand; a repeat is harmless, and another owner's hold is untouched.
  Result undo =
      Run({"release", "--name", "orders/42", "--owner", "me", "--acquire-request-id", id});
  ASSERT_EQ(undo.code, 0) << undo.output;
  EXPECT_EQ(Field(undo.output, "released"), "true");
  EXPECT_EQ(Field(undo.output, "hold_count"), "0");
  EXPECT_FALSE(Describe("orders/42").held);
  ASSERT_EQ(Run({"acquire", "--name", "orders/42", "--owner", "other"}).code, 0);
  Result again =
      Run({"release", "--name", "orders/42", "--owner", "me", "--acquire-request-id", id});
  EXPECT_EQ(again.code, 0) << again.output;
  EXPECT_EQ(Field(again.output, "released"), "false");
  EXPECT_EQ(Describe("orders/42").owner, "other");
}

TEST_F(LockctlTest, TlsFlagsReachATlsServer) {
  absl::StatusOr<std::unique_ptr<testing::TlsLockServer>> server =
      testing::TlsLockServer::Start(tmp_.path());
  ASSERT_TRUE(server.ok()) << server.status();
  Result ok = Run({"--server", (*server)->address(), "--tls-ca", (*server)->cert_file(),
                   "--tls-server-name", "lockd.test", "acquire", "--name", "x"});
  EXPECT_EQ(ok.code, 0) << ok.output;
  Result plain =
      Run({"--server", (*server)->address(), "--timeout", "1s", "describe", "--name", "x"});
  EXPECT_EQ(plain.code, kUnavailable) << plain.output;
}

}  // namespace
}  // namespace lockd
