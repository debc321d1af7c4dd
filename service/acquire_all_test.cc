// StartAcquireAll over the memory backend: key order, request-order answers,
// one wait for all, the give-back before the answer, cancellation and
// delivery, replay by request_id.

#include "service/acquire_all.h"

#include <memory>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "absl/synchronization/mutex.h"
#include "absl/synchronization/notification.h"
#include "backends/memory/memory_backend.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/support/status_matchers.h"
#include "tests/support/sync_backend.h"

namespace lockd {
namespace {

using ::lockd::testing::Acq;
using ::lockd::testing::Rel;
using ::lockd::testing::StatusIs;
using ::lockd::testing::SyncAcquire;
using ::lockd::testing::SyncDescribe;
using ::lockd::testing::SyncRelease;
using ::testing::ElementsAre;

// Forwards to the memory backend and records every Acquire's key and wait.
class RecordingBackend final : public Backend {
 public:
  RecordingBackend() : inner_(*NewMemoryBackend(MemoryOptions())) {}
  absl::string_view name() const override { return inner_->name(); }
  void Acquire(AcquireParams p, std::shared_ptr<CancelSignal> cancel,
               Callback<AcquireResult> done) override {
    {
      absl::MutexLock l(&mu_);
      names_.push_back(p.key.name);
      waits_.push_back(p.wait);
      request_ids_.push_back(p.request_id);
    }
    inner_->Acquire(std::move(p), std::move(cancel), std::move(done));
  }
  void Release(ReleaseParams p, Callback<ReleaseResult> done) override {
    inner_->Release(std::move(p), std::move(done));
  }
  void Renew(RenewParams p, Callback<RenewResult> done) override {
    inner_->Renew(std::move(p), std::move(done));
  }
  void Describe(LockKey key, Callback<LockState> done) override {
    inner_->Describe(std::move(key), std::move(done));
  }
  void List(ListParams p, Callback<ListResult> done) override {
    inner_->List(std::move(p), std::move(done));
  }
  absl::Status Health() const override { return inner_->Health(); }
  void Shutdown() override { inner_->Shutdown(); }

  std::vector<std::string> names() {
    absl::MutexLock l(&mu_);
    return names_;
  }
  std::vector<absl::Duration> waits() {
    absl::MutexLock l(&mu_);
    return waits_;
  }
  std::vector<std::string> request_ids() {
    absl::MutexLock l(&mu_);
    return request_ids_;
  }

 private:
  std::unique_ptr<Backend> inner_;
  absl::Mutex mu_;
  std::vector<std::string> names_ ABSL_GUARDED_BY(mu_);
  std::vector<absl::Duration> waits_ ABSL_GUARDED_BY(mu_);
  std::vector<std::string> request_ids_ ABSL_GUARDED_BY(mu_);
};

AcquireAllParams All(const std::vector<std::string>& names, const std::string& owner,
                     absl::Duration wait = absl::ZeroDuration(),
                     const std::string& request_id = "") {
  AcquireAllParams p;
  for (const std::string& n : names) p.locks.push_back({LockKey{"default", n}, LockKind{}});
  p.owner = owner;
  p.ttl = absl::Seconds(30);
  p.wait = wait;
  p.request_id = request_id;
  return p;
}

struct Outcome {
  grpc::Status status;
  v1::AcquireAllResponse resp;
  std::vector<AcquiredLock> held;
  bool delivered_asked = false;
};

// Runs one AcquireAll to its answer; `delivery` is what `deliver` says.
Outcome RunAll(Backend& backend, AcquireAllParams params,
               AcquireCall::Delivery delivery = AcquireCall::Delivery::kDeliver,
               std::shared_ptr<CancelSignal> cancel = std::make_shared<CancelSignal>()) {
  Outcome out;
  absl::Notification done;
  StartAcquireAll(
      &backend, std::move(params), std::move(cancel),
      [&](const std::vector<AcquiredLock>&) {
        out.delivered_asked = true;
        return delivery;
      },
      [&](grpc::Status s, v1::AcquireAllResponse resp, std::vector<AcquiredLock> held) {
        out.status = std::move(s);
        out.resp = std::move(resp);
        out.held = std::move(held);
        done.Notify();
      });
  done.WaitForNotification();
  return out;
}

bool Held(Backend& b, const std::string& name, const std::string& owner) {
  absl::StatusOr<LockState> s = SyncDescribe(b, LockKey{"default", name});
  return s.ok() && s->held && s->owner == owner;
}

TEST(AcquireAllTest, TakesLocksInKeyOrderAndAnswersInRequestOrder) {
  RecordingBackend backend;
  Outcome out = RunAll(backend, All({"c", "a", "b"}, "alice"));
  ASSERT_TRUE(out.status.ok()) << out.status.error_message();
  EXPECT_THAT(backend.names(), ElementsAre("a", "b", "c"));
  ASSERT_TRUE(out.resp.acquired());
  EXPECT_EQ(out.resp.owner(), "alice");
  ASSERT_EQ(out.resp.locks_size(), 3);
  const char* request_order[] = {"c", "a", "b"};
  for (int i = 0; i < 3; ++i) {
    absl::StatusOr<LockState> s = SyncDescribe(backend, LockKey{"default", request_order[i]});
    ASSERT_TRUE(s.ok());
    EXPECT_EQ(out.resp.locks(i).fencing_token(), s->fencing_token) << request_order[i];
    EXPECT_EQ(out.resp.locks(i).hold_count(), 1u);
    EXPECT_EQ(out.held[i].call.key().name, request_order[i]);
  }
  backend.Shutdown();
}

TEST(AcquireAllTest, EveryLockCarriesTheCallsRequestId) {
  RecordingBackend backend;
  ASSERT_TRUE(RunAll(backend, All({"a", "b"}, "alice", absl::ZeroDuration(), "req-7")).status.ok());
  EXPECT_THAT(backend.request_ids(), ElementsAre("req-7", "req-7"));
  ASSERT_TRUE(RunAll(backend, All({"c", "d"}, "alice")).status.ok());
  std::vector<std::string> ids = backend.request_ids();
  EXPECT_FALSE(ids[2].empty());
  EXPECT_EQ(ids[2], ids[3]);  // one generated id for the whole call
  backend.Shutdown();
}

TEST(AcquireAllTest, NotAcquiredGivesBackEveryHoldBeforeTheAnswer) {
  RecordingBackend backend;
  ASSERT_TRUE(SyncAcquire(backend, Acq("c", "bob"))->acquired);
  Outcome out = RunAll(backend, All({"a", "b", "c", "d"}, "alice"));
  ASSERT_TRUE(out.status.ok());
  EXPECT_FALSE(out.resp.acquired());
  EXPECT_EQ(out.resp.blocked_on().name(), "c");
  EXPECT_EQ(out.resp.blocked_on().owner(), "bob");
  EXPECT_EQ(out.resp.locks_size(), 0);
  EXPECT_FALSE(out.delivered_asked);
  EXPECT_TRUE(out.held.empty());
  // Answered only after the give-backs: already free, no waiting.
  EXPECT_FALSE(Held(backend, "a", "alice"));
  EXPECT_FALSE(Held(backend, "b", "alice"));
  EXPECT_THAT(backend.names(), ElementsAre("c", "a", "b", "c"));  // d never tried
  backend.Shutdown();
}

TEST(AcquireAllTest, GiveBackLeavesTheOwnersOtherHoldsAlone) {
  RecordingBackend backend;
  ASSERT_TRUE(SyncAcquire(backend, Acq("a", "alice"))->acquired);  // alice's own, earlier
  ASSERT_TRUE(SyncAcquire(backend, Acq("b", "bob"))->acquired);
  Outcome out = RunAll(backend, All({"a", "b"}, "alice"));
  EXPECT_FALSE(out.resp.acquired());
  absl::StatusOr<LockState> a = SyncDescribe(backend, LockKey{"default", "a"});
  ASSERT_TRUE(a.ok());
  EXPECT_TRUE(a->held);
  EXPECT_EQ(a->hold_count, 1u);  // the reentrant hold of the call was undone, not the first
  backend.Shutdown();
}

TEST(AcquireAllTest, LaterLocksWaitOnlyWhatIsLeftOfTheOneWait) {
  RecordingBackend backend;
  ASSERT_TRUE(SyncAcquire(backend, Acq("a", "bob"))->acquired);
  ASSERT_TRUE(SyncAcquire(backend, Acq("b", "carol"))->acquired);
  std::thread releaser([&] {
    absl::SleepFor(absl::Milliseconds(300));
    ASSERT_TRUE(SyncRelease(backend, Rel("a", "bob")).ok());
  });
  const absl::Duration wait = absl::Seconds(1);
  Outcome out = RunAll(backend, All({"a", "b"}, "alice", wait));
  releaser.join();
  EXPECT_FALSE(out.resp.acquired());
  EXPECT_EQ(out.resp.blocked_on().name(), "b");
  std::vector<absl::Duration> waits = backend.waits();
  ASSERT_EQ(waits.size(), 4u);  // bob's, carol's, then the call's two
  EXPECT_LE(waits[2], wait);
  EXPECT_LE(waits[3], wait - absl::Milliseconds(300));  // what the first wait left
  EXPECT_FALSE(Held(backend, "a", "alice"));
  backend.Shutdown();
}

TEST(AcquireAllTest, CancelEndsTheWaitAndGivesBack) {
  RecordingBackend backend;
  ASSERT_TRUE(SyncAcquire(backend, Acq("b", "bob"))->acquired);
  auto cancel = std::make_shared<CancelSignal>();
  std::thread canceller([&] {
    absl::SleepFor(absl::Milliseconds(200));
    cancel->Cancel();
  });
  Outcome out = RunAll(backend, All({"a", "b"}, "alice", absl::Seconds(30)),
                       AcquireCall::Delivery::kDeliver, cancel);
  canceller.join();
  EXPECT_THAT(out.status, StatusIs(grpc::StatusCode::CANCELLED));
  EXPECT_FALSE(Held(backend, "a", "alice"));
  backend.Shutdown();
}

TEST(AcquireAllTest, UndeliverableGrantsAreGivenBack) {
  RecordingBackend backend;
  Outcome cancelled = RunAll(backend, All({"a", "b"}, "alice"), AcquireCall::Delivery::kCancelled);
  EXPECT_TRUE(cancelled.delivered_asked);
  EXPECT_THAT(cancelled.status, StatusIs(grpc::StatusCode::CANCELLED));
  EXPECT_TRUE(cancelled.held.empty());
  Outcome late = RunAll(backend, All({"a", "b"}, "alice"), AcquireCall::Delivery::kTooLate);
  EXPECT_THAT(late.status, StatusIs(grpc::StatusCode::DEADLINE_EXCEEDED));
  EXPECT_FALSE(Held(backend, "a", "alice"));
  EXPECT_FALSE(Held(backend, "b", "alice"));
  backend.Shutdown();
}

TEST(AcquireAllTest, RetryWithTheSameRequestIdReplaysEachGrant) {
  RecordingBackend backend;
  Outcome first = RunAll(backend, All({"a", "b"}, "alice", absl::ZeroDuration(), "req-1"));
  Outcome again = RunAll(backend, All({"a", "b"}, "alice", absl::ZeroDuration(), "req-1"));
  ASSERT_TRUE(again.resp.acquired());
  for (int i = 0; i < 2; ++i) {
    EXPECT_EQ(again.resp.locks(i).fencing_token(), first.resp.locks(i).fencing_token());
    EXPECT_EQ(again.resp.locks(i).hold_count(), 1u);
  }
  backend.Shutdown();
}

TEST(AcquireAllTest, AuthorizesEachNamespaceOnce) {
  AcquireAllParams p = All({"a", "b"}, "alice");
  p.locks.push_back({LockKey{"other", "c"}, LockKind{}});
  std::vector<std::string> asked;
  EXPECT_TRUE(AuthorizeNamespaces(p, [&](const LockKey& k) {
                asked.push_back(k.ns + "/" + k.name);
                return absl::OkStatus();
              }).ok());
  EXPECT_THAT(asked, ElementsAre("default/a", "other/c"));
  absl::Status denied = AuthorizeNamespaces(p, [](const LockKey& k) {
    return k.ns == "other" ? absl::PermissionDeniedError("no") : absl::OkStatus();
  });
  EXPECT_THAT(denied, StatusIs(absl::StatusCode::kPermissionDenied));
}

}  // namespace
}  // namespace lockd
