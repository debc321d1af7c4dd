// Batches on the Client's one Session stream, against a scripted stream:
// what the threads of one Client write, and how a response batch is read
// (docs/api.md "Batches on a Session"). The rules of what leaves in
// which write are unit-tested in batching_writer_test.cc; a real lockd
// answers batches in tests/integration/clients/client_session_test.cc.

#include <atomic>
#include <optional>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "clients/cpp/src/client_test_fixture.h"
#include "clients/cpp/src/scripted_session_stream.h"
#include "tests/support/status_matchers.h"

namespace lockd {
namespace {

using ::lockd::testing::StatusIs;

using SessionBatchTest = ScriptedSessionTest;

bool IsAcquireOf(const v1::SessionRequest& op, const std::string& name) {
  return op.has_acquire() && op.acquire().request().name() == name;
}

// Waits for the acquire of `name` to be written (alone or in a batch).
std::optional<v1::SessionRequest> AwaitAcquire(ScriptedStream* s, const std::string& name) {
  if (s == nullptr) return std::nullopt;
  return s->AwaitWrite([&](const v1::SessionRequest& op) { return IsAcquireOf(op, name); },
                       absl::Seconds(10));
}

TEST_F(SessionBatchTest, LoneAcquireIsWrittenAtOnceAlone) {
  Client client = NewClient();
  absl::StatusOr<Lease> lease;
  std::thread caller([&] { lease = client.Acquire("a", Ttl(absl::Seconds(30))); });
  std::optional<v1::SessionRequest> acquire = AwaitAcquire(AwaitStream(), "a");
  if (acquire.has_value()) stream_.load()->Push(GrantOf(*acquire, /*token=*/3, 1));
  caller.join();
  ASSERT_TRUE(acquire.has_value());
  ASSERT_TRUE(lease.ok()) << lease.status();
  EXPECT_EQ(lease->fencing_token(), 3u);
  std::vector<v1::SessionRequest> written = stream_.load()->Written();
  ASSERT_EQ(written.size(), 2u);
  EXPECT_TRUE(written[0].has_open());
  EXPECT_TRUE(written[1].has_acquire()) << "a lone op is not wrapped in a batch";
  lease->Detach();
}

// Threads of one Client whose acquires are issued while another acquire's
// write is in flight: they leave together, in the order issued, as ONE
// batch when that write completes.
TEST_F(SessionBatchTest, AcquiresIssuedDuringAWriteLeaveAsOneBatch) {
  Client client = NewClient();
  // Open the stream first, so that the writes below are the callers'.
  absl::StatusOr<Lease> warm;
  std::thread warm_caller([&] { warm = client.Acquire("warm", Ttl(absl::Seconds(30))); });
  std::optional<v1::SessionRequest> warm_acquire = AwaitAcquire(AwaitStream(), "warm");
  if (warm_acquire.has_value()) stream_.load()->Push(GrantOf(*warm_acquire, 1, 1));
  warm_caller.join();
  ASSERT_TRUE(warm.ok()) << warm.status();
  ScriptedStream* s = stream_.load();

  constexpr int kThreads = 8;
  s->HoldWrites();
  std::vector<absl::StatusOr<Lease>> leases(kThreads);
  std::vector<std::thread> callers;
  std::atomic<int> started{0};
  callers.emplace_back([&] { leases[0] = client.Acquire("k0", Ttl(absl::Seconds(30))); });
  ASSERT_TRUE(s->AwaitHeldWrite(absl::Seconds(10)));
  for (int i = 1; i < kThreads; ++i) {
    callers.emplace_back([&, i] {
      ++started;
      leases[i] = client.Acquire(absl::StrCat("k", i), Ttl(absl::Seconds(30)));
    });
  }
  // Each caller queues its op within microseconds of starting; this wait
  // only has to outlast the scheduler.
  while (started.load() < kThreads - 1) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  std::this_thread::sleep_for(std::chrono::milliseconds(200));
  s->ReleaseWrites();

  std::vector<v1::SessionRequest> acquires;
  for (int i = 0; i < kThreads; ++i) {
    std::optional<v1::SessionRequest> a = AwaitAcquire(s, absl::StrCat("k", i));
    if (a.has_value()) {
      s->Push(GrantOf(*a, 10 + i, 1));
      acquires.push_back(*a);
    }
  }
  for (std::thread& t : callers) t.join();
  ASSERT_EQ(acquires.size(), static_cast<size_t>(kThreads));
  for (int i = 0; i < kThreads; ++i) {
    ASSERT_TRUE(leases[i].ok()) << leases[i].status();
    EXPECT_EQ(leases[i]->fencing_token(), static_cast<uint64_t>(10 + i));
    leases[i]->Detach();
  }
  warm->Detach();

  // open, warm, k0 alone (the write held), then one batch of the others.
  std::vector<v1::SessionRequest> written = s->Written();
  ASSERT_EQ(written.size(), 4u);
  EXPECT_TRUE(IsAcquireOf(written[2], "k0"));
  ASSERT_TRUE(written[3].has_batch());
  const auto& ops = written[3].batch().ops();
  ASSERT_EQ(ops.size(), kThreads - 1);
  std::set<std::string> names;
  for (int i = 0; i < ops.size(); ++i) {
    ASSERT_TRUE(ops[i].has_acquire());
    names.insert(ops[i].acquire().request().name());
    EXPECT_GT(ops[i].acquire().op_id(),
              i == 0 ? written[2].acquire().op_id() : ops[i - 1].acquire().op_id())
        << "ops leave in the order issued";
  }
  EXPECT_EQ(names.size(), static_cast<size_t>(kThreads - 1));
}

// Every item of a response batch is handled as if it came alone: results
// go to their op by op_id whatever their order, a `lost` marks its lease.
TEST_F(SessionBatchTest, ResponseBatchItemsAreRoutedByOpId) {
  Client client = NewClient();
  absl::StatusOr<Lease> held;
  std::thread held_caller([&] { held = client.Acquire("held", Ttl(absl::Seconds(30))); });
  std::optional<v1::SessionRequest> held_acquire = AwaitAcquire(AwaitStream(), "held");
  if (held_acquire.has_value()) stream_.load()->Push(GrantOf(*held_acquire, 5, 1));
  held_caller.join();
  ASSERT_TRUE(held.ok()) << held.status();
  ScriptedStream* s = stream_.load();

  constexpr int kThreads = 6;
  std::vector<absl::StatusOr<Lease>> leases(kThreads);
  std::vector<std::thread> callers;
  for (int i = 0; i < kThreads; ++i) {
    callers.emplace_back(
        [&, i] { leases[i] = client.Acquire(absl::StrCat("k", i), Ttl(absl::Seconds(30))); });
  }
  std::vector<v1::SessionRequest> acquires;
  for (int i = 0; i < kThreads; ++i) {
    std::optional<v1::SessionRequest> a = AwaitAcquire(s, absl::StrCat("k", i));
    if (a.has_value()) acquires.push_back(*a);
  }
  // One response batch: the grants last op first, k3 refused, then the
  // loss of "held".
  v1::SessionResponse batch;
  for (int i = static_cast<int>(acquires.size()) - 1; i >= 0; --i) {
    v1::SessionResponse item = GrantOf(acquires[i], 100 + i, 1);
    if (i == 3) item.mutable_result()->mutable_acquire()->Clear();  // not acquired
    *batch.mutable_batch()->add_items() = item;
  }
  v1::LockLost* lost = batch.mutable_batch()->add_items()->mutable_lost();
  lost->set_namespace_(held->ns());
  lost->set_name("held");
  lost->set_fencing_token(5);
  lost->set_reason("FORCE_RELEASED");
  s->Push(batch);
  for (std::thread& t : callers) t.join();
  ASSERT_EQ(acquires.size(), static_cast<size_t>(kThreads));

  for (int i = 0; i < kThreads; ++i) {
    if (i == 3) {
      EXPECT_THAT(leases[i], StatusIs(absl::StatusCode::kDeadlineExceeded));  // not acquired
      continue;
    }
    ASSERT_TRUE(leases[i].ok()) << leases[i].status();
    EXPECT_EQ(leases[i]->name(), absl::StrCat("k", i));
    EXPECT_EQ(leases[i]->fencing_token(), static_cast<uint64_t>(100 + i));
    EXPECT_TRUE(leases[i]->valid());
    leases[i]->Detach();
  }
  EXPECT_TRUE(held->lost());
  EXPECT_THAT(held->lost_status().message(), ::testing::HasSubstr("FORCE_RELEASED"));
}

}  // namespace
}  // namespace lockd
