// SessionWriter over a stream whose writes the test completes by hand: a
// lone response leaves at once, responses queued during a write leave
// together (once batches are enabled), and the bounds of a batch.

#include "service/session_writer.h"

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace lockd {
namespace {

using ::testing::ElementsAre;

v1::SessionResponse Result(uint64_t op_id, const std::string& message = "") {
  v1::SessionResponse r;
  r.mutable_result()->set_op_id(op_id);
  r.mutable_result()->mutable_status()->set_message(message);
  return r;
}

v1::SessionResponse Lost(const std::string& name) {
  v1::SessionResponse r;
  r.mutable_lost()->set_name(name);
  r.mutable_lost()->set_reason("NOT_HELD");
  return r;
}

v1::SessionResponse Opened() {
  v1::SessionResponse r;
  r.mutable_opened()->set_owner("alice");
  return r;
}

// One write as the client would read it: "r<op_id>", "lost:<name>",
// "opened", or a batch "[item item ...]".
std::string Describe(const v1::SessionResponse& r) {
  switch (r.kind_case()) {
    case v1::SessionResponse::kResult:
      return "r" + std::to_string(r.result().op_id());
    case v1::SessionResponse::kLost:
      return "lost:" + r.lost().name();
    case v1::SessionResponse::kOpened:
      return "opened";
    case v1::SessionResponse::kBatch: {
      std::string out = "[";
      for (const v1::SessionResponse& item : r.batch().items()) {
        if (out.size() > 1) out += " ";
        out += Describe(item);
      }
      return out + "]";
    }
    default:
      return "?";
  }
}

class SessionWriterTest : public ::testing::Test {
 protected:
  // Every write started, as described; a copy is taken at once, as gRPC
  // serializes the message when the write starts.
  std::vector<std::string> writes_;
  std::vector<v1::SessionResponse> written_;
  SessionWriter writer_{[this](const v1::SessionResponse* resp) {
    writes_.push_back(Describe(*resp));
    written_.push_back(*resp);
  }};
};

TEST_F(SessionWriterTest, ALoneResultIsWrittenAtOnceWithoutABatch) {
  writer_.EnableBatches();
  writer_.Send(Result(1));
  EXPECT_THAT(writes_, ElementsAre("r1"));
  EXPECT_TRUE(writer_.WriteDone(true));  // idle: the reactor may finish
}

TEST_F(SessionWriterTest, ResultsReadyDuringAWriteLeaveInOneBatchInTheOrderSent) {
  writer_.EnableBatches();
  writer_.Send(Result(1));
  writer_.Send(Result(2));
  writer_.Send(Lost("job"));
  writer_.Send(Result(3));
  EXPECT_THAT(writes_, ElementsAre("r1"));  // nothing starts while r1 is in flight
  EXPECT_FALSE(writer_.WriteDone(true));
  EXPECT_THAT(writes_, ElementsAre("r1", "[r2 lost:job r3]"));
  EXPECT_TRUE(writer_.WriteDone(true));
  // Idle again: the next lone result leaves at once, alone.
  writer_.Send(Result(4));
  EXPECT_THAT(writes_, ElementsAre("r1", "[r2 lost:job r3]", "r4"));
}

TEST_F(SessionWriterTest, ALoneResultReadyDuringAWriteFollowsItAlone) {
  writer_.EnableBatches();
  writer_.Send(Result(1));
  writer_.Send(Result(2));
  EXPECT_FALSE(writer_.WriteDone(true));
  EXPECT_THAT(writes_, ElementsAre("r1", "r2"));
}

TEST_F(SessionWriterTest, WithoutBatchesEveryQueuedResponseIsAWriteOfItsOwn) {
  writer_.Send(Result(1));
  writer_.Send(Result(2));
  writer_.Send(Lost("job"));
  EXPECT_FALSE(writer_.WriteDone(true));
  EXPECT_FALSE(writer_.WriteDone(true));
  EXPECT_TRUE(writer_.WriteDone(true));
  EXPECT_THAT(writes_, ElementsAre("r1", "r2", "lost:job"));
}

TEST_F(SessionWriterTest, OpenedIsNeverPutInABatch) {
  writer_.EnableBatches();
  writer_.Send(Result(1));
  writer_.Send(Result(2));
  writer_.Send(Opened());
  writer_.Send(Result(3));
  writer_.Send(Result(4));
  while (!writer_.WriteDone(true)) {
  }
  EXPECT_THAT(writes_, ElementsAre("r1", "r2", "opened", "[r3 r4]"));
}

TEST_F(SessionWriterTest, ABatchCarriesAtMostkMaxResponseBatchItems) {
  writer_.EnableBatches();
  writer_.Send(Result(0));
  const int queued = 2 * kMaxResponseBatch + 5;
  for (int i = 1; i <= queued; ++i) writer_.Send(Result(i));
  while (!writer_.WriteDone(true)) {
  }
  ASSERT_EQ(written_.size(), 4u);
  EXPECT_EQ(written_[1].batch().items_size(), kMaxResponseBatch);
  EXPECT_EQ(written_[2].batch().items_size(), kMaxResponseBatch);
  EXPECT_EQ(written_[3].batch().items_size(), 5);
  // Every result once, in the order sent.
  uint64_t next = 1;
  for (size_t w = 1; w < written_.size(); ++w) {
    for (const v1::SessionResponse& item : written_[w].batch().items()) {
      EXPECT_EQ(item.result().op_id(), next++);
    }
  }
  EXPECT_EQ(next, static_cast<uint64_t>(queued) + 1);
}

TEST_F(SessionWriterTest, ABatchStopsBeforeItsItemsPassTheByteBound) {
  writer_.EnableBatches();
  const std::string big(kMaxResponseBatchBytes / 3 - 100, 'x');
  writer_.Send(Result(0));
  for (int i = 1; i <= 5; ++i) writer_.Send(Result(i, big));
  // A response larger than the bound on its own still leaves, alone.
  writer_.Send(Result(6, std::string(kMaxResponseBatchBytes + 1, 'y')));
  writer_.Send(Result(7));
  while (!writer_.WriteDone(true)) {
  }
  EXPECT_THAT(writes_, ElementsAre("r0", "[r1 r2 r3]", "[r4 r5]", "r6", "r7"));
}

TEST_F(SessionWriterTest, AFailedWriteDropsTheOutboxAndEverySendAfterIt) {
  writer_.EnableBatches();
  writer_.Send(Result(1));
  writer_.Send(Result(2));
  EXPECT_TRUE(writer_.WriteDone(false));
  writer_.Send(Result(3));
  EXPECT_THAT(writes_, ElementsAre("r1"));
  EXPECT_TRUE(writer_.CloseIfIdle());
}

TEST_F(SessionWriterTest, CloseWaitsForTheWriteInFlightAndThenDropsSends) {
  writer_.Send(Result(1));
  EXPECT_FALSE(writer_.CloseIfIdle());
  EXPECT_TRUE(writer_.WriteDone(true));
  EXPECT_TRUE(writer_.CloseIfIdle());
  writer_.Send(Result(2));
  EXPECT_THAT(writes_, ElementsAre("r1"));
}

}  // namespace
}  // namespace lockd
