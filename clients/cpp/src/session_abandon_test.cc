// lockd::Client's Session path against a scripted stream (a
// MockLockServiceStub whose Session returns ScriptedStream): the orderings a
// real lockd produces only under load, made exact, and what the client
// writes on the stream. The Session path's
// everyday behaviour is tested against real lockd processes in
// tests/integration/clients/client_session_test.cc.

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <deque>
#include <mutex>
#include <optional>
#include <set>
#include <thread>
#include <vector>

#include "clients/cpp/src/client_test_fixture.h"
#include "clients/cpp/src/scripted_session_stream.h"
#include "tests/support/status_matchers.h"

namespace lockd {
namespace {

using ::lockd::testing::StatusIs;
using ::testing::_;

using SessionAbandonTest = ScriptedSessionTest;

// The cancel of an acquire whose caller gave up can reach lockd after the
// caller's unary undo (a different HTTP/2 stream) and after lockd granted
// the acquire. The client must give that late grant back itself: lockd
// would otherwise renew a hold nobody knows of for as long as the session
// lives.
TEST_F(SessionAbandonTest, GrantAfterTheCallerGaveUpIsGivenBackOverTheStream) {
  int undos = 0;
  EXPECT_CALL(*stub_, Release(_, _, _))
      .WillRepeatedly(::testing::Invoke(
          [&](grpc::ClientContext*, const v1::ReleaseRequest& req, v1::ReleaseResponse* resp) {
            // The undo reaches lockd while the acquire still waits: nothing
            // to give back (docs/api.md: OK with the current hold count).
            EXPECT_FALSE(req.acquire_request_id().empty());
            ++undos;
            resp->set_released(false);
            resp->set_hold_count(0);
            return grpc::Status::OK;
          }));
  Client client = NewClient();
  AcquireOptions o = Ttl(absl::Seconds(30));
  o.wait = absl::Seconds(30);
  o.timeout = absl::Milliseconds(300);
  absl::StatusOr<Lease> lease = client.Acquire("x", o);          // the lock stays busy
  EXPECT_THAT(lease, StatusIs(absl::StatusCode::kUnavailable));  // no answer to the cancel
  EXPECT_EQ(undos, 1);

  std::optional<v1::SessionRequest> acquire = stream_.load()->AwaitWrite(
      [](const v1::SessionRequest& w) { return w.has_acquire(); }, absl::ZeroDuration());
  ASSERT_TRUE(acquire.has_value());
  stream_.load()->Push(GrantOf(*acquire, /*token=*/9, /*hold_count=*/1));

  std::optional<v1::SessionRequest> undo = stream_.load()->AwaitWrite(
      [](const v1::SessionRequest& w) { return w.has_release(); }, absl::Seconds(5));
  ASSERT_TRUE(undo.has_value()) << "the late grant was kept";
  EXPECT_EQ(undo->release().request().name(), "x");
  EXPECT_EQ(undo->release().request().acquire_request_id(),
            acquire->acquire().request().request_id());
  EXPECT_EQ(undo->release().request().fencing_token(), 9u);  // only that grant's hold
}

// A release over the stream names the Lease's hold by its fencing token (a
// late one must not touch a later hold of the owner); a reentrant Lease has
// the first hold's token.
TEST_F(SessionAbandonTest, ReleasesOverTheStreamCarryTheLeasesFencingToken) {
  Client client = NewClient();
  std::set<uint64_t> answered;
  // The client's next acquire (or release) not answered yet.
  auto next_op = [&](bool acquire) -> std::optional<v1::SessionRequest> {
    ScriptedStream* s = AwaitStream();
    if (s == nullptr) return std::nullopt;
    auto op_id = [&](const v1::SessionRequest& w) {
      return acquire ? w.acquire().op_id() : w.release().op_id();
    };
    std::optional<v1::SessionRequest> w = s->AwaitWrite(
        [&](const v1::SessionRequest& w) {
          return (acquire ? w.has_acquire() : w.has_release()) && answered.count(op_id(w)) == 0;
        },
        absl::Seconds(10));
    if (w.has_value()) answered.insert(op_id(*w));
    return w;
  };
  std::vector<Lease> leases;
  for (uint32_t hold_count : {1u, 2u}) {
    absl::StatusOr<Lease> lease;
    std::thread caller([&] { lease = client.Acquire("x", Ttl(absl::Seconds(30))); });
    std::optional<v1::SessionRequest> acquire = next_op(/*acquire=*/true);
    if (acquire.has_value()) {
      stream_.load()->Push(GrantOf(*acquire, /*token=*/41, hold_count));
    }
    caller.join();
    ASSERT_TRUE(acquire.has_value());
    ASSERT_TRUE(lease.ok()) << lease.status();
    leases.push_back(*std::move(lease));
  }
  for (Lease& lease : leases) {
    absl::Status released;
    std::thread caller([&] { released = lease.Release(); });
    std::optional<v1::SessionRequest> release = next_op(/*acquire=*/false);
    if (release.has_value()) {
      v1::SessionResponse answer;
      v1::SessionResult* r = answer.mutable_result();
      r->set_op_id(release->release().op_id());
      r->mutable_status();
      r->mutable_release()->set_released(&lease == &leases.back());
      stream_.load()->Push(answer);
    }
    caller.join();
    ASSERT_TRUE(release.has_value());
    EXPECT_TRUE(released.ok()) << released;
    EXPECT_EQ(release->release().request().fencing_token(), 41u);
    EXPECT_TRUE(release->release().request().acquire_request_id().empty());
  }
}

}  // namespace
}  // namespace lockd
