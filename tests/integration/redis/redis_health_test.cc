// Liveness and readiness of a lockd process through Redis outages, as the
// Helm chart's probes ask them (grpc.health.v1.Health/Check, on the gRPC
// port and on the plaintext health port): the whole server ("", liveness and
// startup probes) stays SERVING while lockd answers, whatever Redis does, so
// a backend outage restarts no replica and drops no session;
// lockd.v1.LockService (readiness) is NOT_SERVING while Redis is away and
// SERVING again when it returns. The chart's liveness window is 60 s
// (periodSeconds 10 x failureThreshold 6); rather than wait that long, the
// tests probe every 100 ms and require SERVING at every probe. `lockctl
// health`, the probe an image HEALTHCHECK or exec probe runs, sees the same.

#include <sys/wait.h>

#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "lockd/client.h"
#include "lockd/v1/lock.grpc.pb.h"
#include "tests/support/grpc_health.h"
#include "tests/support/lockd_process.h"
#include "tests/support/lockd_rpc.h"
#include "tests/support/process.h"
#include "tests/support/redis_server.h"
#include "tests/support/status_matchers.h"

namespace lockd::testing {
namespace {

std::vector<std::string> LockdFlags(const RedisServer& redis, int health_port) {
  return {"--backend=redis", absl::StrCat("--redis.addresses=", redis.address()),
          "--redis.connect_timeout=500ms", "--redis.command_timeout=500ms",
          absl::StrCat("--health.listen=127.0.0.1:", health_port)};
}

// The gRPC port and the health port of one lockd, probed as kubelet does.
struct Probes {
  std::vector<std::string> addresses;

  // True if every address answers `service` with `status`.
  bool All(const std::string& service, int status) const {
    for (const std::string& a : addresses) {
      if (HealthStatus(a, service, absl::Seconds(1)) != status) return false;
    }
    return true;
  }
  // Probes liveness every 100 ms until `until`; false (with a test failure)
  // at the first probe that is not SERVING.
  bool LiveUntil(absl::Time until) const {
    do {
      for (const std::string& a : addresses) {
        int live = HealthStatus(a, "", absl::Seconds(1));
        if (live != kHealthServing) {
          ADD_FAILURE() << "liveness of " << a << " is " << live << ", not SERVING";
          return false;
        }
      }
      absl::SleepFor(absl::Milliseconds(100));
    } while (absl::Now() < until);
    return true;
  }
};

// `lockctl health [--service S]` against `address`: its exit code and output.
std::pair<int, std::string> LockctlHealth(const TempDir& tmp, const std::string& address,
                                          const std::string& service) {
  static int runs = 0;
  absl::StatusOr<std::unique_ptr<Subprocess>> p = Subprocess::Start(
      {LOCKCTL_BINARY, "--server", address, "health", "--service", service, "--timeout", "5s"},
      absl::StrCat(tmp.path(), "/lockctl-health-", ++runs, ".log"));
  if (!p.ok()) return {-1, std::string(p.status().message())};
  int status = (*p)->Wait(absl::Seconds(20));
  return {WIFEXITED(status) ? WEXITSTATUS(status) : -1, (*p)->Log()};
}

TEST(RedisHealthTest, LivenessStaysServingThroughARedisOutageAndReadinessFollowsRedis) {
  TempDir tmp;
  RedisServer::Options ro;
  ro.persistence = true;  // the hold is still in Redis when it comes back
  absl::StatusOr<std::unique_ptr<RedisServer>> redis = RedisServer::Start(ro);
  ASSERT_TRUE(redis.ok()) << redis.status();
  const int health_port = FreePort();
  absl::StatusOr<std::unique_ptr<LockdProcess>> lockd =
      LockdProcess::Start(LockdFlags(**redis, health_port), tmp.path());
  ASSERT_TRUE(lockd.ok()) << lockd.status();
  const Probes probes{{(*lockd)->address(), absl::StrCat("127.0.0.1:", health_port)}};
  ASSERT_TRUE(WaitFor([&] { return probes.All(kLockService, kHealthServing); }, absl::Seconds(5)));
  ASSERT_TRUE(probes.All("", kHealthServing));

  // A session hold whose lease (30 s) outlasts the outage; the stream stays
  // open throughout, so keep_on_disconnect plays no part.
  ClientOptions co;
  co.keep_on_disconnect = false;
  absl::StatusOr<Client> client = Client::Connect((*lockd)->address(), co);
  ASSERT_TRUE(client.ok()) << client.status();
  AcquireOptions o;
  o.ttl = absl::Seconds(30);
  absl::StatusOr<Lease> lease = client->Acquire("survivor", o);
  ASSERT_TRUE(lease.ok()) << lease.status();
  ASSERT_EQ(lease->valid_until(), std::chrono::steady_clock::time_point::max())
      << "not held over the session";

  (*redis)->Kill();
  const absl::Time killed = absl::Now();
  EXPECT_TRUE(
      WaitFor([&] { return probes.All(kLockService, kHealthNotServing); }, absl::Seconds(5)))
      << "readiness stays SERVING while Redis is down";
  EXPECT_TRUE(probes.LiveUntil(killed + absl::Seconds(4)));

  ASSERT_TRUE((*redis)->Restart().ok()) << (*redis)->Log();
  bool ready = false;
  absl::Time give_up = absl::Now() + absl::Seconds(10);
  while (!ready && absl::Now() < give_up) {
    ASSERT_TRUE(probes.LiveUntil(absl::Now()));
    ready = probes.All(kLockService, kHealthServing);
  }
  EXPECT_TRUE(ready) << "readiness does not come back after Redis does";
  EXPECT_TRUE((*lockd)->process().Running());

  // The session and its hold came through.
  EXPECT_FALSE(lease->lost()) << lease->lost_status();
  absl::StatusOr<LockInfo> info = client->Describe("survivor");
  ASSERT_TRUE(info.ok()) << info.status();
  EXPECT_TRUE(info->held);
  EXPECT_EQ(info->owner, client->owner());
  EXPECT_EQ(info->fencing_token, lease->fencing_token());
  EXPECT_THAT(lease->Release(), StatusIs(absl::StatusCode::kOk));
}

TEST(RedisHealthTest, LockdStartedWhileRedisIsDownIsLiveAndBecomesReadyWhenRedisStarts) {
  TempDir tmp;
  absl::StatusOr<std::unique_ptr<RedisServer>> redis = RedisServer::Start();
  ASSERT_TRUE(redis.ok()) << redis.status();
  (*redis)->Kill();  // its port is where lockd will find Redis later
  const int health_port = FreePort();
  absl::StatusOr<std::unique_ptr<LockdProcess>> lockd =
      LockdProcess::Start(LockdFlags(**redis, health_port), tmp.path());
  ASSERT_TRUE(lockd.ok()) << lockd.status();
  const Probes probes{{(*lockd)->address(), absl::StrCat("127.0.0.1:", health_port)}};

  // The startup and liveness probes pass; readiness does not, and calls are
  // UNAVAILABLE.
  EXPECT_TRUE(probes.All("", kHealthServing));
  EXPECT_TRUE(probes.All(kLockService, kHealthNotServing));
  EXPECT_EQ(LockctlHealth(tmp, (*lockd)->address(), ""),
            std::make_pair(0, std::string("SERVING\n")));
  EXPECT_EQ(LockctlHealth(tmp, (*lockd)->address(), kLockService),
            std::make_pair(1, std::string("NOT_SERVING\n")));
  auto stub = v1::LockService::NewStub((*lockd)->NewChannel());
  v1::AcquireResponse resp;
  EXPECT_THAT(AcquireRpc(*stub, "early", "o", absl::Seconds(10), absl::ZeroDuration(),
                         absl::Seconds(5), &resp),
              StatusIs(grpc::StatusCode::UNAVAILABLE));
  EXPECT_TRUE(probes.LiveUntil(absl::Now() + absl::Seconds(1)));

  ASSERT_TRUE((*redis)->Restart().ok()) << (*redis)->Log();
  EXPECT_TRUE(WaitFor([&] { return probes.All(kLockService, kHealthServing); }, absl::Seconds(10)))
      << "readiness does not come when Redis does";
  EXPECT_TRUE(probes.All("", kHealthServing));
  EXPECT_EQ(LockctlHealth(tmp, (*lockd)->address(), kLockService),
            std::make_pair(0, std::string("SERVING\n")));
  grpc::Status s = AcquireRpc(*stub, "early", "o", absl::Seconds(10), absl::ZeroDuration(),
                              absl::Seconds(5), &resp);
  ASSERT_TRUE(s.ok()) << s.error_message();
  EXPECT_TRUE(resp.acquired());
  EXPECT_GT(resp.fencing_token(), 0u);
}

}  // namespace
}  // namespace lockd::testing
