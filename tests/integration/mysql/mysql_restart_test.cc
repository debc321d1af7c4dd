// lockd processes with backend=mysql against a private MariaDB server:
// the database stopped and restarted (cleanly and by a crash) under load,
// schema start-up of several processes, TLS to the database.

#include <atomic>
#include <future>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "gmock/gmock.h"
#include "google/rpc/error_details.pb.h"
#include "google/rpc/status.pb.h"
#include "grpcpp/create_channel.h"
#include "grpcpp/generic/generic_stub.h"
#include "grpcpp/security/credentials.h"
#include "grpcpp/support/byte_buffer.h"
#include "gtest/gtest.h"
#include "lockd/v1/lock.grpc.pb.h"
#include "protos/proto_duration.h"
#include "tests/support/grpc_health.h"
#include "tests/support/lockd_process.h"
#include "tests/support/mariadb_server.h"
#include "tests/support/process.h"
#include "tests/support/shared_server.h"
#include "tests/support/status_matchers.h"

namespace lockd::testing {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;
using v1::LockService;

std::unique_ptr<LockService::Stub> NewStub(const std::string& address) {
  static std::atomic<int> n{0};
  grpc::ChannelArguments args;
  args.SetInt("lockd.test.channel", n++);
  return LockService::NewStub(
      grpc::CreateCustomChannel(address, grpc::InsecureChannelCredentials(), args));
}

class Workload {
 public:
  // Clients round-robin over `addresses`, each looping over critical
  // sections on one lock with a non-atomic counter update inside.
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

  int64_t grants() const { return grants_; }
  int64_t unavailable() const { return unavailable_; }
  int64_t counter() const { return counter_; }
  uint64_t last_token() {
    std::lock_guard<std::mutex> l(mu_);
    return last_token_;
  }
  std::vector<std::string> TakeErrors() {
    std::lock_guard<std::mutex> l(mu_);
    return std::move(errors_);
  }

 private:
  void Error(const std::string& e) {
    std::lock_guard<std::mutex> l(mu_);
    errors_.push_back(e);
  }

  // Retries an UNAVAILABLE call with the same request_id, as a careful
  // client does: whether the first try took effect is unknown, and the
  // request_id makes the retry answer what it did.
  void Run(int c, const std::string& address) {
    auto stub = NewStub(address);
    std::string owner = absl::StrCat("client-", c);
    int64_t request = 0;
    while (!stop_) {
      v1::AcquireRequest req;
      req.set_name("counter");
      req.set_owner(owner);
      req.set_request_id(absl::StrCat("acquire-", ++request));
      *req.mutable_lease_ttl() = ToProtoDuration(absl::Seconds(10));
      *req.mutable_wait_timeout() = ToProtoDuration(absl::Milliseconds(500));
      v1::AcquireResponse resp;
      grpc::Status s;
      do {
        grpc::ClientContext ctx;
        ctx.set_deadline(absl::ToChronoTime(absl::Now() + absl::Seconds(5)));
        s = stub->Acquire(&ctx, req, &resp);
        if (s.error_code() == grpc::StatusCode::UNAVAILABLE) {
          ++unavailable_;
          absl::SleepFor(absl::Milliseconds(20));
        }
      } while (s.error_code() == grpc::StatusCode::UNAVAILABLE && !stop_);
      if (!s.ok()) {
        if (!stop_) Error(absl::StrCat("acquire: ", s.error_code(), " ", s.error_message()));
        continue;
      }
      if (!resp.acquired()) continue;
      {
        std::lock_guard<std::mutex> l(mu_);
        if (resp.fencing_token() <= last_token_ || resp.hold_count() != 1) {
          errors_.push_back(absl::StrCat("token ", resp.fencing_token(), " after ", last_token_,
                                         ", hold count ", resp.hold_count()));
        }
        last_token_ = resp.fencing_token();
      }
      int64_t v = counter_.load();
      absl::SleepFor(absl::Microseconds(300));
      counter_.store(v + 1);
      ++grants_;
      v1::ReleaseRequest rel;
      rel.set_name("counter");
      rel.set_owner(owner);
      rel.set_request_id(absl::StrCat("release-", request));
      v1::ReleaseResponse rel_resp;
      do {
        grpc::ClientContext rctx;
        rctx.set_deadline(absl::ToChronoTime(absl::Now() + absl::Seconds(5)));
        s = stub->Release(&rctx, rel, &rel_resp);
        if (s.error_code() == grpc::StatusCode::UNAVAILABLE) {
          ++unavailable_;
          absl::SleepFor(absl::Milliseconds(20));
        }
      } while (s.error_code() == grpc::StatusCode::UNAVAILABLE);
      if (!s.ok() || !rel_resp.released()) {
        Error(absl::StrCat("release: ", s.error_code(), " ", s.error_message()));
      }
    }
  }

  std::atomic<bool> stop_{false};
  std::atomic<int64_t> grants_{0}, unavailable_{0}, counter_{0};
  std::mutex mu_;
  uint64_t last_token_ = 0;
  std::vector<std::string> errors_;
  std::vector<std::thread> threads_;
};

std::vector<std::string> WithFlags(std::vector<std::string> flags,
                                   const std::vector<std::string>& extra) {
  flags.insert(flags.end(), extra.begin(), extra.end());
  return flags;
}

// One server for the suite (with TLS, for the test that needs it); the
// outage test, which stops and kills it, runs last and restarts it.
class MysqlRestartTest : public SharedServerTest<MariadbServer> {
 protected:
  static void SetUpTestSuite() {
    MariadbServer::Options options;
    options.tls = !FindExecutable({"openssl"}).empty();
    StartServer(options);
  }
  void SetUp() override { ASSERT_NE(server_, nullptr); }
};

TEST_F(MysqlRestartTest, SchemaStartUpIsIdempotentAndConcurrentStartsSucceed) {
  MariadbServer& db = *server_;

  // The same database twice in a row.
  for (int i = 0; i < 2; ++i) {
    auto p = LockdProcess::Start(db.LockdFlags("again_"), db.dir());
    ASSERT_TRUE(p.ok()) << p.status();
    EXPECT_EQ((*p)->process().Stop(), 0);
  }

  // Three replicas at once on a fresh prefix. Started from this thread
  // (Subprocess children die with the thread that started them) without
  // waiting in between, so their schema start-ups overlap.
  std::vector<std::unique_ptr<LockdProcess>> procs;
  std::vector<std::string> addresses;
  for (int i = 0; i < 3; ++i) {
    auto p = LockdProcess::Launch(db.LockdFlags("together_"), db.dir());
    ASSERT_TRUE(p.ok()) << p.status();
    addresses.push_back((*p)->address());
    procs.push_back(*std::move(p));
  }
  for (auto& p : procs) {
    absl::Status up = p->WaitUntilServing();
    ASSERT_TRUE(up.ok()) << up;
  }

  // They share the locks.
  auto a = NewStub(addresses[0]);
  auto b = NewStub(addresses[2]);
  v1::AcquireRequest req;
  req.set_name("shared");
  req.set_owner("first");
  v1::AcquireResponse resp;
  {
    grpc::ClientContext ctx;
    grpc::Status s = a->Acquire(&ctx, req, &resp);
    ASSERT_TRUE(s.ok()) << s.error_code() << " " << s.error_message();
    ASSERT_TRUE(resp.acquired());
  }
  req.set_owner("second");
  {
    grpc::ClientContext ctx;
    ASSERT_TRUE(b->Acquire(&ctx, req, &resp).ok());
    EXPECT_FALSE(resp.acquired());
    EXPECT_EQ(resp.current().owner(), "first");
    EXPECT_EQ(resp.current().backend(), "mysql");
  }
  absl::StatusOr<std::string> tables = db.Query(
      "SELECT COUNT(*) FROM information_schema.TABLES WHERE TABLE_SCHEMA = DATABASE()"
      " AND TABLE_NAME LIKE 'together!_%' ESCAPE '!'");
  ASSERT_TRUE(tables.ok());
  EXPECT_EQ(*tables, "7");
  a.reset();  // an open channel would hold up lockd's shutdown
  b.reset();
  for (auto& p : procs) EXPECT_EQ(p->process().Stop(), 0);
}

TEST_F(MysqlRestartTest, TlsToTheDatabase) {
  MariadbServer& db = *server_;
  if (db.tls_ca().empty()) GTEST_SKIP() << "no openssl command to make a certificate";
  // A user that may only connect over TLS.
  const std::string password_file = absl::StrCat(db.dir(), "/tls-password");
  ASSERT_TRUE(WriteFile(password_file, "tls-pw-2f9c\n").ok());
  ASSERT_TRUE(db.Query(absl::StrCat("CREATE USER 'tls'@'%' IDENTIFIED BY 'tls-pw-2f9c' REQUIRE SSL;"
                                    " GRANT ALL PRIVILEGES ON `",
                                    db.database(), "`.* TO 'tls'@'%'"))
                  .ok());
  const std::vector<std::string> tls_user = {"--mysql.user=tls",
                                             "--mysql.password_file=" + password_file};

  for (const char* mode : {"required", "verify_identity"}) {
    SCOPED_TRACE(mode);
    auto p = LockdProcess::Start(
        WithFlags(WithFlags(db.LockdFlags("tls_"), tls_user),
                  {absl::StrCat("--mysql.ssl_mode=", mode), "--mysql.ssl_ca=" + db.tls_ca()}),
        db.dir());
    ASSERT_TRUE(p.ok()) << p.status();
    EXPECT_THAT((*p)->process().Log(), HasSubstr("TLS"));
    {  // the channel must be gone before lockd is stopped, or it waits
      auto stub = NewStub((*p)->address());
      v1::AcquireRequest req;
      req.set_name("tls");
      req.set_owner("o");
      v1::AcquireResponse resp;
      grpc::ClientContext ctx;
      ASSERT_TRUE(stub->Acquire(&ctx, req, &resp).ok());
      EXPECT_TRUE(resp.acquired());
      v1::ReleaseRequest rel;
      rel.set_name("tls");
      rel.set_owner("o");
      v1::ReleaseResponse rel_resp;
      grpc::ClientContext rctx;
      ASSERT_TRUE(stub->Release(&rctx, rel, &rel_resp).ok());
    }
    EXPECT_EQ((*p)->process().Stop(), 0);
  }

  // Without TLS the user that requires it is refused at start.
  auto p =
      LockdProcess::Start(WithFlags(db.LockdFlags("tls_"), tls_user), db.dir(), absl::Seconds(10));
  ASSERT_FALSE(p.ok());
  EXPECT_THAT(p.status().message(), HasSubstr("Access denied"));
  EXPECT_THAT(p.status().message(), Not(HasSubstr("tls-pw-2f9c")));
}

TEST_F(MysqlRestartTest, DatabaseOutageIsUnavailableAndLockdRecoversWithoutRestart) {
  MariadbServer& db = *server_;
  std::vector<std::unique_ptr<LockdProcess>> lockds;
  std::vector<std::string> addresses;
  for (int i = 0; i < 2; ++i) {
    auto p = LockdProcess::Start(db.LockdFlags("restart_"), db.dir());
    ASSERT_TRUE(p.ok()) << p.status();
    addresses.push_back((*p)->address());
    lockds.push_back(*std::move(p));
  }
  auto all_health = [&](int want) {
    for (const std::string& a : addresses) {
      if (HealthStatus(a, kLockService) != want) return false;
    }
    return true;
  };
  ASSERT_TRUE(WaitFor([&] { return all_health(kHealthServing); }, absl::Seconds(5)));

  Workload work(addresses, 6);
  uint64_t token = 0;
  for (bool crash : {false, true}) {
    SCOPED_TRACE(crash ? "killed" : "stopped");
    int64_t grants = work.grants();
    ASSERT_TRUE(WaitFor([&] { return work.grants() > grants + 20; }, absl::Seconds(10)))
        << "no progress while the database is up";
    ASSERT_GT(work.last_token(), token);
    token = work.last_token();

    int64_t unavailable = work.unavailable();
    if (crash) {
      db.Kill();
    } else {
      ASSERT_TRUE(db.Stop().ok());
    }
    EXPECT_TRUE(WaitFor([&] { return all_health(kHealthNotServing); }, absl::Seconds(5)))
        << "readiness stays SERVING while the database is down";
    for (const std::string& a : addresses) {
      EXPECT_EQ(HealthStatus(a), kHealthServing) << "liveness follows the database";
    }
    EXPECT_TRUE(WaitFor([&] { return work.unavailable() > unavailable + 10; }, absl::Seconds(5)))
        << "calls are not answered UNAVAILABLE while the database is down";
    {
      auto stub = NewStub(addresses[0]);
      v1::DescribeRequest req;
      req.set_name("counter");
      v1::LockInfo info;
      grpc::ClientContext ctx;
      ctx.set_deadline(absl::ToChronoTime(absl::Now() + absl::Seconds(5)));
      EXPECT_THAT(stub->Describe(&ctx, req, &info), StatusIs(grpc::StatusCode::UNAVAILABLE));
    }
    absl::SleepFor(absl::Milliseconds(500));
    grants = work.grants();

    ASSERT_TRUE(db.Restart().ok()) << db.Log();
    EXPECT_TRUE(WaitFor([&] { return all_health(kHealthServing); }, absl::Seconds(10)))
        << "readiness does not come back after the database does";
    EXPECT_TRUE(WaitFor([&] { return work.grants() > grants + 20; }, absl::Seconds(15)))
        << "lockd does not grant again after the database came back";
    EXPECT_GT(work.last_token(), token) << "tokens must keep growing across the restart";
    token = work.last_token();
  }
  work.Stop();
  for (const std::string& e : work.TakeErrors()) ADD_FAILURE() << e;
  EXPECT_EQ(work.counter(), work.grants()) << "lost updates: mutual exclusion was broken";
  for (auto& p : lockds) {
    EXPECT_TRUE(p->process().Running()) << "lockd exited";
    std::string log = p->process().Log();
    EXPECT_THAT(log, Not(HasSubstr(db.password()))) << "the password was logged";
    EXPECT_EQ(p->process().Stop(), 0) << log;
  }
}

}  // namespace
}  // namespace lockd::testing
