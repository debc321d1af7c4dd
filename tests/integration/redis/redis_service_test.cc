// lockd processes with backend=redis against a private redis-server: a Redis
// restart under load, a holder killed with -9, 10,000 cycles that must leave
// nothing behind but fence keys, and bad credentials at start.

#include <signal.h>
#include <sys/wait.h>

#include <algorithm>
#include <atomic>
#include <future>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "backends/redis/keys.h"
#include "gmock/gmock.h"
#include "grpcpp/create_channel.h"
#include "grpcpp/generic/generic_stub.h"
#include "grpcpp/security/credentials.h"
#include "grpcpp/support/byte_buffer.h"
#include "gtest/gtest.h"
#include "lockd/client.h"
#include "lockd/v1/lock.grpc.pb.h"
#include "protos/proto_duration.h"
#include "tests/integration/redis/redis_test_util.h"
#include "tests/support/grpc_health.h"
#include "tests/support/lockd_process.h"
#include "tests/support/lockd_rpc.h"
#include "tests/support/process.h"
#include "tests/support/redis_server.h"
#include "tests/support/status_matchers.h"

namespace lockd::testing {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;
using v1::LockService;

// Each stub gets a channel (and connection) of its own.
std::unique_ptr<LockService::Stub> NewStub(const std::string& address) {
  static std::atomic<int> n{0};
  grpc::ChannelArguments args;
  args.SetInt("lockd.test.channel", n++);
  return LockService::NewStub(
      grpc::CreateCustomChannel(address, grpc::InsecureChannelCredentials(), args));
}

grpc::Status Acquire(LockService::Stub& stub, const std::string& name, const std::string& owner,
                     absl::Duration ttl, absl::Duration wait, v1::AcquireResponse* resp,
                     absl::Duration deadline = absl::Seconds(30)) {
  return AcquireRpc(stub, name, owner, ttl, wait, deadline, resp);
}

grpc::Status Release(LockService::Stub& stub, const std::string& name, const std::string& owner,
                     v1::ReleaseResponse* resp) {
  return ReleaseRpc(stub, name, owner, resp);
}

grpc::Status Renew(LockService::Stub& stub, const std::string& name, const std::string& owner) {
  return RenewRpc(stub, name, owner, absl::Seconds(30));
}

std::vector<std::string> LockdFlags(const RedisServer& redis, const std::string& prefix) {
  return {"--backend=redis",
          absl::StrCat("--redis.addresses=", redis.address()),
          absl::StrCat("--redis.key_prefix=", prefix),
          "--redis.connect_timeout=500ms",
          "--redis.command_timeout=500ms",
          "--lease.min=100ms"};
}

std::vector<std::unique_ptr<LockdProcess>> StartLockds(const RedisServer& redis,
                                                       const std::string& prefix, int n,
                                                       const std::string& dir) {
  std::vector<std::unique_ptr<LockdProcess>> procs;
  for (int i = 0; i < n; ++i) {
    absl::StatusOr<std::unique_ptr<LockdProcess>> p =
        LockdProcess::Start(LockdFlags(redis, prefix), dir);
    EXPECT_TRUE(p.ok()) << p.status();
    if (!p.ok()) return {};
    procs.push_back(*std::move(p));
  }
  return procs;
}

// Clients looping over short critical sections on one lock, recording
// every answer that is not a plain success.
class Workload {
 public:
  Workload(const std::vector<std::string>& addresses, int clients) {
    for (int c = 0; c < clients; ++c) {
      threads_.emplace_back(
          [this, c, address = addresses[c % addresses.size()]] { Run(c, address); });
    }
  }
  ~Workload() { Stop(); }

  void Stop() {
    stop_ = true;
    for (auto& t : threads_) {
      if (t.joinable()) t.join();
    }
  }

  struct Grant {
    uint64_t token;
    absl::Time at;
  };
  std::vector<Grant> grants() {
    std::lock_guard<std::mutex> l(mu_);
    return grants_;
  }
  std::map<std::string, int> errors() {
    std::lock_guard<std::mutex> l(mu_);
    return errors_;
  }
  int overlaps() const { return overlaps_; }

 private:
  void Error(const std::string& what) {
    std::lock_guard<std::mutex> l(mu_);
    ++errors_[what];
  }

  void Run(int c, const std::string& address) {
    auto stub = NewStub(address);
    std::string owner = absl::StrCat("client-", c);
    while (!stop_) {
      v1::AcquireResponse resp;
      grpc::Status s = Acquire(*stub, "counter", owner, absl::Seconds(5), absl::Milliseconds(300),
                               &resp, absl::Seconds(5));
      if (!s.ok()) {
        Error(absl::StrCat("acquire ", s.error_code()));
        absl::SleepFor(absl::Milliseconds(20));
        continue;
      }
      if (!resp.acquired()) continue;
      if (inside_.exchange(true)) ++overlaps_;
      {
        std::lock_guard<std::mutex> l(mu_);
        grants_.push_back(Grant{resp.fencing_token(), absl::Now()});
      }
      absl::SleepFor(absl::Microseconds(500));
      inside_ = false;
      v1::ReleaseResponse rel;
      s = Release(*stub, "counter", owner, &rel);
      if (!s.ok()) {
        Error(::testing::Value(s, IsLockNotHeld()) ? "release LOCK_NOT_HELD"
                                                   : absl::StrCat("release ", s.error_code()));
      }
    }
  }

  std::atomic<bool> stop_{false};
  std::atomic<bool> inside_{false};
  std::atomic<int> overlaps_{0};
  std::mutex mu_;
  std::vector<Grant> grants_;
  std::map<std::string, int> errors_;
  std::vector<std::thread> threads_;
};

TEST(RedisServiceTest, RedisRestartGivesUnavailableNeverAWrongAnswerAndServiceRecovers) {
  TempDir dir;
  absl::StatusOr<std::unique_ptr<RedisServer>> redis = RedisServer::Start();
  ASSERT_TRUE(redis.ok()) << redis.status();
  std::vector<std::unique_ptr<LockdProcess>> procs = StartLockds(**redis, "restart", 2, dir.path());
  ASSERT_EQ(procs.size(), 2u);
  std::vector<std::string> addresses = {procs[0]->address(), procs[1]->address()};
  auto admin = NewStub(addresses[0]);
  auto other = NewStub(addresses[1]);
  for (const std::string& a : addresses) ASSERT_EQ(HealthStatus(a, kLockService), kHealthServing);

  // One holder, one client waiting for it on the other process.
  v1::AcquireResponse held;
  ASSERT_TRUE(Acquire(*admin, "held", "holder", absl::Seconds(30), {}, &held).ok());
  ASSERT_TRUE(held.acquired());
  grpc::Status waiter_status;
  v1::AcquireResponse waiter_resp;
  std::thread waiter([&] {
    auto stub = NewStub(addresses[1]);
    waiter_status = Acquire(*stub, "held", "waiter", absl::Seconds(30), absl::Seconds(20),
                            &waiter_resp, absl::Seconds(30));
  });
  ASSERT_TRUE(WaitFor(
      [&] {
        v1::LockInfo info;
        return DescribeRpc(*other, "held", &info).ok() && info.waiters() == 1;
      },
      absl::Seconds(5)));

  Workload load(addresses, 6);
  absl::SleepFor(absl::Milliseconds(700));
  uint64_t max_before = 0;
  for (const auto& g : load.grants()) max_before = std::max(max_before, g.token);
  ASSERT_GT(max_before, 0u) << "the workload made no progress before the outage";

  (*redis)->Stop();
  absl::Time down_at = absl::Now();
  EXPECT_TRUE(WaitFor(
      [&] {
        return HealthStatus(addresses[0], kLockService) == kHealthNotServing &&
               HealthStatus(addresses[1], kLockService) == kHealthNotServing;
      },
      absl::Seconds(5)))
      << "readiness stays SERVING while Redis is down";
  for (const std::string& a : addresses) {
    EXPECT_EQ(HealthStatus(a), kHealthServing) << "liveness follows the backend";
  }
  {
    absl::Time start = absl::Now();
    v1::AcquireResponse resp;
    grpc::Status s = Acquire(*admin, "other", "x", absl::Seconds(5), {}, &resp);
    EXPECT_THAT(s, StatusIs(grpc::StatusCode::UNAVAILABLE));
    EXPECT_LT(absl::Now() - start, absl::Milliseconds(500)) << "not failing fast";
    v1::ReleaseResponse rel;
    EXPECT_THAT(Release(*admin, "held", "holder", &rel), StatusIs(grpc::StatusCode::UNAVAILABLE));
    EXPECT_THAT(Renew(*admin, "held", "holder"), StatusIs(grpc::StatusCode::UNAVAILABLE));
    v1::LockInfo info;
    EXPECT_THAT(DescribeRpc(*admin, "held", &info), StatusIs(grpc::StatusCode::UNAVAILABLE));
  }
  absl::SleepFor(absl::Milliseconds(800));

  ASSERT_TRUE((*redis)->Restart().ok());
  absl::Time up_at = absl::Now();
  EXPECT_TRUE(WaitFor(
      [&] {
        return HealthStatus(addresses[0], kLockService) == kHealthServing &&
               HealthStatus(addresses[1], kLockService) == kHealthServing;
      },
      absl::Seconds(10)))
      << "readiness does not come back after Redis does";

  // Redis restarted without its data: the held lock is gone, the waiter gets
  // it with a larger token, and the holder learns of the loss.
  waiter.join();
  ASSERT_TRUE(waiter_status.ok()) << waiter_status.error_message();
  EXPECT_TRUE(waiter_resp.acquired());
  EXPECT_GT(waiter_resp.fencing_token(), held.fencing_token());
  EXPECT_THAT(Renew(*admin, "held", "holder"), IsLockNotHeld());

  absl::SleepFor(absl::Milliseconds(700));
  load.Stop();
  int after = 0;
  for (const auto& g : load.grants()) {
    if (g.at > up_at) {
      ++after;
      EXPECT_GT(g.token, max_before) << "fencing token went backwards across the restart";
    }
    EXPECT_FALSE(g.at > down_at && g.at < up_at) << "granted while Redis was down";
  }
  EXPECT_GT(after, 0) << "the service did not serve again after the restart";
  EXPECT_EQ(load.overlaps(), 0);
  for (const auto& [what, n] : load.errors()) {
    EXPECT_TRUE(absl::EndsWith(what, absl::StrCat(" ", grpc::StatusCode::UNAVAILABLE)) ||
                what == "release LOCK_NOT_HELD")
        << n << " x " << what;
  }
  // (An open client channel makes lockd's graceful stop wait its full grace.)
  admin.reset();
  other.reset();
  for (auto& p : procs) EXPECT_EQ(p->process().Stop(), 0) << p->process().Log();
}

TEST(RedisServiceTest, KilledHolderLosesTheLockAtLeaseEndWithoutRelease) {
  TempDir dir;
  absl::StatusOr<std::unique_ptr<RedisServer>> redis = RedisServer::Start();
  ASSERT_TRUE(redis.ok()) << redis.status();
  std::vector<std::unique_ptr<LockdProcess>> procs = StartLockds(**redis, "kill", 1, dir.path());
  ASSERT_EQ(procs.size(), 1u);
  auto stub = NewStub(procs[0]->address());

  constexpr absl::Duration kLease = absl::Seconds(1);
  absl::StatusOr<std::unique_ptr<Subprocess>> holder =
      Subprocess::Start({LOCKD_REDIS_HOLDER, procs[0]->address(), "k9", "holder",
                         absl::StrCat(absl::ToInt64Milliseconds(kLease))},
                        absl::StrCat(dir.path(), "/holder.log"));
  ASSERT_TRUE(holder.ok()) << holder.status();
  ASSERT_TRUE(WaitFor([&] { return absl::StrContains((*holder)->Log(), "acquired"); },
                      absl::Seconds(10), absl::Milliseconds(5)))
      << (*holder)->Log();

  // The lease ends at or after before_describe + ttl_remaining.
  absl::Time before_describe = absl::Now();
  v1::LockInfo info;
  ASSERT_TRUE(DescribeRpc(*stub, "k9", &info).ok());
  ASSERT_EQ(info.owner(), "holder");
  absl::Time lease_end = before_describe + FromProtoDuration(info.ttl_remaining());

  absl::Time granted_at;
  v1::AcquireResponse resp;
  grpc::Status status;
  std::thread waiter([&] {
    auto s = NewStub(procs[0]->address());
    status = Acquire(*s, "k9", "waiter", absl::Seconds(30), absl::Seconds(10), &resp);
    granted_at = absl::Now();
  });
  ASSERT_TRUE(WaitFor(
      [&] {
        v1::LockInfo i;
        return DescribeRpc(*stub, "k9", &i).ok() && i.waiters() == 1;
      },
      absl::Seconds(5)));
  (*holder)->Kill();  // SIGKILL: no release, no renew, ever
  waiter.join();
  ASSERT_TRUE(status.ok()) << status.error_message();
  ASSERT_TRUE(resp.acquired());
  EXPECT_GT(resp.fencing_token(), info.fencing_token());
  std::cerr << "granted " << (granted_at - lease_end) << " after the lease ended\n";
  EXPECT_LE(granted_at - lease_end, absl::Milliseconds(100))
      << "the waiter got the lock " << (granted_at - lease_end) << " after the lease ended";
  EXPECT_GE(granted_at - lease_end, absl::Milliseconds(-60)) << "granted before the lease ended";
}

TEST(RedisServiceTest, TenThousandCyclesLeaveOnlyFenceKeysAndNoSubscriptions) {
  TempDir dir;
  absl::StatusOr<std::unique_ptr<RedisServer>> redis = RedisServer::Start();
  ASSERT_TRUE(redis.ok()) << redis.status();
  const std::string prefix = "cycles";
  std::vector<std::unique_ptr<LockdProcess>> procs = StartLockds(**redis, prefix, 2, dir.path());
  ASSERT_EQ(procs.size(), 2u);
  std::vector<std::string> addresses = {procs[0]->address(), procs[1]->address()};

  constexpr int kCycles = 10000;
  constexpr int kNames = 20;
  constexpr int kHot = 4;
  std::atomic<int> cycles{0};
  std::atomic<int> timeouts{0};
  std::atomic<int> errors{0};
  std::atomic<bool> stop{false};
  auto cycle = [&](LockService::Stub& stub, const std::string& name, const std::string& owner,
                   absl::Duration wait, absl::Duration hold) {
    v1::AcquireResponse resp;
    grpc::Status s = Acquire(stub, name, owner, absl::Seconds(10), wait, &resp);
    if (!s.ok()) {
      ++errors;
      ADD_FAILURE() << "acquire " << name << ": " << s.error_message();
      return;
    }
    if (!resp.acquired()) {
      ++timeouts;
      return;
    }
    if (hold > absl::ZeroDuration()) absl::SleepFor(hold);
    v1::ReleaseResponse rel;
    s = Release(stub, name, owner, &rel);
    if (!s.ok() || !rel.released()) {
      ++errors;
      ADD_FAILURE() << "release " << name << ": " << s.error_message();
      return;
    }
    ++cycles;
  };
  std::vector<std::thread> threads;
  // Plain cycles over several locks, contended now and then.
  for (int c = 0; c < 8; ++c) {
    threads.emplace_back([&, c] {
      auto stub = NewStub(addresses[c % 2]);
      std::string owner = absl::StrCat("cycler-", c);
      for (int i = 0; !stop && cycles < kCycles; ++i) {
        cycle(*stub, absl::StrCat("c-", (c + i) % kNames), owner, absl::Seconds(5), {});
      }
    });
  }
  // Holders of hot locks, and impatient waiters that mostly time out.
  for (int c = 0; c < 2; ++c) {
    threads.emplace_back([&, c] {
      auto stub = NewStub(addresses[c % 2]);
      std::string owner = absl::StrCat("holder-", c);
      for (int i = 0; !stop && cycles < kCycles; ++i) {
        cycle(*stub, absl::StrCat("hot-", (c + i) % kHot), owner, absl::Seconds(5),
              absl::Milliseconds(15));
      }
    });
  }
  for (int c = 0; c < 4; ++c) {
    threads.emplace_back([&, c] {
      auto stub = NewStub(addresses[c % 2]);
      std::string owner = absl::StrCat("impatient-", c);
      for (int i = 0; !stop && cycles < kCycles; ++i) {
        cycle(*stub, absl::StrCat("hot-", (c + i) % kHot), owner, absl::Milliseconds(2 + (i % 8)),
              {});
      }
    });
  }
  absl::Time start = absl::Now();
  while (cycles < kCycles && errors == 0 && absl::Now() - start < absl::Seconds(120)) {
    absl::SleepFor(absl::Milliseconds(50));
  }
  stop = true;
  for (auto& t : threads) t.join();
  ASSERT_EQ(errors.load(), 0);
  ASSERT_GE(cycles.load(), kCycles) << "too slow: " << cycles << " cycles in 120 s";
  EXPECT_GT(timeouts.load(), 50) << "the run needs timed-out waiters mixed in";
  std::cerr << cycles << " cycles and " << timeouts << " timed-out waits in "
            << (absl::Now() - start) << "\n";

  absl::StatusOr<std::unique_ptr<RedisCli>> cli = RedisCli::Connect((*redis)->port());
  ASSERT_TRUE(cli.ok()) << cli.status();
  // Of lock keys (P:{...}), nothing but fence keys, each with a TTL (they expire fence_retention
  // after their lock's last lease).
  std::vector<std::string> keys = (*cli)->Keys(absl::StrCat(prefix, ":{*"));
  EXPECT_EQ(keys.size(), static_cast<size_t>(kNames + kHot));
  for (const std::string& k : keys) {
    EXPECT_TRUE(absl::EndsWith(k, "}:fence")) << "left behind: " << k;
    EXPECT_GT((*cli)->Int({"PTTL", k}), 0) << k << " never expires";
  }
  // No process keeps a subscription or a waiter.
  EXPECT_TRUE(WaitFor([&] { return (*cli)->Channels(absl::StrCat(prefix, ":*")).empty(); },
                      absl::Seconds(5)))
      << "still subscribed: " << (*cli)->Channels(absl::StrCat(prefix, ":*")).size();
  for (const std::string& a : addresses) {
    auto stub = NewStub(a);
    for (int i = 0; i < kHot; ++i) {
      v1::LockInfo info;
      ASSERT_TRUE(DescribeRpc(*stub, absl::StrCat("hot-", i), &info).ok());
      EXPECT_EQ(info.waiters(), 0u);
      EXPECT_FALSE(info.held());
    }
  }
  for (auto& p : procs) EXPECT_EQ(p->process().Stop(), 0) << p->process().Log();
}

TEST(RedisServiceTest, WrongPasswordFailsStartSayingAuthenticationFailedWithoutThePassword) {
  TempDir dir;
  RedisServer::Options so;
  so.password = "right-pass-8472";
  absl::StatusOr<std::unique_ptr<RedisServer>> redis = RedisServer::Start(so);
  ASSERT_TRUE(redis.ok()) << redis.status();
  const std::string wrong_file = absl::StrCat(dir.path(), "/wrong");
  const std::string right_file = absl::StrCat(dir.path(), "/right");
  ASSERT_TRUE(WriteFile(wrong_file, "wrong-pass-1937\n").ok());
  ASSERT_TRUE(WriteFile(right_file, "right-pass-8472\n").ok());
  std::vector<std::string> base = {LockdBinary(), "--backend=redis",
                                   absl::StrCat("--redis.addresses=", (*redis)->address()),
                                   absl::StrCat("--listen=127.0.0.1:", FreePort())};

  struct Case {
    std::string what;
    std::vector<std::string> flags;
    std::map<std::string, std::string> env;
  };
  const std::vector<Case> cases = {
      {"password_file", {absl::StrCat("--redis.password_file=", wrong_file)}, {}},
      {"environment", {}, {{"LOCKD_REDIS_PASSWORD", "wrong-pass-1937"}}},
      {"no password", {}, {}},
  };
  for (const Case& c : cases) {
    std::vector<std::string> argv = base;
    argv.insert(argv.end(), c.flags.begin(), c.flags.end());
    absl::StatusOr<std::unique_ptr<Subprocess>> p =
        Subprocess::Start(argv, absl::StrCat(dir.path(), "/", c.what, ".log"), c.env);
    ASSERT_TRUE(p.ok()) << p.status();
    int status = (*p)->Wait(absl::Seconds(20));
    std::string log = (*p)->Log();
    ASSERT_NE(status, -1) << c.what << ": lockd did not exit; log:\n" << log;
    EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) != 0) << c.what << ":\n" << log;
    EXPECT_THAT(log, HasSubstr("authentication failed")) << c.what;
    EXPECT_THAT(log, Not(HasSubstr("wrong-pass-1937"))) << c.what;
    EXPECT_THAT(log, Not(HasSubstr("right-pass-8472"))) << c.what;
  }

  // The right password (file) works, and is not logged either.
  std::vector<std::string> flags = LockdFlags(**redis, "auth");
  flags.push_back(absl::StrCat("--redis.password_file=", right_file));
  absl::StatusOr<std::unique_ptr<LockdProcess>> ok = LockdProcess::Start(flags, dir.path());
  ASSERT_TRUE(ok.ok()) << ok.status();
  auto stub = NewStub((*ok)->address());
  v1::AcquireResponse resp;
  ASSERT_TRUE(Acquire(*stub, "a", "alice", absl::Seconds(5), {}, &resp).ok());
  EXPECT_TRUE(resp.acquired());
  stub.reset();
  EXPECT_EQ((*ok)->process().Stop(), 0);
  EXPECT_THAT((*ok)->process().Log(), Not(HasSubstr("right-pass-8472")));
}

// The backend stops answering this replica (a hung Redis; or a partition
// between this replica and a backend that others still reach): renewals
// fail, and the lease would end at the backend while the session stream is
// perfectly healthy. lockd gives the hold up with `lost` LEASE_EXPIRED
// while Redis still has it, not after (as a renewal finding it gone would).
TEST(RedisSessionTest, HoldIsLostWhileRedisStillHasItWhenRedisStopsAnswering) {
  TempDir tmp;
  absl::StatusOr<std::unique_ptr<RedisServer>> redis = RedisServer::Start();
  ASSERT_TRUE(redis.ok()) << redis.status();
  absl::StatusOr<std::unique_ptr<LockdProcess>> lockd = LockdProcess::StartOnPort(
      0, {"--backend=redis", "--redis.addresses=" + (*redis)->address()}, tmp.path());
  ASSERT_TRUE(lockd.ok()) << lockd.status();
  ClientOptions co;
  co.keepalive = {absl::Seconds(1), absl::Milliseconds(500)};
  absl::StatusOr<Client> client = Client::Connect((*lockd)->address(), co);
  ASSERT_TRUE(client.ok()) << client.status();
  AcquireOptions o;
  o.ttl = absl::Seconds(6);
  absl::StatusOr<Lease> lease = client->Acquire("cut-off", o);
  ASSERT_TRUE(lease.ok()) << lease.status();
  ASSERT_EQ(lease->valid_until(), std::chrono::steady_clock::time_point::max())
      << "not held over the session";

  (*redis)->Pause();
  bool lost = WaitFor([&] { return lease->lost(); }, absl::Seconds(10), absl::Milliseconds(5));
  (*redis)->Resume();
  ASSERT_TRUE(lost) << "no lost while Redis could not renew the hold";
  EXPECT_THAT(lease->lost_status().message(), HasSubstr("LEASE_EXPIRED"));
  absl::StatusOr<std::unique_ptr<RedisCli>> cli = RedisCli::Connect((*redis)->port());
  ASSERT_TRUE(cli.ok()) << cli.status();
  redis::LockKeys k = redis::KeyCodec("lockd").KeysFor(LockKey{"default", "cut-off"});
  EXPECT_EQ((*cli)->Str({"HGET", k.lock, "owner"}), client->owner())
      << "the lease had ended in Redis before lockd gave the hold up";
  EXPECT_GT((*cli)->Int({"PTTL", k.lock}), 0);
}

}  // namespace
}  // namespace lockd::testing
