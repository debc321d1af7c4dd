// lockd::Client's unary path (ClientOptions::use_sessions = false; the
// Session path is client_session_test.cc) against a real lockd process
// (memory backend): grants,
// waiting, renewal past the TTL, loss on a server restart, retries across a
// server that comes up late, release on destruction, a Release or Renew of an
// older hold leaving the owner's newer one alone, and Acquires whose reply
// is held back or lost on the way (through StallProxy) leaving no hold behind.

#include <atomic>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/notification.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "lockd/client.h"
#include "tests/integration/clients/regrant.h"
#include "tests/integration/clients/restartable_lockd.h"
#include "tests/integration/clients/tls_server.h"
#include "tests/support/process.h"
#include "tests/support/stall_proxy.h"
#include "tests/support/status_matchers.h"

namespace lockd {
namespace {

using ::lockd::testing::RegrantBehindTheClientsBack;
using ::lockd::testing::RestartableLockd;
using ::lockd::testing::StallProxy;
using ::lockd::testing::StatusIs;
using ::lockd::testing::TempDir;
using ::lockd::testing::WaitFor;
using ::testing::HasSubstr;

class ClientIntegrationTest : public ::testing::Test {
 protected:
  void SetUp() override {
    lockd_.emplace(tmp_.path());
    ASSERT_TRUE(lockd_->Start().ok());
  }

  Client NewClient(ClientOptions options = {}) { return NewClientAt(lockd_->address(), options); }

  static Client NewClientAt(const std::string& address, ClientOptions options = {}) {
    options.rpc_timeout = absl::Seconds(3);
    options.use_sessions = false;
    absl::StatusOr<Client> c = Client::Connect(address, options);
    EXPECT_TRUE(c.ok()) << c.status();
    return *std::move(c);
  }

  // True once `observer` sees `name` held by `owner` (or, with owner empty,
  // free) within `timeout`.
  static bool WaitForHolder(Client& observer, const std::string& name, const std::string& owner,
                            absl::Duration timeout = absl::Seconds(10)) {
    return WaitFor(
        [&] {
          absl::StatusOr<LockInfo> info = observer.Describe(name);
          return info.ok() && (owner.empty() ? !info->held : info->held && info->owner == owner);
        },
        timeout, absl::Milliseconds(5));
  }

  static AcquireOptions Opts(absl::Duration ttl, absl::Duration wait = absl::ZeroDuration()) {
    AcquireOptions o;
    o.ttl = ttl;
    o.wait = wait;
    return o;
  }

  TempDir tmp_;
  std::optional<RestartableLockd> lockd_;
};

TEST_F(ClientIntegrationTest, AcquiredLockIsHeldByTheOwnerUntilReleased) {
  Client a = NewClient();
  Client observer = NewClient();
  absl::StatusOr<Lease> lease = a.Acquire("orders/42", Opts(absl::Seconds(10)));
  ASSERT_TRUE(lease.ok()) << lease.status();
  EXPECT_GT(lease->fencing_token(), 0u);
  EXPECT_EQ(lease->ttl(), absl::Seconds(10));
  absl::StatusOr<LockInfo> info = observer.Describe("orders/42");
  ASSERT_TRUE(info.ok());
  EXPECT_TRUE(info->held);
  EXPECT_EQ(info->owner, a.owner());
  EXPECT_EQ(info->fencing_token, lease->fencing_token());
  EXPECT_EQ(info->backend, "memory");
  ASSERT_TRUE(lease->Release().ok());
  EXPECT_FALSE(observer.Describe("orders/42")->held);
}

TEST_F(ClientIntegrationTest, OtherOwnerIsNotAcquiredAndLearnsTheHolder) {
  Client a = NewClient();
  Client b = NewClient();
  absl::StatusOr<Lease> held = a.Acquire("x", Opts(absl::Seconds(10)));
  ASSERT_TRUE(held.ok());
  absl::StatusOr<Lease> no = b.TryAcquire("x", Opts(absl::Seconds(10)));
  ASSERT_THAT(no, StatusIs(absl::StatusCode::kDeadlineExceeded));
  std::optional<LockInfo> holder = CurrentHolder(no.status());
  ASSERT_TRUE(holder.has_value());
  EXPECT_EQ(holder->owner, a.owner());
  absl::StatusOr<Lease> waited = b.Acquire("x", Opts(absl::Seconds(10), absl::Milliseconds(300)));
  EXPECT_THAT(waited, StatusIs(absl::StatusCode::kDeadlineExceeded));
}

TEST_F(ClientIntegrationTest, WaiterGetsTheLockAfterReleaseWithAGreaterToken) {
  Client a = NewClient();
  Client b = NewClient();
  absl::StatusOr<Lease> first = a.Acquire("x", Opts(absl::Seconds(10)));
  ASSERT_TRUE(first.ok());
  std::thread releaser([&] {
    absl::SleepFor(absl::Milliseconds(300));
    EXPECT_TRUE(first->Release().ok());
  });
  absl::StatusOr<Lease> second = b.Acquire("x", Opts(absl::Seconds(10), absl::Seconds(10)));
  releaser.join();
  ASSERT_TRUE(second.ok()) << second.status();
  EXPECT_GT(second->fencing_token(), first->fencing_token());
}

TEST_F(ClientIntegrationTest, SameOwnerIsReentrant) {
  Client a = NewClient();
  absl::StatusOr<Lease> one = a.Acquire("x", Opts(absl::Seconds(10)));
  absl::StatusOr<Lease> two = a.Acquire("x", Opts(absl::Seconds(10)));
  ASSERT_TRUE(one.ok() && two.ok());
  EXPECT_EQ(two->hold_count(), 2u);
  EXPECT_EQ(two->fencing_token(), one->fencing_token());
  ASSERT_TRUE(two->Release().ok());
  EXPECT_TRUE(a.Describe("x")->held);
  ASSERT_TRUE(one->Release().ok());
  EXPECT_FALSE(a.Describe("x")->held);
}

// A Release or Renew of a Lease reaching lockd after its owner released the
// lock and took it again (a delayed request, here replayed by the Lease
// itself): it names the Lease's hold by its fencing token, so it finds
// another token and leaves the owner's new hold as it is.
TEST_F(ClientIntegrationTest, ReleaseOfAnOlderHoldLeavesTheOwnersNewHoldAlone) {
  Client a = NewClient();
  Client observer = NewClient();
  absl::StatusOr<Lease> lease = a.Acquire("x", Opts(absl::Seconds(30)));
  ASSERT_TRUE(lease.ok()) << lease.status();
  absl::StatusOr<uint64_t> t2 =
      RegrantBehindTheClientsBack(lockd_->address(), "x", a.owner(), absl::Seconds(5));
  ASSERT_TRUE(t2.ok()) << t2.status();
  ASSERT_GT(*t2, lease->fencing_token());
  absl::Status released = lease->Release();
  EXPECT_THAT(released, StatusIs(absl::StatusCode::kFailedPrecondition));
  EXPECT_TRUE(IsLockLost(released)) << released;
  absl::StatusOr<LockInfo> info = observer.Describe("x");
  ASSERT_TRUE(info.ok()) << info.status();
  EXPECT_TRUE(info->held) << "the release of the old hold freed the new one";
  EXPECT_EQ(info->owner, a.owner());
  EXPECT_EQ(info->fencing_token, *t2);
}

TEST_F(ClientIntegrationTest, RenewOfAnOlderHoldLeavesTheOwnersNewHoldAlone) {
  Client a = NewClient();
  Client observer = NewClient();
  absl::StatusOr<Lease> lease = a.Acquire("x", Opts(absl::Seconds(30)));
  ASSERT_TRUE(lease.ok()) << lease.status();
  absl::StatusOr<uint64_t> t2 =
      RegrantBehindTheClientsBack(lockd_->address(), "x", a.owner(), absl::Seconds(5));
  ASSERT_TRUE(t2.ok()) << t2.status();
  absl::Status renewed = lease->Renew();
  EXPECT_THAT(renewed, StatusIs(absl::StatusCode::kFailedPrecondition));
  EXPECT_TRUE(IsLockLost(renewed)) << renewed;
  EXPECT_TRUE(lease->lost());
  absl::StatusOr<LockInfo> info = observer.Describe("x");
  ASSERT_TRUE(info.ok()) << info.status();
  EXPECT_TRUE(info->held);
  EXPECT_EQ(info->fencing_token, *t2);
  // Not renewed to the old Lease's 30 s.
  EXPECT_LE(info->ttl_remaining, absl::Seconds(5));
}

TEST_F(ClientIntegrationTest, WatchdogKeepsTheLockPastItsTtl) {
  Client a = NewClient();
  Client b = NewClient();
  absl::StatusOr<Lease> lease = a.Acquire("x", Opts(absl::Milliseconds(900)));
  ASSERT_TRUE(lease.ok());
  absl::SleepFor(absl::Milliseconds(2000));
  EXPECT_TRUE(lease->valid());
  EXPECT_THAT(b.TryAcquire("x", Opts(absl::Seconds(1))),
              StatusIs(absl::StatusCode::kDeadlineExceeded));
  EXPECT_TRUE(lease->Release().ok());
}

TEST_F(ClientIntegrationTest, LeaseWithoutAutoRenewEndsAfterItsTtl) {
  Client a = NewClient();
  Client b = NewClient();
  AcquireOptions o = Opts(absl::Milliseconds(300));
  o.auto_renew = false;
  absl::StatusOr<Lease> lease = a.Acquire("x", o);
  ASSERT_TRUE(lease.ok());
  absl::StatusOr<Lease> next = b.Acquire("x", Opts(absl::Seconds(5), absl::Seconds(5)));
  ASSERT_TRUE(next.ok()) << next.status();
  EXPECT_TRUE(lease->lost());
  EXPECT_TRUE(IsLockLost(lease->Release()));
}

TEST_F(ClientIntegrationTest, ServerRestartMakesTheLeaseLostAndFiresTheCallbackOnce) {
  Client a = NewClient();
  std::atomic<int> fired{0};
  absl::Notification lost;
  AcquireOptions o = Opts(absl::Milliseconds(1500));
  o.on_lost = [&](const absl::Status& why) {
    EXPECT_TRUE(IsLockLost(why));
    if (++fired == 1) lost.Notify();
  };
  absl::StatusOr<Lease> lease = a.Acquire("x", o);
  ASSERT_TRUE(lease.ok());
  ASSERT_TRUE(lockd_->Restart().ok());  // the memory backend forgets the hold
  ASSERT_TRUE(lost.WaitForNotificationWithTimeout(absl::Seconds(5)));
  EXPECT_TRUE(lease->lost());
  absl::Status released = lease->Release();
  EXPECT_THAT(released, StatusIs(absl::StatusCode::kFailedPrecondition));
  EXPECT_TRUE(IsLockLost(released));
  EXPECT_EQ(fired.load(), 1);
}

TEST_F(ClientIntegrationTest, StoppedServerMakesTheLeaseLostWhenValidityEnds) {
  Client a = NewClient();
  absl::Notification lost;
  AcquireOptions o = Opts(absl::Milliseconds(600));
  o.on_lost = [&](const absl::Status& why) {
    EXPECT_THAT(std::string(why.message()), HasSubstr("validity"));
    lost.Notify();
  };
  absl::StatusOr<Lease> lease = a.Acquire("x", o);
  ASSERT_TRUE(lease.ok());
  lockd_->Kill();
  ASSERT_TRUE(lost.WaitForNotificationWithTimeout(absl::Seconds(5)));
  EXPECT_FALSE(lease->valid());
}

TEST_F(ClientIntegrationTest, AcquireRetriesUntilALateServerComesUp) {
  lockd_->Kill();
  Client a = NewClient();
  AcquireOptions o = Opts(absl::Seconds(10));
  o.timeout = absl::Seconds(20);
  absl::StatusOr<Lease> lease;
  absl::Time started = absl::Now();
  // The server is started from this thread: a child dies with the thread that
  // forked it (PR_SET_PDEATHSIG).
  std::thread acquirer([&] { lease = a.Acquire("x", o); });
  absl::SleepFor(absl::Milliseconds(500));
  ASSERT_TRUE(lockd_->Start().ok());
  absl::Time up = absl::Now();
  acquirer.join();
  ASSERT_TRUE(lease.ok()) << lease.status();
  EXPECT_LT(absl::Now() - up, absl::Seconds(3)) << "since start " << (absl::Now() - started);
  EXPECT_EQ(a.Describe("x")->hold_count, 1u);  // retries did not double the hold
}

TEST_F(ClientIntegrationTest, WatchdogReconnectsPromptlyAfterAnOutage) {
  Client a = NewClient();
  absl::Notification lost;
  absl::Status why;
  AcquireOptions o = Opts(absl::Seconds(4));
  o.on_lost = [&](const absl::Status& s) {
    why = s;
    lost.Notify();
  };
  absl::StatusOr<Lease> lease = a.Acquire("x", o);
  ASSERT_TRUE(lease.ok());
  lockd_->Kill();
  absl::SleepFor(absl::Seconds(2));  // renewals (from 1.3 s) fail; the channel backs off
  ASSERT_TRUE(lockd_->Start().ok());
  absl::Time up = absl::Now();
  // The restarted (memory) server no longer has the hold; the watchdog hears
  // so once it reaches the server, and must do so before the validity (4 s
  // from the Acquire) runs out. It keeps the channel connecting, so that
  // takes at most gRPC's reconnect backoff (capped at 2 s by the client);
  // left alone, gRPC's synchronous API retried only every 5 s here and the
  // lease ran out first.
  ASSERT_TRUE(lost.WaitForNotificationWithTimeout(absl::Seconds(10)));
  EXPECT_LT(absl::Now() - up, absl::Seconds(3));
  EXPECT_THAT(std::string(why.message()), HasSubstr("not held")) << why;
}

TEST_F(ClientIntegrationTest, UnreachableServerIsUnavailable) {
  lockd_->Kill();
  Client a = NewClient();
  AcquireOptions o = Opts(absl::Seconds(10));
  o.timeout = absl::Milliseconds(500);
  EXPECT_THAT(a.Acquire("x", o), StatusIs(absl::StatusCode::kUnavailable));
  EXPECT_THAT(a.Describe("x"), StatusIs(absl::StatusCode::kUnavailable));
}

TEST_F(ClientIntegrationTest, DestroyedLeaseReleasesTheLock) {
  Client a = NewClient();
  {
    absl::StatusOr<Lease> lease = a.Acquire("x", Opts(absl::Seconds(30)));
    ASSERT_TRUE(lease.ok());
    EXPECT_TRUE(a.Describe("x")->held);
  }
  EXPECT_FALSE(a.Describe("x")->held);
}

TEST_F(ClientIntegrationTest, GrantAfterAWaitLongerThanTheTtlComesBackValid) {
  Client a = NewClient();
  Client b = NewClient();
  absl::StatusOr<Lease> first = a.Acquire("x", Opts(absl::Milliseconds(600)));
  ASSERT_TRUE(first.ok());
  std::thread releaser([&] {
    absl::SleepFor(absl::Milliseconds(1200));  // two TTLs, renewed meanwhile
    EXPECT_TRUE(first->Release().ok());
  });
  absl::StatusOr<Lease> second = b.Acquire("x", Opts(absl::Milliseconds(600), absl::Seconds(10)));
  releaser.join();
  ASSERT_TRUE(second.ok()) << second.status();
  EXPECT_TRUE(second->valid());
  EXPECT_GT(second->validity_remaining(), absl::Milliseconds(300));
}

TEST_F(ClientIntegrationTest, LowLevelOperationsByOwner) {
  ClientOptions co;
  co.default_namespace = "jobs";
  Client a = NewClient(co);
  std::vector<Lease> leases;
  for (const char* n : {"r/1", "r/2", "s/1"}) {
    AcquireOptions o = Opts(absl::Seconds(10));
    o.auto_renew = false;
    absl::StatusOr<Lease> l = a.Acquire(n, o);
    ASSERT_TRUE(l.ok());
    leases.push_back(*std::move(l));
  }
  ListOptions lo;
  lo.prefix = "r/";
  lo.page_size = 1;
  absl::StatusOr<ListPage> page = a.List(lo);
  ASSERT_TRUE(page.ok());
  ASSERT_EQ(page->locks.size(), 1u);
  EXPECT_EQ(page->locks[0].name, "r/1");
  EXPECT_EQ(page->locks[0].ns, "jobs");
  lo.page_token = page->next_page_token;
  page = a.List(lo);
  ASSERT_TRUE(page.ok());
  ASSERT_EQ(page->locks.size(), 1u);
  EXPECT_EQ(page->locks[0].name, "r/2");

  absl::StatusOr<RenewOutcome> renewed = a.Renew("r/1", a.owner(), absl::Seconds(20));
  ASSERT_TRUE(renewed.ok());
  EXPECT_EQ(renewed->ttl, absl::Seconds(20));
  EXPECT_EQ(renewed->fencing_token, leases[0].fencing_token());
  absl::StatusOr<ReleaseOutcome> released = a.Release("s/1", a.owner());
  ASSERT_TRUE(released.ok());
  EXPECT_TRUE(released->released);
  EXPECT_TRUE(IsLockLost(a.Release("s/1", a.owner()).status()));
  EXPECT_TRUE(IsLockLost(a.Renew("s/1", "nobody", absl::Seconds(5)).status()));
  leases[2].Detach();  // already released above
}

TEST_F(ClientIntegrationTest, AcquireWhoseDeadlinePassesWhileTheServerGrantsLeavesNoHold) {
  absl::StatusOr<std::unique_ptr<StallProxy>> proxy = StallProxy::Start(lockd_->port());
  ASSERT_TRUE(proxy.ok()) << proxy.status();
  ClientOptions co;
  co.owner = "late-reply";
  co.release_timeout = absl::Seconds(3);
  Client client = NewClientAt((*proxy)->address(), co);
  Client observer = NewClient();
  ASSERT_TRUE(client.Describe("x").ok());  // connected before any reply is held back
  for (int round = 0; round < 3; ++round) {
    SCOPED_TRACE(round);
    (*proxy)->HoldReplies(true);
    AcquireOptions o = Opts(absl::Seconds(30));
    o.timeout = absl::Milliseconds(500);
    absl::StatusOr<Lease> lease;
    std::thread acquirer([&] { lease = client.Acquire("x", o); });
    // lockd grants at once and writes the reply, which the proxy keeps: for
    // lockd the reply went out, so only the client can give the hold back.
    EXPECT_TRUE(WaitForHolder(observer, "x", "late-reply"));
    // The client's deadline passes; its undo gets through (requests still
    // flow) although no answer can reach it yet.
    EXPECT_TRUE(WaitForHolder(observer, "x", "", absl::Seconds(5)))
        << "the hold of an Acquire that timed out was left behind";
    (*proxy)->HoldReplies(false);  // now the undo's answer arrives
    acquirer.join();
    EXPECT_THAT(lease, StatusIs(absl::StatusCode::kUnavailable));
    EXPECT_FALSE(UnconfirmedAcquireRequestId(lease.status()).has_value()) << lease.status();
    absl::StatusOr<LockInfo> info = observer.Describe("x");
    ASSERT_TRUE(info.ok());
    EXPECT_FALSE(info->held) << "held by " << info->owner << " x" << info->hold_count;
  }
  // Another owner gets the lock at once.
  Client other = NewClient();
  EXPECT_TRUE(other.TryAcquire("x", Opts(absl::Seconds(10))).ok());
}

TEST_F(ClientIntegrationTest, AcquireRetriedAfterItsReplyWasLostLeavesHoldCountOne) {
  absl::StatusOr<std::unique_ptr<StallProxy>> proxy = StallProxy::Start(lockd_->port());
  ASSERT_TRUE(proxy.ok()) << proxy.status();
  ClientOptions co;
  co.owner = "retried";
  Client client = NewClientAt((*proxy)->address(), co);
  Client observer = NewClient();
  ASSERT_TRUE(client.Describe("x").ok());
  (*proxy)->HoldReplies(true);
  AcquireOptions o = Opts(absl::Seconds(30));
  o.timeout = absl::Seconds(20);
  absl::StatusOr<Lease> lease;
  std::thread acquirer([&] { lease = client.Acquire("x", o); });
  ASSERT_TRUE(WaitForHolder(observer, "x", "retried"));  // granted; the reply is held back
  // The connection breaks with the reply on its way: the attempt ends
  // UNAVAILABLE after lockd applied it, and the client retries.
  (*proxy)->CutConnections();
  (*proxy)->HoldReplies(false);
  acquirer.join();
  ASSERT_TRUE(lease.ok()) << lease.status();
  EXPECT_EQ(lease->hold_count(), 1u);
  absl::StatusOr<LockInfo> info = observer.Describe("x");
  ASSERT_TRUE(info.ok());
  EXPECT_TRUE(info->held);
  EXPECT_EQ(info->owner, "retried");
  EXPECT_EQ(info->hold_count, 1u) << "the retried Acquire raised the hold count";
  EXPECT_EQ(info->fencing_token, lease->fencing_token());
  // One release frees the lock: no second hold is left behind.
  ASSERT_TRUE(lease->Release().ok());
  info = observer.Describe("x");
  ASSERT_TRUE(info.ok());
  EXPECT_FALSE(info->held) << "still held " << info->hold_count << " times";
}

TEST(ClientTlsTest, WorksOverTlsWithTheRightRootsAndFailsWithoutThem) {
  TempDir tmp;
  absl::StatusOr<std::unique_ptr<testing::TlsLockServer>> server =
      testing::TlsLockServer::Start(tmp.path());
  ASSERT_TRUE(server.ok()) << server.status();
  ClientOptions co;
  co.rpc_timeout = absl::Seconds(3);
  TlsOptions tls;
  tls.enabled = true;
  tls.ca_file = (*server)->cert_file();
  tls.server_name = "lockd.test";
  absl::StatusOr<Client> client = Client::Connect((*server)->address(), co, tls);
  ASSERT_TRUE(client.ok()) << client.status();
  AcquireOptions o;
  o.ttl = absl::Seconds(10);
  absl::StatusOr<Lease> lease = client->Acquire("x", o);
  ASSERT_TRUE(lease.ok()) << lease.status();
  EXPECT_TRUE(lease->Release().ok());
  // An address list (a dead replica first) over TLS.
  absl::StatusOr<Client> listed = Client::Connect(
      absl::StrCat("127.0.0.1:", testing::FreePort(), ",", (*server)->address()), co, tls);
  ASSERT_TRUE(listed.ok()) << listed.status();
  absl::StatusOr<Lease> listed_lease = listed->Acquire("x", o);
  ASSERT_TRUE(listed_lease.ok()) << listed_lease.status();
  EXPECT_TRUE(listed_lease->Release().ok());

  co.rpc_timeout = absl::Milliseconds(500);
  TlsOptions untrusted;  // default roots do not include the self-signed cert
  untrusted.enabled = true;
  untrusted.server_name = "lockd.test";
  absl::StatusOr<Client> bad = Client::Connect((*server)->address(), co, untrusted);
  ASSERT_TRUE(bad.ok());
  // No answer: refused handshakes (kUnavailable) or one still pending at the
  // deadline (kDeadlineExceeded).
  auto no_answer =
      ::testing::AnyOf(absl::StatusCode::kUnavailable, absl::StatusCode::kDeadlineExceeded);
  EXPECT_THAT(bad->Describe("x").status().code(), no_answer);
  absl::StatusOr<Client> plain = Client::Connect((*server)->address(), co);
  ASSERT_TRUE(plain.ok());
  EXPECT_THAT(plain->Describe("x").status().code(), no_answer);
}

}  // namespace
}  // namespace lockd
