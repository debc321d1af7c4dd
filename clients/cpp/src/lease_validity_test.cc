// The lease-validity bounds (lease_validity.h) against the vectors every
// client's tests read, clients/testdata/lease_validity.json (its "about"
// lines define them). LOCKD_CLIENT_TESTDATA_DIR is set by CMake.

#include "clients/cpp/src/lease_validity.h"

#include <string>

#include "clients/cpp/src/testdata.h"
#include "google/protobuf/struct.pb.h"
#include "gtest/gtest.h"

namespace lockd::client_internal {
namespace {

using google::protobuf::ListValue;
using google::protobuf::Struct;
using google::protobuf::Value;

// One group of vectors ("unary", "session_break", "session_safe").
ListValue Vectors(const std::string& group) {
  const Struct all = LoadTestdata("lease_validity.json");
  auto it = all.fields().find(group);
  if (it == all.fields().end()) {
    ADD_FAILURE() << "lease_validity.json has no \"" << group << "\"";
    return ListValue();
  }
  EXPECT_GT(it->second.list_value().values_size(), 0) << group;
  return it->second.list_value();
}

double Number(const Value& vector, const std::string& key) {
  auto it = vector.struct_value().fields().find(key);
  if (it == vector.struct_value().fields().end()) {
    ADD_FAILURE() << "a vector lacks \"" << key << "\"";
    return 0;
  }
  return it->second.number_value();
}

absl::Duration Ms(const Value& vector, const std::string& key) {
  return absl::Milliseconds(Number(vector, key));
}

SteadyTime At(absl::Duration since_epoch) { return SteadyTime() + ToSteady(since_epoch); }

double MsSinceEpoch(SteadyTime t) {
  return absl::FDivDuration(FromSteady(t.time_since_epoch()), absl::Milliseconds(1));
}

// The drift of a vector's ttl under its clock_drift_factor and
// min_clock_drift_ms, as a Client with those options computes it.
absl::Duration VectorDrift(const Value& vector) {
  ClientOptions options;
  options.clock_drift_factor = Number(vector, "clock_drift_factor");
  options.min_clock_drift = Ms(vector, "min_clock_drift_ms");
  return Drift(Ms(vector, "ttl_ms"), options);
}

// Runs `check` on each vector of `group`, naming it in failures.
template <typename Check>
void ForEachVector(const std::string& group, Check check) {
  const ListValue vectors = Vectors(group);
  for (int i = 0; i < vectors.values_size(); ++i) {
    SCOPED_TRACE(::testing::Message() << group << "[" << i << "]");
    check(vectors.values(i));
  }
}

TEST(LeaseValidityTest, UnaryBoundMatchesTheSharedVectors) {
  ForEachVector("unary", [](const Value& v) {
    SteadyTime until = UnaryValidUntil(At(Ms(v, "send_ms")), Ms(v, "ttl_ms"), VectorDrift(v));
    EXPECT_NEAR(MsSinceEpoch(until), Number(v, "valid_until_ms"), 1e-6);
  });
}

TEST(LeaseValidityTest, SessionBreakBoundMatchesTheSharedVectors) {
  ForEachVector("session_break", [](const Value& v) {
    SteadyTime until = SessionBreakValidUntil(At(Ms(v, "break_noticed_ms")), Ms(v, "hang_bound_ms"),
                                              Ms(v, "ttl_ms"), VectorDrift(v));
    EXPECT_NEAR(MsSinceEpoch(until), Number(v, "valid_until_ms"), 1e-6);
  });
}

TEST(LeaseValidityTest, SessionSafeMatchesTheSharedVectors) {
  ForEachVector("session_safe", [](const Value& v) {
    const auto& fields = v.struct_value().fields();
    ASSERT_TRUE(fields.count("session_safe"));
    EXPECT_EQ(SessionSafe(Ms(v, "ttl_ms"), VectorDrift(v), Ms(v, "hang_bound_ms")),
              fields.at("session_safe").bool_value());
  });
}

TEST(LeaseValidityTest, HangBoundIsThePingIntervalPlusItsTimeout) {
  ClientOptions options;
  options.keepalive.time = absl::Seconds(15);
  options.keepalive.timeout = absl::Seconds(15);
  EXPECT_EQ(HangBound(options), absl::Seconds(30));
  // The ping interval is at least 1 s (KeepaliveInterval).
  options.keepalive.time = absl::Milliseconds(200);
  options.keepalive.timeout = absl::Seconds(1);
  EXPECT_EQ(HangBound(options), absl::Seconds(2));
}

}  // namespace
}  // namespace lockd::client_internal
