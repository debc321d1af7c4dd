// Unit tests of the verify history: its JSON-lines format (what an
// independent checker reads), the strict reader's errors, the pairing rules
// and the recorder.

#include "tools/lockctl/verify/history.h"

#include <chrono>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/support/status_matchers.h"

namespace lockd::lockctl::verify {
namespace {

using ::lockd::testing::StatusIs;
using ::testing::HasSubstr;

Event AcquireOk() {
  Event e;
  e.time_ns = 1500;
  e.process = 3;
  e.type = EventType::kOk;
  e.f = Op::kAcquire;
  e.lock = "orders/\"7\"";
  e.owner = "w3";
  e.token = 42;
  e.valid_until_ns = 30'000'001'000;
  return e;
}

Event Invoke(int64_t t, int64_t process, Op f, const std::string& lock) {
  Event e;
  e.time_ns = t;
  e.process = process;
  e.type = EventType::kInvoke;
  e.f = f;
  e.lock = lock;
  if (f == Op::kAcquire) e.ttl_ns = 1'000'000'000;
  return e;
}

Event Done(int64_t t, int64_t process, Op f, const std::string& lock, EventType type) {
  Event e = Invoke(t, process, f, lock);
  e.type = type;
  e.ttl_ns = 0;
  if (f == Op::kAcquire && type == EventType::kOk) e.token = 1;
  return e;
}

TEST(EventJsonTest, KeysInDocumentedOrderAndDefaultsLeftOut) {
  EXPECT_EQ(EventToJson(AcquireOk()),
            "{\"time_ns\":1500,\"process\":3,\"type\":\"ok\",\"f\":\"acquire\","
            "\"lock\":\"orders/\\\"7\\\"\",\"owner\":\"w3\",\"token\":42,"
            "\"valid_until_ns\":30000001000}");
}

TEST(EventJsonTest, WriteAlwaysCarriesReadAndWrote) {
  Event w;
  w.time_ns = 9;
  w.f = Op::kWrite;
  w.type = EventType::kFail;
  w.lock = "a";
  w.counter = Counter::kFenced;
  w.token = 2;
  w.read = 0;
  w.wrote = 1;
  w.error = "STALE_TOKEN";
  EXPECT_EQ(EventToJson(w),
            "{\"time_ns\":9,\"process\":0,\"type\":\"fail\",\"f\":\"write\",\"lock\":\"a\","
            "\"token\":2,\"counter\":\"fenced\",\"read\":0,\"wrote\":1,\"error\":\"STALE_TOKEN\"}");
}

TEST(EventJsonTest, EveryFieldRoundTrips) {
  Event e = Invoke(77, 12, Op::kAcquire, "sem\x01tab\t");
  e.kind = LockKind::kSemaphore;
  e.permits = 2;
  e.limit = 5;
  e.owner = "ünïcode";
  e.api = Api::kSession;
  e.replica = "10.0.0.1:7411";
  e.valid_until_ns = -5;  // a bound before the run's start is representable
  absl::StatusOr<Event> back = ParseEvent(EventToJson(e));
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ(EventToJson(*back), EventToJson(e));
  EXPECT_EQ(back->lock, e.lock);
  EXPECT_EQ(back->kind, LockKind::kSemaphore);
  EXPECT_EQ(back->permits, 2u);
  EXPECT_EQ(back->limit, 5u);
  EXPECT_EQ(back->api, Api::kSession);
  EXPECT_EQ(back->valid_until_ns, -5);
}

TEST(ParseEventTest, ErrorsNameTheKey) {
  EXPECT_THAT(ParseEvent(R"({"time_ns":1,"process":0,"type":"ok","f":"acquire","colour":1})"),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("unknown key \"colour\"")));
  EXPECT_THAT(ParseEvent(R"({"time_ns":"1","process":0,"type":"ok","f":"acquire"})"),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("\"time_ns\" must be")));
  EXPECT_THAT(ParseEvent(R"({"time_ns":1.5,"process":0,"type":"ok","f":"acquire"})"),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("\"time_ns\" must be")));
  EXPECT_THAT(ParseEvent(R"({"time_ns":1,"process":0,"type":"ok","f":"acquire","token":1e300})"),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("\"token\"")));
  EXPECT_THAT(ParseEvent(R"({"time_ns":1,"process":-1,"type":"ok","f":"acquire"})"),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("\"process\" must be >= 0")));
  EXPECT_THAT(ParseEvent(R"({"time_ns":1,"process":0,"type":"done","f":"acquire"})"),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("\"type\" is \"done\", not one of invoke|ok|fail|info")));
  EXPECT_THAT(ParseEvent(R"({"time_ns":1,"process":0,"type":"ok"})"),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("missing key \"f\"")));
  EXPECT_THAT(ParseEvent(R"({"time_ns":1,"process":0,"type":"ok","f":"acquire","kind":7})"),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("\"kind\" must be a string")));
  EXPECT_THAT(ParseEvent("[1,2]"),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("not one JSON object")));
  EXPECT_THAT(ParseEvent(R"({"time_ns":1,)"),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("not one JSON object")));
}

TEST(ReadHistoryTest, ErrorsNameTheLine) {
  std::istringstream in(EventToJson(Invoke(1, 0, Op::kAcquire, "a")) + "\n\n" +
                        "{\"time_ns\":2,\"process\":0,\"type\":\"ok\",\"f\":\"aquire\"}\n");
  EXPECT_THAT(ReadHistory(in), StatusIs(absl::StatusCode::kInvalidArgument,
                                        HasSubstr("line 3: \"f\" is \"aquire\"")));
}

TEST(ReadHistoryTest, BlankLinesAreSkippedAndEventsKeptInFileOrder) {
  std::istringstream in(EventToJson(Invoke(5, 0, Op::kAcquire, "a")) + "\n\n   \n" +
                        EventToJson(Done(9, 0, Op::kAcquire, "a", EventType::kOk)) + "\n");
  absl::StatusOr<std::vector<Event>> events = ReadHistory(in);
  ASSERT_TRUE(events.ok()) << events.status();
  ASSERT_EQ(events->size(), 2u);
  EXPECT_EQ((*events)[1].time_ns, 9);
  EXPECT_EQ((*events)[1].token, 1u);
}

TEST(ReadHistoryTest, CompletionWithoutInvokeIsRejectedWithItsLine) {
  std::istringstream in(EventToJson(Invoke(1, 0, Op::kAcquire, "a")) + "\n" +
                        EventToJson(Done(2, 1, Op::kAcquire, "a", EventType::kOk)) + "\n");
  EXPECT_THAT(ReadHistory(in), StatusIs(absl::StatusCode::kInvalidArgument,
                                        HasSubstr("line 2: ok acquire of process 1 on \"a\" at "
                                                  "time_ns 2: no invoke before it")));
}

TEST(ValidateHistoryTest, PairsInTimeOrderNotFileOrder) {
  // A worker process's events forwarded late: its ok is before the invoke in
  // the file, after it in time.
  std::vector<Event> events = {Done(20, 1, Op::kAcquire, "a", EventType::kOk),
                               Invoke(10, 1, Op::kAcquire, "a")};
  EXPECT_TRUE(ValidateHistory(events).ok());
}

TEST(ValidateHistoryTest, AnInvokeStillPendingIsNotRepeated) {
  std::vector<Event> events = {Invoke(1, 0, Op::kAcquire, "a"), Invoke(2, 0, Op::kAcquire, "a")};
  EXPECT_THAT(ValidateHistory(events),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("event 2: invoke acquire of process 0 on \"a\" at time_ns 2: the "
                                 "invoke at time_ns 1 has no completion yet")));
  // Different locks may be in flight together (AcquireAll).
  events[1].lock = "b";
  EXPECT_TRUE(ValidateHistory(events).ok());
}

TEST(ValidateHistoryTest, AKillEndsThePendingOperationsOfItsProcess) {
  Event kill;
  kill.time_ns = 2;
  kill.process = 0;
  kill.type = EventType::kInfo;
  kill.f = Op::kKill;
  std::vector<Event> events = {Invoke(1, 0, Op::kAcquire, "a"), kill,
                               Done(3, 0, Op::kAcquire, "a", EventType::kOk)};
  EXPECT_THAT(ValidateHistory(events),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("event 3: ")));
  events.pop_back();
  events.push_back(Invoke(3, 0, Op::kAcquire, "a"));  // a new invoke is fine
  EXPECT_TRUE(ValidateHistory(events).ok());
  events[1].type = EventType::kOk;
  EXPECT_THAT(ValidateHistory(events), StatusIs(absl::StatusCode::kInvalidArgument,
                                                HasSubstr("a nemesis event has type info")));
}

TEST(ValidateHistoryTest, RequiredFieldsPerOperation) {
  Event no_ttl = Invoke(1, 0, Op::kAcquire, "a");
  no_ttl.ttl_ns = 0;
  EXPECT_THAT(ValidateHistory({no_ttl}),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("no \"ttl_ns\"")));

  Event sem = Invoke(1, 0, Op::kAcquire, "s");
  sem.kind = LockKind::kSemaphore;
  sem.permits = 3;
  sem.limit = 2;
  EXPECT_THAT(ValidateHistory({sem}), StatusIs(absl::StatusCode::kInvalidArgument,
                                               HasSubstr("1 <= \"permits\" <= \"limit\"")));

  Event granted = Done(2, 0, Op::kAcquire, "a", EventType::kOk);
  granted.token = 0;
  EXPECT_THAT(ValidateHistory({Invoke(1, 0, Op::kAcquire, "a"), granted}),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("needs its \"token\"")));

  Event write;
  write.f = Op::kWrite;
  write.type = EventType::kOk;
  write.lock = "a";
  write.counter = Counter::kFenced;
  EXPECT_THAT(ValidateHistory({write}), StatusIs(absl::StatusCode::kInvalidArgument,
                                                 HasSubstr("a fenced write needs a \"token\"")));
  write.counter = Counter::kUnfenced;
  EXPECT_TRUE(ValidateHistory({write}).ok());
  write.type = EventType::kInvoke;
  EXPECT_THAT(ValidateHistory({write}), StatusIs(absl::StatusCode::kInvalidArgument,
                                                 HasSubstr("recorded once, as ok or fail")));
}

TEST(ReadHistoryFileTest, AMissingFileIsNotFoundNamingThePath) {
  EXPECT_THAT(ReadHistoryFile("/nonexistent/history.jsonl"),
              StatusIs(absl::StatusCode::kNotFound, HasSubstr("/nonexistent/history.jsonl")));
}

TEST(HistoryRecorderTest, WritesEachEventAsALineThatReadsBack) {
  std::ostringstream out;
  HistoryRecorder recorder(&out);
  int64_t t1 = recorder.RecordNow(Invoke(0, 4, Op::kAcquire, "a"));
  std::this_thread::sleep_for(std::chrono::milliseconds(1));
  int64_t t2 = recorder.RecordNow(Done(0, 4, Op::kAcquire, "a", EventType::kOk));
  EXPECT_GE(t1, 0);
  EXPECT_GT(t2, t1);
  Event forwarded = Done(t2 + 5, 4, Op::kRelease, "a", EventType::kOk);
  recorder.Record(Invoke(t2 + 1, 4, Op::kRelease, "a"));
  recorder.Record(forwarded);

  std::istringstream in(out.str());
  absl::StatusOr<std::vector<Event>> events = ReadHistory(in);
  ASSERT_TRUE(events.ok()) << events.status();
  ASSERT_EQ(events->size(), 4u);
  EXPECT_EQ((*events)[0].time_ns, t1);
  EXPECT_EQ((*events)[1].time_ns, t2);
  EXPECT_EQ((*events)[3].time_ns, t2 + 5);
  ASSERT_EQ(recorder.Events().size(), 4u);
  EXPECT_EQ(EventToJson(recorder.Events()[2]), EventToJson((*events)[2]));
  EXPECT_TRUE(recorder.status().ok());
}

TEST(HistoryRecorderTest, ReportsAFailedOutputAndKeepsTheEvents) {
  std::ostringstream out;
  out.setstate(std::ios::badbit);
  HistoryRecorder recorder(&out);
  recorder.RecordNow(Invoke(0, 0, Op::kAcquire, "a"));
  EXPECT_THAT(recorder.status(), StatusIs(absl::StatusCode::kDataLoss));
  EXPECT_EQ(recorder.Events().size(), 1u);
}

TEST(HistoryRecorderTest, LeaseBoundsOnTheRunsClock) {
  const auto start = std::chrono::steady_clock::now();
  HistoryRecorder recorder(nullptr, start);
  EXPECT_EQ(recorder.ToRunNs(start + std::chrono::milliseconds(250)), 250'000'000);
  EXPECT_EQ(recorder.LeaseBoundNs(start + std::chrono::seconds(3)), 3'000'000'000);
  // No finite bound (a session hold while its stream is up): valid now.
  int64_t before = recorder.NowNs();
  int64_t bound = recorder.LeaseBoundNs(std::chrono::steady_clock::time_point::max());
  EXPECT_GE(bound, before);
  EXPECT_LE(bound, recorder.NowNs());
}

}  // namespace
}  // namespace lockd::lockctl::verify
