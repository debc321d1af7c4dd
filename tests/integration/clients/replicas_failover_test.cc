// Three lockd replicas over one real Redis behind one address list: C++
// clients (session and unary) balance over them, one replica is killed with
// SIGKILL mid-run, and the application sees no error, mutual exclusion
// holds throughout (no lost update of a counter the locks protect, never two
// holders at once), the session holds that lived on the dead replica are
// resumed on the others, and the run goes on.

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "lockd/client.h"
#include "tests/support/lockd_process.h"
#include "tests/support/process.h"
#include "tests/support/redis_server.h"

namespace lockd {
namespace {

using ::lockd::testing::LockdProcess;
using ::lockd::testing::RedisServer;
using ::lockd::testing::TempDir;
using ::lockd::testing::WaitFor;

constexpr int kLocks = 3;
constexpr int kSessionThreads = 12;
constexpr int kUnaryThreads = 4;
constexpr int kLongHolders = 4;
// Long enough that the long holders' channels, which first tried the other
// two replicas while they were down, have reconnected to them (gRPC's
// reconnect backoff is capped at 2 s) before their validity after the
// break, 2/3 of it, runs out.
constexpr absl::Duration kLongTtl = absl::Seconds(9);

// A value that a lock protects, updated by a read-modify-write that loses
// updates if two holders overlap (holders counts them to say so directly).
struct Protected {
  std::atomic<int> holders{0};
  std::atomic<int64_t> value{0};
};

// Acquires granted by the lockd whose /metrics is on `metrics_port` (the sum
// of lockd_acquire_requests_total{result="acquired"}); -1 if it does not
// answer.
int64_t AcquiredOn(int metrics_port) {
  int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  if (fd < 0) return -1;
  timeval tv{5, 0};
  ::setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(static_cast<uint16_t>(metrics_port));
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  std::string reply;
  const std::string request = "GET /metrics HTTP/1.0\r\nHost: 127.0.0.1\r\n\r\n";
  if (::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) == 0 &&
      ::write(fd, request.data(), request.size()) == static_cast<ssize_t>(request.size())) {
    char buf[4096];
    for (ssize_t n; (n = ::read(fd, buf, sizeof(buf))) > 0;) reply.append(buf, n);
  }
  ::close(fd);
  if (reply.empty()) return -1;
  int64_t total = 0;
  for (absl::string_view line : absl::StrSplit(reply, '\n')) {
    if (!absl::StartsWith(line, "lockd_acquire_requests_total{") ||
        !absl::StrContains(line, "result=\"acquired\"")) {
      continue;
    }
    double v = 0;
    if (absl::SimpleAtod(line.substr(line.rfind(' ') + 1), &v)) total += static_cast<int64_t>(v);
  }
  return total;
}

class ReplicasFailoverTest : public ::testing::Test {
 protected:
  void SetUp() override {
    absl::StatusOr<std::unique_ptr<RedisServer>> redis = RedisServer::Start();
    ASSERT_TRUE(redis.ok()) << redis.status();
    redis_ = *std::move(redis);
    flags_ = {"--backend=redis", "--redis.addresses=" + redis_->address(), "--lease.min=100ms"};
  }

  // Starts replicas on `ports` (0: a free one), each with its /metrics on a
  // port of its own (metrics_ports_), at once and waits until they all serve.
  void StartReplicas(std::vector<int> ports) {
    std::vector<std::unique_ptr<LockdProcess>> started;
    for (int port : ports) {
      metrics_ports_.push_back(testing::FreePort());
      std::vector<std::string> flags = flags_;
      flags.push_back(absl::StrCat("--metrics.listen=127.0.0.1:", metrics_ports_.back()));
      absl::StatusOr<std::unique_ptr<LockdProcess>> p =
          LockdProcess::Launch(flags, tmp_.path(), port);
      ASSERT_TRUE(p.ok()) << p.status();
      started.push_back(*std::move(p));
    }
    for (auto& p : started) {
      ASSERT_TRUE(p->WaitUntilServing().ok());
      replicas_.push_back(std::move(p));
    }
  }

  static Client NewClient(const std::string& target, bool sessions) {
    ClientOptions o;
    o.use_sessions = sessions;
    o.rpc_timeout = absl::Seconds(5);
    absl::StatusOr<Client> c = Client::Connect(target, o);
    EXPECT_TRUE(c.ok()) << c.status();
    return *std::move(c);
  }

  TempDir tmp_;
  std::unique_ptr<RedisServer> redis_;
  std::vector<std::string> flags_;
  std::vector<std::unique_ptr<LockdProcess>> replicas_;
  std::vector<int> metrics_ports_;  // replicas_[i]'s
};

TEST_F(ReplicasFailoverTest, KillingAReplicaMidRunLosesNoUpdateAndResumesItsSessions) {
  // The long holders open their sessions while the victim is the only
  // replica up, so their holds live on it; the other two come up for the
  // load (on ports picked now, so that the list names all three).
  ASSERT_NO_FATAL_FAILURE(StartReplicas({0}));
  const std::string victim = replicas_[0]->address();
  const int ports[2] = {testing::FreePort(), testing::FreePort()};
  const std::string all = absl::StrCat(victim, ",127.0.0.1:", ports[0], ",127.0.0.1:", ports[1]);
  std::vector<Client> long_clients;
  std::vector<Lease> long_leases;
  std::atomic<int> long_lost{0};
  for (int i = 0; i < kLongHolders; ++i) {
    long_clients.push_back(NewClient(all, /*sessions=*/true));
    AcquireOptions o;
    o.ttl = kLongTtl;
    o.on_lost = [&](const absl::Status&) { ++long_lost; };
    absl::StatusOr<Lease> lease = long_clients.back().Acquire(absl::StrCat("long/", i), o);
    ASSERT_TRUE(lease.ok()) << lease.status();
    long_leases.push_back(*std::move(lease));
  }
  ASSERT_NO_FATAL_FAILURE(StartReplicas({ports[0], ports[1]}));
  const std::string survivors = absl::StrCat(replicas_[1]->address(), ",", replicas_[2]->address());

  Protected locks[kLocks];
  std::atomic<bool> stop{false};
  std::atomic<int64_t> done{0};
  std::mutex errors_mu;
  std::vector<std::string> errors;
  auto error = [&](std::string e) {
    std::lock_guard<std::mutex> l(errors_mu);
    if (errors.size() < 20) errors.push_back(std::move(e));
  };
  std::vector<std::thread> threads;
  for (int t = 0; t < kSessionThreads + kUnaryThreads; ++t) {
    threads.emplace_back([&, t] {
      Client client = NewClient(all, /*sessions=*/t < kSessionThreads);
      for (int i = 0; !stop.load(); ++i) {
        const int k = (t + i) % kLocks;
        AcquireOptions o;
        o.ttl = absl::Seconds(3);
        o.wait = absl::Seconds(20);
        absl::StatusOr<Lease> lease = client.Acquire(absl::StrCat("shared/", k), o);
        if (!lease.ok()) {
          error(absl::StrCat("thread ", t, " acquire: ", lease.status().ToString()));
          continue;
        }
        Protected& p = locks[k];
        if (p.holders.fetch_add(1) != 0) error(absl::StrCat("two holders of shared/", k));
        if (!lease->valid()) error(absl::StrCat("thread ", t, " lease not valid when granted"));
        const int64_t v = p.value.load();
        std::this_thread::sleep_for(std::chrono::microseconds(500));
        p.value.store(v + 1);
        p.holders.fetch_sub(1);
        absl::Status released = lease->Release();
        if (!released.ok()) error(absl::StrCat("thread ", t, " release: ", released.ToString()));
        ++done;
        if (i % 8 == 0) {
          absl::StatusOr<LockInfo> info = client.Describe(absl::StrCat("long/", t % kLongHolders));
          if (!info.ok())
            error(absl::StrCat("thread ", t, " describe: ", info.status().ToString()));
        }
      }
    });
  }

  EXPECT_TRUE(WaitFor([&] { return done.load() >= 150; }, absl::Seconds(20)));
  // round_robin: every replica has served the load, not just the first
  // one the list names.
  for (size_t i = 0; i < replicas_.size(); ++i) {
    EXPECT_TRUE(WaitFor([&] { return AcquiredOn(metrics_ports_[i]) > 0; }, absl::Seconds(10)))
        << "replica " << replicas_[i]->address() << " got no acquire";
  }
  replicas_[0]->process().Kill();
  const int64_t at_kill = done.load();
  const absl::Time killed = absl::Now();
  // Each long hold drops out of the server's keeping at the break and comes
  // back once its session is resumed on a survivor.
  for (Lease& lease : long_leases) {
    EXPECT_TRUE(
        WaitFor([&] { return lease.validity_remaining() > absl::Hours(24); }, kLongTtl * 2 / 3))
        << lease.name() << ": " << lease.lost_status();
  }
  // Past the holds' ttl: only the survivors can have renewed them.
  EXPECT_TRUE(WaitFor([&] { return done.load() >= at_kill + 150; }, absl::Seconds(20)));
  absl::SleepFor(
      std::max(absl::ZeroDuration(), killed + kLongTtl + absl::Milliseconds(500) - absl::Now()));
  stop = true;
  for (auto& th : threads) th.join();

  {
    std::lock_guard<std::mutex> l(errors_mu);
    EXPECT_THAT(errors, ::testing::IsEmpty()) << "victim " << victim;
  }
  int64_t total = 0;
  for (const Protected& p : locks) total += p.value.load();
  EXPECT_EQ(total, done.load()) << "updates lost under the locks";
  EXPECT_GE(done.load(), at_kill + 150) << "the run stalled after the kill";

  EXPECT_EQ(long_lost.load(), 0);
  Client observer = NewClient(survivors, /*sessions=*/false);
  for (int i = 0; i < kLongHolders; ++i) {
    Lease& lease = long_leases[i];
    EXPECT_TRUE(lease.valid()) << lease.name() << ": " << lease.lost_status();
    absl::StatusOr<LockInfo> info = observer.Describe(lease.name());
    ASSERT_TRUE(info.ok()) << info.status();
    EXPECT_TRUE(info->held) << lease.name();
    EXPECT_EQ(info->owner, long_clients[i].owner());
    EXPECT_EQ(info->fencing_token, lease.fencing_token());
    EXPECT_TRUE(lease.Release().ok());
    EXPECT_FALSE(observer.Describe(lease.name())->held);
  }
}

}  // namespace
}  // namespace lockd
