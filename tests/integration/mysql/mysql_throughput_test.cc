// Rough throughput of the mysql backend through one lockd process with 16
// gRPC clients: contended critical sections on one lock, and uncontended
// acquire/release pairs on a lock per client. Prints the numbers; asserts
// only a low floor, since CI machines are shared (lockbench, issue 7, is the
// real benchmark).

#include <algorithm>
#include <atomic>
#include <functional>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"
#include "grpcpp/create_channel.h"
#include "grpcpp/security/credentials.h"
#include "gtest/gtest.h"
#include "lockd/v1/lock.grpc.pb.h"
#include "protos/proto_duration.h"
#include "tests/support/lockd_process.h"
#include "tests/support/mariadb_server.h"

namespace lockd::testing {
namespace {

using v1::LockService;

struct Result {
  int64_t sections = 0;
  int64_t errors = 0;
  std::vector<absl::Duration> acquire_latency;
};

// Each client loops acquire -> release on `name(c)` for `time`.
Result RunClients(const std::string& address, int clients, absl::Duration time,
                  std::function<std::string(int)> name) {
  Result total;
  absl::Mutex mu;
  std::vector<std::thread> threads;
  absl::Time end = absl::Now() + time;
  for (int c = 0; c < clients; ++c) {
    threads.emplace_back([&, c] {
      grpc::ChannelArguments args;
      args.SetInt("lockd.test.channel", c);
      auto stub = LockService::NewStub(
          grpc::CreateCustomChannel(address, grpc::InsecureChannelCredentials(), args));
      Result mine;
      std::string owner = absl::StrCat("bench-", c);
      while (absl::Now() < end) {
        v1::AcquireRequest req;
        req.set_name(name(c));
        req.set_owner(owner);
        *req.mutable_lease_ttl() = ToProtoDuration(absl::Seconds(30));
        *req.mutable_wait_timeout() = ToProtoDuration(absl::Seconds(10));
        v1::AcquireResponse resp;
        grpc::ClientContext ctx;
        absl::Time start = absl::Now();
        grpc::Status s = stub->Acquire(&ctx, req, &resp);
        mine.acquire_latency.push_back(absl::Now() - start);
        if (!s.ok() || !resp.acquired()) {
          ++mine.errors;
          continue;
        }
        v1::ReleaseRequest rel;
        rel.set_name(name(c));
        rel.set_owner(owner);
        v1::ReleaseResponse rel_resp;
        grpc::ClientContext rctx;
        if (!stub->Release(&rctx, rel, &rel_resp).ok()) ++mine.errors;
        ++mine.sections;
      }
      absl::MutexLock l(&mu);
      total.sections += mine.sections;
      total.errors += mine.errors;
      total.acquire_latency.insert(total.acquire_latency.end(), mine.acquire_latency.begin(),
                                   mine.acquire_latency.end());
    });
  }
  for (auto& t : threads) t.join();
  std::sort(total.acquire_latency.begin(), total.acquire_latency.end());
  return total;
}

absl::Duration Percentile(const std::vector<absl::Duration>& sorted, double p) {
  if (sorted.empty()) return absl::ZeroDuration();
  return sorted[std::min(sorted.size() - 1, static_cast<size_t>(sorted.size() * p))];
}

TEST(MysqlThroughputTest, SixteenClientsThroughOneLockd) {
  absl::StatusOr<std::unique_ptr<MariadbServer>> server = MariadbServer::Start();
  ASSERT_TRUE(server.ok()) << server.status();
  auto lockd = LockdProcess::Start((*server)->LockdFlags("bench_"), (*server)->dir());
  ASSERT_TRUE(lockd.ok()) << lockd.status();
  const absl::Duration kTime = absl::Seconds(3);

  Result contended = RunClients((*lockd)->address(), 16, kTime, [](int) { return "hot"; });
  std::cout << "contended (16 clients, 1 lock): "
            << contended.sections / absl::ToDoubleSeconds(kTime) << " critical sections/s, "
            << "acquire p50 " << Percentile(contended.acquire_latency, 0.5) << ", p99 "
            << Percentile(contended.acquire_latency, 0.99) << ", errors " << contended.errors
            << "\n";
  Result free =
      RunClients((*lockd)->address(), 16, kTime, [](int c) { return absl::StrCat("own-", c); });
  std::cout << "uncontended (16 clients, own locks): "
            << free.sections / absl::ToDoubleSeconds(kTime) << " acquire/release pairs/s, "
            << "acquire p50 " << Percentile(free.acquire_latency, 0.5) << ", p99 "
            << Percentile(free.acquire_latency, 0.99) << ", errors " << free.errors << "\n";
  EXPECT_EQ(contended.errors, 0);
  EXPECT_EQ(free.errors, 0);
  EXPECT_GT(contended.sections, 100);
  EXPECT_GT(free.sections, 100);
  EXPECT_EQ((*lockd)->process().Stop(), 0);
}

}  // namespace
}  // namespace lockd::testing
