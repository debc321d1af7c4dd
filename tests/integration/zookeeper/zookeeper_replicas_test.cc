// lockd processes sharing one ZooKeeper server. A replica's contender nodes
// live in its ZooKeeper session: killed with SIGKILL, it loses them (and the
// locks they hold) once the session times out, and waiters on the other
// replicas get those locks; the dead replica's holders learn of the loss.

#include <signal.h>

#include <iostream>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "grpcpp/create_channel.h"
#include "grpcpp/security/credentials.h"
#include "gtest/gtest.h"
#include "lockd/v1/lock.grpc.pb.h"
#include "tests/support/lockd_process.h"
#include "tests/support/lockd_rpc.h"
#include "tests/support/process.h"
#include "tests/support/status_matchers.h"
#include "tests/support/zookeeper_server.h"

namespace lockd::testing {
namespace {

using v1::LockService;

// A 60 s lease, waiting up to `wait`; the call's deadline is 30 s past it.
grpc::Status Acquire(LockService::Stub& stub, const std::string& name, const std::string& owner,
                     absl::Duration wait, v1::AcquireResponse* resp) {
  return AcquireRpc(stub, name, owner, absl::Seconds(60), wait, wait + absl::Seconds(30), resp);
}

TEST(ZooKeeperReplicasTest, KilledReplicaFreesItsLocksWithinTheSessionTimeout) {
  auto server = ZooKeeperServer::Start();
  ASSERT_TRUE(server.ok()) << server.status();
  constexpr absl::Duration kSessionTimeout = absl::Seconds(2);
  std::vector<std::string> flags = {
      "--backend=zookeeper",
      absl::StrCat("--zookeeper.hosts=", (*server)->hosts()),
      "--zookeeper.root=/replicas",
      absl::StrCat("--zookeeper.session_timeout=", absl::FormatDuration(kSessionTimeout)),
      "--zookeeper.reap_interval=200ms",
  };
  TempDir dir;
  auto a = LockdProcess::Start(flags, dir.path());
  ASSERT_TRUE(a.ok()) << a.status();
  auto b = LockdProcess::Start(flags, dir.path());
  ASSERT_TRUE(b.ok()) << b.status();
  auto stub_a = LockService::NewStub((*a)->NewChannel());
  auto stub_b = LockService::NewStub((*b)->NewChannel());

  // Replica A holds three locks with leases far longer than the test.
  const std::vector<std::string> names = {"orders/1", "orders/2", "jobs/nightly"};
  std::vector<uint64_t> tokens;
  for (const std::string& name : names) {
    v1::AcquireResponse resp;
    ASSERT_TRUE(Acquire(*stub_a, name, "holder-on-a", absl::ZeroDuration(), &resp).ok());
    ASSERT_TRUE(resp.acquired());
    tokens.push_back(resp.fencing_token());
  }
  // Waiters on replica B.
  std::vector<v1::AcquireResponse> got(names.size());
  std::vector<grpc::Status> status(names.size());
  std::vector<absl::Time> granted_at(names.size());
  std::vector<std::thread> waiters;
  for (size_t i = 0; i < names.size(); ++i) {
    waiters.emplace_back([&, i] {
      auto stub = LockService::NewStub((*b)->NewChannel());
      status[i] =
          Acquire(*stub, names[i], absl::StrCat("waiter-on-b-", i), absl::Seconds(30), &got[i]);
      granted_at[i] = absl::Now();
    });
  }
  for (const std::string& name : names) {
    ASSERT_TRUE(WaitFor(
        [&] {
          v1::DescribeRequest req;
          req.set_name(name);
          v1::LockInfo info;
          grpc::ClientContext ctx;
          return stub_b->Describe(&ctx, req, &info).ok() && info.waiters() == 1;
        },
        absl::Seconds(20)));
  }

  absl::Time killed = absl::Now();
  (*a)->process().Kill();  // SIGKILL: no goodbye to ZooKeeper
  for (auto& t : waiters) t.join();
  for (size_t i = 0; i < names.size(); ++i) {
    ASSERT_TRUE(status[i].ok()) << names[i] << ": " << status[i].error_message();
    EXPECT_TRUE(got[i].acquired()) << names[i];
    EXPECT_GT(got[i].fencing_token(), tokens[i]) << names[i];
    // Freed by the session timeout (plus ZooKeeper's tick granularity and the
    // watch round trip), long before the 60 s lease.
    EXPECT_LE(granted_at[i] - killed, kSessionTimeout + absl::Seconds(3)) << names[i];
    std::cout << names[i] << " granted to the waiter on B "
              << absl::FormatDuration(granted_at[i] - killed) << " after A was killed\n";
  }
  // The holder that used replica A learns of the loss through replica B.
  v1::ReleaseRequest rel;
  rel.set_name(names[0]);
  rel.set_owner("holder-on-a");
  v1::ReleaseResponse rel_resp;
  grpc::ClientContext ctx;
  grpc::Status s = stub_b->Release(&ctx, rel, &rel_resp);
  EXPECT_THAT(s, StatusIs(grpc::StatusCode::FAILED_PRECONDITION));
  EXPECT_EQ((*b)->process().Stop(), 0) << (*b)->process().Log();
}

}  // namespace
}  // namespace lockd::testing
