// ChooseAcquirePath: each row of its table (acquire_path.h), by hand and
// from the vectors every client's tests read,
// clients/testdata/acquire_paths.json (its "description" defines them;
// LOCKD_CLIENT_TESTDATA_DIR is set by CMake). The paths themselves are
// tested through lockd::Client (client_test.cc, session_abandon_test.cc and
// tests/integration/clients/).

#include "clients/cpp/src/acquire_path.h"

#include <atomic>
#include <chrono>
#include <memory>
#include <string>
#include <thread>

#include "clients/cpp/src/client_core.h"
#include "clients/cpp/src/client_test_fixture.h"
#include "clients/cpp/src/scripted_session_stream.h"
#include "clients/cpp/src/testdata.h"
#include "google/protobuf/struct.pb.h"
#include "tests/support/status_matchers.h"

namespace lockd::client_internal {
namespace {

using ::lockd::testing::StatusIs;

class ChooseAcquirePathTest : public ::testing::Test {
 protected:
  ChooseAcquirePathTest()
      : stub_(std::make_shared<::testing::NiceMock<v1::MockLockServiceStub>>()) {
    options_.owner = "test-owner";
    // K = 2 s + 2 s: session_safe needs ttl*2/3 - drift > 4 s, ttl >= about 6.1 s.
    options_.keepalive.time = absl::Seconds(2);
    options_.keepalive.timeout = absl::Seconds(2);
  }

  ClientCore& Core() {
    if (core_ == nullptr) core_ = std::make_unique<ClientCore>(stub_, nullptr, options_);
    return *core_;
  }

  AcquireCall Call(absl::Duration ttl) {
    absl::StatusOr<AcquireCall> call = NewAcquireCall(Core(), "orders/42", Ttl(ttl));
    EXPECT_TRUE(call.ok()) << call.status();
    return call.ok() ? *std::move(call) : AcquireCall();
  }

  AcquirePath Choose(const AcquireCall& call) { return ChooseAcquirePath(Core(), call); }

  std::shared_ptr<::testing::NiceMock<v1::MockLockServiceStub>> stub_;
  ClientOptions options_;
  std::unique_ptr<ClientCore> core_;
};

TEST_F(ChooseAcquirePathTest, SessionWhenNoRowSaysUnary) {
  EXPECT_EQ(Choose(Call(absl::ZeroDuration())), AcquirePath::kSession);
  // Zero (the server's default) fixed the session's lease: the same again.
  EXPECT_EQ(Choose(Call(absl::ZeroDuration())), AcquirePath::kSession);
}

TEST_F(ChooseAcquirePathTest, UnaryWhenSessionsAreOff) {
  options_.use_sessions = false;
  EXPECT_EQ(Choose(Call(absl::ZeroDuration())), AcquirePath::kUnary);
}

TEST_F(ChooseAcquirePathTest, UnaryForAnotherOwner) {
  AcquireCall call = Call(absl::ZeroDuration());
  call.owner = "someone-else";
  EXPECT_EQ(Choose(call), AcquirePath::kUnary);
}

TEST_F(ChooseAcquirePathTest, UnaryWithoutAutoRenew) {
  AcquireCall call = Call(absl::ZeroDuration());
  call.auto_renew = false;
  EXPECT_EQ(Choose(call), AcquirePath::kUnary);
}

TEST_F(ChooseAcquirePathTest, UnaryForATtlTooShortToOutlastAHang) {
  EXPECT_EQ(Choose(Call(absl::Seconds(6))), AcquirePath::kUnary);
  EXPECT_EQ(Choose(Call(absl::Seconds(7))), AcquirePath::kSession);
}

TEST_F(ChooseAcquirePathTest, UnaryWhenTheSessionsLeaseIsTooShort) {
  options_.session_ttl = absl::Seconds(6);
  EXPECT_EQ(Choose(Call(absl::ZeroDuration())), AcquirePath::kUnary);
}

TEST_F(ChooseAcquirePathTest, UnaryForATtlOtherThanTheSessionsLease) {
  // The first Acquire fixes the session's lease.
  EXPECT_EQ(Choose(Call(absl::Seconds(30))), AcquirePath::kSession);
  EXPECT_EQ(Choose(Call(absl::Seconds(20))), AcquirePath::kUnary);
  EXPECT_EQ(Choose(Call(absl::Seconds(30))), AcquirePath::kSession);
  EXPECT_EQ(Choose(Call(absl::ZeroDuration())), AcquirePath::kSession);
}

TEST_F(ChooseAcquirePathTest, UnaryFromThenOnOnceLockdHasNoSessionStream) {
  // The mock's Session RPC returns no stream, as a lockd without it answers
  // UNIMPLEMENTED.
  AcquireCall call = Call(absl::ZeroDuration());
  ASSERT_EQ(Choose(call), AcquirePath::kSession);
  EXPECT_THAT(Core().session().Acquire(call), StatusIs(absl::StatusCode::kUnimplemented));
  EXPECT_EQ(Choose(call), AcquirePath::kUnary);
}

TEST_F(ChooseAcquirePathTest, NegativeOptionsAreRejected) {
  AcquireOptions options;
  options.wait = absl::Seconds(-1);
  EXPECT_THAT(NewAcquireCall(Core(), "orders/42", options),
              StatusIs(absl::StatusCode::kInvalidArgument));
}

// --- clients/testdata/acquire_paths.json ------------------------------------

using google::protobuf::Struct;
using google::protobuf::Value;

// `key` of `s`, or null when absent.
const Value* Find(const Struct& s, const std::string& key) {
  auto it = s.fields().find(key);
  return it == s.fields().end() ? nullptr : &it->second;
}

absl::Duration Ms(const Value& v) { return absl::Milliseconds(v.number_value()); }

// One row: a fresh Client (a ClientCore over a mock whose Session RPC is
// missing, as a lockd without it answers, until an event opens one) makes
// the row's acquires in order; each is checked against its path, then its
// event (if any) is played.
void CheckRow(const Struct& defaults, const Struct& row) {
  const Struct& client = Find(row, "client")->struct_value();
  auto setting = [&](const std::string& key) -> const Value& {
    const Value* v = Find(client, key);
    if (v == nullptr) v = Find(defaults, key);
    EXPECT_NE(v, nullptr) << "no client setting \"" << key << "\"";
    static const Value* const kNull = new Value();
    return v != nullptr ? *v : *kNull;
  };
  ClientOptions options;
  options.owner = "vector-owner";
  options.use_sessions = setting("use_sessions").bool_value();
  options.keepalive.time = Ms(setting("keepalive_time_ms"));
  options.keepalive.timeout = Ms(setting("keepalive_timeout_ms"));
  options.clock_drift_factor = setting("clock_drift_factor").number_value();
  options.min_clock_drift = Ms(setting("min_clock_drift_ms"));
  options.release_timeout = absl::Milliseconds(300);  // bounds the session's shutdown
  auto stub = std::make_shared<::testing::NiceMock<v1::MockLockServiceStub>>();
  std::atomic<ScriptedStream*> stream{nullptr};
  ClientCore core(stub, nullptr, options);

  const Value* acquires = Find(row, "acquires");
  ASSERT_NE(acquires, nullptr);
  ASSERT_GT(acquires->list_value().values_size(), 0);
  int step = 0;
  for (const Value& a : acquires->list_value().values()) {
    SCOPED_TRACE(::testing::Message() << "acquire " << step++);
    const Struct& acquire = a.struct_value();
    AcquireOptions o;
    o.ttl = Ms(*Find(acquire, "ttl_ms"));
    if (const Value* v = Find(acquire, "auto_renew")) o.auto_renew = v->bool_value();
    if (const Value* v = Find(acquire, "other_owner"); v != nullptr && v->bool_value()) {
      o.owner = "someone-else";
    }
    absl::StatusOr<AcquireCall> call = NewAcquireCall(core, "orders/42", o);
    ASSERT_TRUE(call.ok()) << call.status();
    const std::string want = Find(acquire, "path")->string_value();
    ASSERT_TRUE(want == "session" || want == "unary") << want;
    EXPECT_EQ(ChooseAcquirePath(core, *call),
              want == "session" ? AcquirePath::kSession : AcquirePath::kUnary);

    const Value* then = Find(acquire, "then");
    if (then == nullptr) continue;
    const std::string event = Find(then->struct_value(), "event")->string_value();
    if (event == "no_session_stream") {
      // The mock's Session RPC returns no stream: UNIMPLEMENTED.
      EXPECT_THAT(core.session().Acquire(*call), StatusIs(absl::StatusCode::kUnimplemented));
    } else if (event == "session_opened") {
      const absl::Duration lease = Ms(*Find(then->struct_value(), "lease_ms"));
      ON_CALL(*stub, SessionRaw(::testing::_))
          .WillByDefault(::testing::Invoke([&stream, lease](grpc::ClientContext*) {
            auto* s = new ScriptedStream;  // the client deletes it
            v1::SessionResponse opened;
            SetProtoDuration(lease, opened.mutable_opened()->mutable_lease_ttl());
            s->Push(opened);
            stream = s;
            return s;
          }));
      absl::StatusOr<std::vector<std::shared_ptr<LeaseState>>> held;
      std::thread caller([&] { held = core.session().Acquire(*call); });
      for (int i = 0; i < 1000 && stream.load() == nullptr; ++i) {
        std::this_thread::sleep_for(std::chrono::milliseconds(10));
      }
      if (stream.load() == nullptr) {
        caller.join();
        FAIL() << "the session did not open its stream";
      }
      std::optional<v1::SessionRequest> sent = stream.load()->AwaitWrite(
          [](const v1::SessionRequest& w) { return w.has_acquire(); }, absl::Seconds(10));
      if (sent.has_value()) stream.load()->Push(GrantOf(*sent, /*token=*/1, /*hold_count=*/1));
      caller.join();
      ASSERT_TRUE(sent.has_value());
      ASSERT_TRUE(held.ok()) << held.status();
    } else {
      ADD_FAILURE() << "unknown event \"" << event << "\"";
    }
  }
}

TEST(AcquirePathVectorsTest, EveryRowOfTheSharedTable) {
  const Struct all = LoadTestdata("acquire_paths.json");
  const Value* defaults = Find(all, "client_defaults");
  const Value* rows = Find(all, "rows");
  ASSERT_NE(defaults, nullptr);
  ASSERT_NE(rows, nullptr);
  // One entry per row of ChooseAcquirePath's table (acquire_path.h).
  EXPECT_EQ(rows->list_value().values_size(), 8);
  for (const Value& row : rows->list_value().values()) {
    SCOPED_TRACE(Find(row.struct_value(), "row")->string_value());
    CheckRow(defaults->struct_value(), row.struct_value());
  }
}

}  // namespace
}  // namespace lockd::client_internal
