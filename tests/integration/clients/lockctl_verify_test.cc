// `lockctl verify` end to end: short runs against real lockd processes. It
// passes against correct deployments (memory; redis behind three lockd
// replicas; mysql; zookeeper; with holders killed or abandoning) and fails,
// naming the check, against broken ones: two independent memory lockds given
// as one address list (split brain: exclusion and fencing), and a holder
// paused past a short lease (exclusion: expired overlaps; the fenced counter
// rejects its late write, the unfenced one loses updates). It refuses a
// namespace holding others' locks, cleans up after itself, and re-checks its
// saved history offline.
//
// $LOCKD_VERIFY_DURATION (e.g. 60s) lengthens the runs that pass on each
// backend, and $LOCKD_VERIFY_FLAGS adds flags to them (e.g. "--nemesis
// kill-holders"), for the figures of a long run; the report is printed
// either way.

#include <sys/wait.h>

#include <cstdlib>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "gmock/gmock.h"
#include "google/protobuf/struct.pb.h"
#include "google/protobuf/util/json_util.h"
#include "gtest/gtest.h"
#include "lockd/client.h"
#include "tests/support/lockd_process.h"
#include "tests/support/mariadb_server.h"
#include "tests/support/process.h"
#include "tests/support/redis_server.h"
#include "tests/support/zookeeper_server.h"

namespace lockd {
namespace {

using ::lockd::testing::LockdProcess;
using ::lockd::testing::MariadbServer;
using ::lockd::testing::RedisServer;
using ::lockd::testing::Subprocess;
using ::lockd::testing::TempDir;
using ::lockd::testing::ZooKeeperServer;
using ::testing::HasSubstr;

constexpr int kPassed = 0;
constexpr int kFailed = 1;
constexpr int kUsage = 2;

// Extra flags for the passing runs, from $LOCKD_VERIFY_FLAGS (space-separated).
std::vector<std::string> PassingFlags() {
  const char* f = std::getenv("LOCKD_VERIFY_FLAGS");
  if (f == nullptr) return {};
  return absl::StrSplit(f, ' ', absl::SkipEmpty());
}

std::string PassingDuration() {
  const char* d = std::getenv("LOCKD_VERIFY_DURATION");
  return d != nullptr && *d != '\0' ? d : "5s";
}

// The JSON report, by check: passed and counts.
struct Report {
  bool parsed = false;
  bool passed = false;
  std::map<std::string, bool> check_passed;
  std::map<std::string, std::map<std::string, int64_t>> counts;

  int64_t Count(const std::string& check, const std::string& name) const {
    auto c = counts.find(check);
    if (c == counts.end()) return -1;
    auto n = c->second.find(name);
    return n == c->second.end() ? -1 : n->second;
  }
};

Report ParseReport(const std::string& output) {
  Report r;
  for (absl::string_view line : absl::StrSplit(output, '\n')) {
    if (!absl::StartsWith(line, "{\"passed\"")) continue;
    google::protobuf::Struct s;
    if (!google::protobuf::util::JsonStringToMessage(std::string(line), &s).ok()) continue;
    r.parsed = true;
    r.passed = s.fields().at("passed").bool_value();
    for (const google::protobuf::Value& check : s.fields().at("checks").list_value().values()) {
      const auto& f = check.struct_value().fields();
      const std::string name = f.at("name").string_value();
      r.check_passed[name] = f.at("passed").bool_value();
      for (const auto& [count, value] : f.at("counts").struct_value().fields()) {
        r.counts[name][count] = static_cast<int64_t>(value.number_value());
      }
    }
  }
  return r;
}

class LockctlVerifyTest : public ::testing::Test {
 protected:
  struct Result {
    int code;
    std::string output;  // stdout and stderr
  };

  // `lockctl verify` with `args`.
  Result Verify(std::vector<std::string> args, absl::Duration timeout = absl::Seconds(150)) {
    std::vector<std::string> argv = {LOCKCTL_BINARY, "verify"};
    argv.insert(argv.end(), args.begin(), args.end());
    absl::StatusOr<std::unique_ptr<Subprocess>> p =
        Subprocess::Start(argv, absl::StrCat(tmp_.path(), "/verify-", ++runs_, ".log"));
    EXPECT_TRUE(p.ok()) << p.status();
    if (!p.ok()) return {-1, ""};
    const int status = (*p)->Wait(timeout);
    if (status == -1) (*p)->Kill();
    Result r{status != -1 && WIFEXITED(status) ? WEXITSTATUS(status) : -1, (*p)->Log()};
    std::cout << "$ lockctl verify " << absl::StrJoin(args, " ") << "\n" << r.output;
    return r;
  }

  std::unique_ptr<LockdProcess> StartLockd(std::vector<std::string> flags) {
    flags.push_back("--lease.min=100ms");
    absl::StatusOr<std::unique_ptr<LockdProcess>> p = LockdProcess::Start(flags, tmp_.path());
    EXPECT_TRUE(p.ok()) << p.status();
    return p.ok() ? *std::move(p) : nullptr;
  }

  // Held locks of `ns` at `server`, as "name by owner" lines.
  std::vector<std::string> HeldLocks(const std::string& server,
                                     const std::string& ns = "lockd-verify") {
    std::vector<std::string> held;
    absl::StatusOr<Client> c = Client::Connect(server);
    if (!c.ok()) return {"cannot connect"};
    ListOptions o;
    o.ns = ns;
    absl::StatusOr<ListPage> page = c->List(o);
    if (!page.ok()) return {std::string(page.status().message())};
    for (const LockInfo& l : page->locks) held.push_back(absl::StrCat(l.name, " by ", l.owner));
    return held;
  }

  // A run that must pass on a correct deployment at `server`.
  void ExpectPasses(const std::string& server, std::vector<std::string> extra = {}) {
    std::vector<std::string> args = {"--server",  server, "--duration", PassingDuration(),
                                     "--workers", "6",    "--output",   "json"};
    args.insert(args.end(), extra.begin(), extra.end());
    for (std::string& f : PassingFlags()) args.push_back(std::move(f));
    Result r = Verify(args);
    EXPECT_EQ(r.code, kPassed) << r.output;
    Report report = ParseReport(r.output);
    ASSERT_TRUE(report.parsed) << r.output;
    EXPECT_TRUE(report.passed);
    EXPECT_GT(report.Count("exclusion", "holds"), 5) << r.output;
    EXPECT_EQ(report.Count("exclusion", "violations"), 0);
    EXPECT_EQ(report.Count("fencing", "repeated_tokens"), 0);
    EXPECT_GT(report.Count("lost-updates", "fenced_writes"), 0);
    EXPECT_EQ(report.Count("lost-updates", "fenced_lost"), 0);
    EXPECT_EQ(report.Count("lost-updates", "unfenced_lost"), 0);
    EXPECT_THAT(HeldLocks(server), ::testing::IsEmpty()) << "verify left holds behind";
  }

  // A 6 s run on memory with the nemesis `args` ask for, striking at least
  // `strikes` holders: it passes, and each struck hold's lock was granted
  // again within its bound.
  void ExpectLocksComeBack(std::vector<std::string> args, int strikes) {
    std::unique_ptr<LockdProcess> lockd = StartLockd({});
    ASSERT_NE(lockd, nullptr);
    std::vector<std::string> run = {"--server", lockd->address(), "--duration",
                                    "6s",       "--output",       "json"};
    run.insert(run.end(), args.begin(), args.end());
    Result r = Verify(run);
    EXPECT_EQ(r.code, kPassed) << r.output;
    Report report = ParseReport(r.output);
    ASSERT_TRUE(report.parsed) << r.output;
    EXPECT_GE(report.Count("liveness", "nemesis_events"), strikes);
    EXPECT_GE(report.Count("liveness", "measured"), strikes - 1);
    EXPECT_EQ(report.Count("liveness", "over_bound"), 0);
    EXPECT_EQ(report.Count("exclusion", "violations"), 0);
    EXPECT_THAT(HeldLocks(lockd->address()), ::testing::IsEmpty());
  }

  TempDir tmp_;
  int runs_ = 0;
};

TEST_F(LockctlVerifyTest, PassesOnMemoryAndItsSavedHistoryRechecksOffline) {
  std::unique_ptr<LockdProcess> lockd = StartLockd({});
  ASSERT_NE(lockd, nullptr);
  const std::string history = absl::StrCat(tmp_.path(), "/history.jsonl");
  ExpectPasses(lockd->address(), {"--history", history});

  Result text = Verify({"--check", history});
  EXPECT_EQ(text.code, kPassed) << text.output;
  EXPECT_THAT(text.output, HasSubstr("verify: PASSED"));
  for (const char* check : {"exclusion", "fencing", "lost-updates", "liveness", "fairness"}) {
    EXPECT_THAT(text.output, HasSubstr(check));
  }
  // Readers of the rw workload did hold together.
  Report offline = ParseReport(Verify({"--check", history, "--output", "json"}).output);
  EXPECT_GT(offline.Count("exclusion", "reader_overlaps"), 0);
  EXPECT_GT(offline.Count("exclusion", "max_permits_held"), 1);
}

TEST_F(LockctlVerifyTest, KilledHoldersFreeTheirLocksWithinTheBound) {
  ExpectLocksComeBack({"--workers", "6", "--workload", "mutex,acquire-all", "--api", "session",
                       "--nemesis", "kill-holders", "--nemesis-interval", "1s"},
                      /*strikes=*/3);
}

TEST_F(LockctlVerifyTest, AbandonedUnaryHoldsEndWithTheirLease) {
  ExpectLocksComeBack({"--workers", "4", "--workload", "mutex", "--api", "unary", "--ttl", "1s",
                       "--nemesis", "abandon", "--nemesis-interval", "1500ms"},
                      /*strikes=*/2);
}

TEST_F(LockctlVerifyTest, SplitBrainFailsExclusionAndFencing) {
  // Two lockds that share nothing, given as replicas of one deployment (the
  // workers are dealt out to them in turn).
  std::unique_ptr<LockdProcess> a = StartLockd({});
  std::unique_ptr<LockdProcess> b = StartLockd({});
  ASSERT_NE(a, nullptr);
  ASSERT_NE(b, nullptr);
  Result r = Verify({"--server", absl::StrCat(a->address(), ",", b->address()), "--duration", "4s",
                     "--workers", "6", "--workload", "mutex"});
  EXPECT_EQ(r.code, kFailed) << r.output;
  EXPECT_THAT(r.output, ::testing::ContainsRegex("exclusion +FAIL"));
  EXPECT_THAT(r.output, ::testing::ContainsRegex("fencing +FAIL"));
  EXPECT_THAT(r.output, HasSubstr("verify: FAILED (exclusion, fencing"));
  // Each lockd hands out its own tokens: the same one twice, or one below
  // a token already granted.
  EXPECT_THAT(r.output, ::testing::ContainsRegex("repeated_tokens=[1-9]|token_regressions=[1-9]"));
}

TEST_F(LockctlVerifyTest, APausedHolderPastItsLeaseFailsExclusionAndFencingRejectsItsWrite) {
  std::unique_ptr<LockdProcess> lockd = StartLockd({});
  ASSERT_NE(lockd, nullptr);
  Result r = Verify({"--server", lockd->address(), "--duration", "7s", "--workers", "4",
                     "--workload", "mutex", "--api", "unary", "--ttl", "1s", "--nemesis",
                     "pause-holders", "--nemesis-interval", "2s", "--output", "json"});
  EXPECT_EQ(r.code, kFailed) << r.output;
  Report report = ParseReport(r.output);
  ASSERT_TRUE(report.parsed) << r.output;
  // The paused holder was still inside after its lease ran out and others
  // held the lock meanwhile: exclusion fails, with no overlap of two valid
  // leases.
  EXPECT_FALSE(report.check_passed["exclusion"]);
  EXPECT_GT(report.Count("exclusion", "expired_overlaps"), 0) << r.output;
  EXPECT_EQ(report.Count("exclusion", "violations"), 0) << r.output;
  EXPECT_GT(report.Count("exclusion", "late_writes"), 0) << r.output;
  // Its late write was rejected by the fenced counter and taken by the
  // unfenced one, which lost the updates made meanwhile.
  EXPECT_TRUE(report.check_passed["fencing"]);
  EXPECT_GT(report.Count("exclusion", "late_writes_rejected"), 0) << r.output;
  EXPECT_GT(report.Count("fencing", "stale_writes_rejected"), 0) << r.output;
  EXPECT_EQ(report.Count("fencing", "stale_writes_accepted"), 0);
  EXPECT_TRUE(report.check_passed["lost-updates"]);
  EXPECT_EQ(report.Count("lost-updates", "fenced_lost"), 0);
  EXPECT_GT(report.Count("lost-updates", "unfenced_lost"), 0) << r.output;
}

TEST_F(LockctlVerifyTest, RefusesANamespaceHoldingOthersLocksUnlessForced) {
  std::unique_ptr<LockdProcess> lockd = StartLockd({});
  ASSERT_NE(lockd, nullptr);
  ClientOptions co;
  co.owner = "billing";
  co.use_sessions = false;
  absl::StatusOr<Client> app = Client::Connect(lockd->address(), co);
  ASSERT_TRUE(app.ok());
  AcquireOptions o;
  o.ns = "shared-ns";
  o.ttl = absl::Seconds(60);
  absl::StatusOr<Lease> held = app->Acquire("invoices", o);
  ASSERT_TRUE(held.ok()) << held.status();

  Result refused = Verify({"--server", lockd->address(), "--namespace", "shared-ns"});
  EXPECT_EQ(refused.code, kUsage) << refused.output;
  EXPECT_THAT(refused.output, HasSubstr("\"invoices\" held by \"billing\""));

  Result forced = Verify({"--server", lockd->address(), "--namespace", "shared-ns", "--force",
                          "--duration", "1s", "--workers", "2", "--workload", "mutex"});
  EXPECT_EQ(forced.code, kPassed) << forced.output;
  // Its cleanup released its own holds only.
  EXPECT_THAT(HeldLocks(lockd->address(), "shared-ns"),
              ::testing::ElementsAre("invoices by billing"));
}

TEST_F(LockctlVerifyTest, BadUsageExitsTwoNamingTheFlag) {
  Result workload = Verify({"--workload", "mutex,queue"});
  EXPECT_EQ(workload.code, kUsage);
  EXPECT_THAT(workload.output, HasSubstr("--workload"));
  Result nemesis = Verify({"--nemesis", "partition"});
  EXPECT_EQ(nemesis.code, kUsage);
  EXPECT_THAT(nemesis.output, HasSubstr("--nemesis"));
  EXPECT_EQ(Verify({"--workers", "0"}).code, kUsage);
  EXPECT_EQ(Verify({"--check", absl::StrCat(tmp_.path(), "/missing.jsonl")}).code, kUsage);
}

TEST_F(LockctlVerifyTest, PassesOnRedisBehindThreeReplicas) {
  absl::StatusOr<std::unique_ptr<RedisServer>> redis = RedisServer::Start();
  ASSERT_TRUE(redis.ok()) << redis.status();
  std::vector<std::unique_ptr<LockdProcess>> replicas;
  std::vector<std::string> addresses;
  for (int i = 0; i < 3; ++i) {
    replicas.push_back(StartLockd({"--backend=redis", "--redis.addresses=" + (*redis)->address()}));
    ASSERT_NE(replicas.back(), nullptr);
    addresses.push_back(replicas.back()->address());
  }
  ExpectPasses(absl::StrJoin(addresses, ","));
}

TEST_F(LockctlVerifyTest, PassesOnMysql) {
  absl::StatusOr<std::unique_ptr<MariadbServer>> db = MariadbServer::Start();
  ASSERT_TRUE(db.ok()) << db.status();
  std::unique_ptr<LockdProcess> lockd = StartLockd((*db)->LockdFlags("verify_"));
  ASSERT_NE(lockd, nullptr);
  ExpectPasses(lockd->address());
}

TEST_F(LockctlVerifyTest, PassesOnZooKeeper) {
  absl::StatusOr<std::unique_ptr<ZooKeeperServer>> zk = ZooKeeperServer::Start();
  ASSERT_TRUE(zk.ok()) << zk.status();
  std::unique_ptr<LockdProcess> lockd = StartLockd(
      {"--backend=zookeeper", "--zookeeper.hosts=" + (*zk)->hosts(), "--zookeeper.root=/verify"});
  ASSERT_NE(lockd, nullptr);
  ExpectPasses(lockd->address());
}

}  // namespace
}  // namespace lockd
