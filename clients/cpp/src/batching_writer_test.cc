// BatchingWriter: what leaves in which write, with a write function the
// test holds in flight (docs/api.md "Batches on a Session").

#include "clients/cpp/src/batching_writer.h"

#include <condition_variable>
#include <cstdint>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "gtest/gtest.h"

namespace lockd::client_internal {
namespace {

v1::SessionRequest ReleaseOp(uint64_t op_id, std::string name = "x") {
  v1::SessionRequest req;
  req.mutable_release()->set_op_id(op_id);
  req.mutable_release()->mutable_request()->set_name(std::move(name));
  return req;
}

// The op_ids a write carried: one for a lone op, each op's for a batch.
std::vector<uint64_t> OpIds(const v1::SessionRequest& msg) {
  std::vector<uint64_t> ids;
  if (!msg.has_batch()) return {msg.release().op_id()};
  for (const v1::SessionRequest& op : msg.batch().ops()) ids.push_back(op.release().op_id());
  return ids;
}

std::vector<uint64_t> Range(uint64_t first, uint64_t last) {
  std::vector<uint64_t> ids;
  for (uint64_t id = first; id <= last; ++id) ids.push_back(id);
  return ids;
}

// The stream side: records each write; the first write stays in flight
// until Release() when Hold() was called.
class Wire {
 public:
  BatchingWriter::WriteFn Fn() {
    return [this](const v1::SessionRequest& msg) {
      std::unique_lock<std::mutex> l(mu_);
      writes_.push_back(msg);
      ++in_flight_;
      cv_.notify_all();
      cv_.wait(l, [&] { return !held_; });
      --in_flight_;
      return ok_;
    };
  }
  void Hold() {
    std::lock_guard<std::mutex> l(mu_);
    held_ = true;
  }
  void Release() {
    std::lock_guard<std::mutex> l(mu_);
    held_ = false;
    cv_.notify_all();
  }
  void FailWrites() {
    std::lock_guard<std::mutex> l(mu_);
    ok_ = false;
  }
  // Waits until a write is in flight (held).
  bool AwaitInFlight() {
    std::unique_lock<std::mutex> l(mu_);
    return cv_.wait_for(l, std::chrono::seconds(10), [&] { return in_flight_ > 0; });
  }
  std::vector<v1::SessionRequest> writes() {
    std::lock_guard<std::mutex> l(mu_);
    return writes_;
  }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  std::vector<v1::SessionRequest> writes_;
  int in_flight_ = 0;
  bool held_ = false;
  bool ok_ = true;
};

class BatchingWriterTest : public ::testing::Test {
 protected:
  // Op 1, sent on its own thread, is held in flight.
  void StartHeldWrite() {
    wire_.Hold();
    first_ = std::thread([this] { writer_.Send(ReleaseOp(1)); });
    ASSERT_TRUE(wire_.AwaitInFlight());
  }
  // Lets op 1's write complete.
  void CompleteHeldWrite() {
    wire_.Release();
    first_.join();
  }
  ~BatchingWriterTest() override {
    if (first_.joinable()) CompleteHeldWrite();
  }

  Wire wire_;
  BatchingWriter writer_{wire_.Fn()};
  std::thread first_;
};

TEST_F(BatchingWriterTest, LoneOpIsWrittenAtOnceAloneByItsCaller) {
  writer_.Send(ReleaseOp(1));
  // Written before Send returned, on this thread, as a plain request.
  std::vector<v1::SessionRequest> writes = wire_.writes();
  ASSERT_EQ(writes.size(), 1u);
  EXPECT_TRUE(writes[0].has_release());
  EXPECT_EQ(writes[0].release().op_id(), 1u);
  // Idle again: the next lone op goes at once, alone, too.
  writer_.Send(ReleaseOp(2));
  writes = wire_.writes();
  ASSERT_EQ(writes.size(), 2u);
  EXPECT_FALSE(writes[1].has_batch());
  EXPECT_EQ(writes[1].release().op_id(), 2u);
}

TEST_F(BatchingWriterTest, OpsQueuedDuringAWriteLeaveAsOneBatchInOrder) {
  ASSERT_NO_FATAL_FAILURE(StartHeldWrite());
  std::vector<uint64_t> tickets;
  for (uint64_t id = 2; id <= 10; ++id) tickets.push_back(writer_.Queue(ReleaseOp(id)));
  EXPECT_EQ(wire_.writes().size(), 1u) << "queued ops wait for the write in flight";
  CompleteHeldWrite();
  // The first of their callers to get the turn writes them all.
  writer_.Flush(tickets.front());
  std::vector<v1::SessionRequest> writes = wire_.writes();
  ASSERT_EQ(writes.size(), 2u);
  EXPECT_FALSE(writes[0].has_batch());
  EXPECT_EQ(OpIds(writes[0]), std::vector<uint64_t>{1});
  ASSERT_TRUE(writes[1].has_batch());
  EXPECT_EQ(OpIds(writes[1]), Range(2, 10));
  // The others find theirs gone and write nothing.
  for (uint64_t ticket : tickets) writer_.Flush(ticket);
  EXPECT_EQ(wire_.writes().size(), 2u);
}

// More than 1,000 queued: 1,000 per write. A caller writes until its own op
// has left, not longer.
TEST_F(BatchingWriterTest, MoreThanAThousandQueuedOpsAreSplitAcrossWrites) {
  ASSERT_NO_FATAL_FAILURE(StartHeldWrite());
  std::vector<uint64_t> tickets;
  for (uint64_t id = 2; id <= 2501; ++id) tickets.push_back(writer_.Queue(ReleaseOp(id)));
  CompleteHeldWrite();
  writer_.Flush(tickets.front());  // op 2's caller
  EXPECT_EQ(wire_.writes().size(), 2u);
  writer_.Flush(tickets.back());  // op 2501's caller
  std::vector<v1::SessionRequest> writes = wire_.writes();
  ASSERT_EQ(writes.size(), 4u);
  EXPECT_EQ(OpIds(writes[0]), std::vector<uint64_t>{1});
  EXPECT_EQ(OpIds(writes[1]), Range(2, 1001));
  EXPECT_EQ(OpIds(writes[2]), Range(1002, 2001));
  EXPECT_EQ(OpIds(writes[3]), Range(2002, 2501));
}

// Callers on their own threads, as SessionStream's are: each queued op
// leaves once, in order, and never more than kMaxBatchOps at a time.
TEST_F(BatchingWriterTest, ConcurrentCallersEachOpLeavesOnceInOrder) {
  std::vector<std::thread> callers;
  std::mutex order_mu;  // queue in op_id order, as SessionStream does under its mutex
  uint64_t next_id = 1;
  for (int t = 0; t < 8; ++t) {
    callers.emplace_back([&] {
      for (int i = 0; i < 200; ++i) {
        uint64_t ticket;
        {
          std::lock_guard<std::mutex> l(order_mu);
          ticket = writer_.Queue(ReleaseOp(next_id++));
        }
        writer_.Flush(ticket);
      }
    });
  }
  for (std::thread& t : callers) t.join();
  std::vector<uint64_t> all;
  for (const v1::SessionRequest& w : wire_.writes()) {
    std::vector<uint64_t> ids = OpIds(w);
    EXPECT_LE(ids.size(), BatchingWriter::kMaxBatchOps);
    EXPECT_EQ(w.has_batch(), ids.size() > 1);
    all.insert(all.end(), ids.begin(), ids.end());
  }
  EXPECT_EQ(all, Range(1, 1600));
}

// Large ops (an acquire_all of many long names) stop a batch before it
// passes kMaxBatchBytes; one larger than that still goes, alone.
TEST_F(BatchingWriterTest, BatchesStayWithinTheByteBound) {
  ASSERT_NO_FATAL_FAILURE(StartHeldWrite());
  const std::string big(BatchingWriter::kMaxBatchBytes * 2 / 5, 'n');  // two fit, not three
  for (uint64_t id = 2; id <= 6; ++id) ASSERT_NE(writer_.Queue(ReleaseOp(id, big)), 0u);
  ASSERT_NE(writer_.Queue(ReleaseOp(7, std::string(BatchingWriter::kMaxBatchBytes + 1, 'n'))), 0u);
  const uint64_t last = writer_.Queue(ReleaseOp(8));
  CompleteHeldWrite();
  writer_.Flush(last);
  std::vector<v1::SessionRequest> writes = wire_.writes();
  ASSERT_EQ(writes.size(), 6u);
  EXPECT_EQ(OpIds(writes[1]), Range(2, 3));
  EXPECT_EQ(OpIds(writes[2]), Range(4, 5));
  EXPECT_EQ(OpIds(writes[3]), Range(6, 6));  // 7 would pass the bound
  EXPECT_EQ(OpIds(writes[4]), Range(7, 7));
  EXPECT_FALSE(writes[4].has_batch());
  EXPECT_EQ(OpIds(writes[5]), Range(8, 8));
  for (const v1::SessionRequest& w : writes) {
    if (w.has_batch()) {
      EXPECT_LE(w.ByteSizeLong(), BatchingWriter::kMaxBatchBytes + 64);
    }
  }
}

// A failed write means a broken stream: what is queued, and what comes
// later, is dropped (the reader settles those ops when it sees the end).
TEST_F(BatchingWriterTest, AfterAFailedWriteNothingMoreIsWritten) {
  wire_.FailWrites();
  ASSERT_NO_FATAL_FAILURE(StartHeldWrite());
  const uint64_t queued = writer_.Queue(ReleaseOp(2));
  CompleteHeldWrite();
  writer_.Flush(queued);                       // returns: dropped
  EXPECT_EQ(writer_.Queue(ReleaseOp(3)), 0u);  // dropped at once
  writer_.Send(ReleaseOp(4));
  std::vector<v1::SessionRequest> writes = wire_.writes();
  ASSERT_EQ(writes.size(), 1u);
  EXPECT_EQ(OpIds(writes[0]), std::vector<uint64_t>{1});
}

}  // namespace
}  // namespace lockd::client_internal
