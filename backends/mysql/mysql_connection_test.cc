#include "backends/mysql/mysql_connection.h"

#include <vector>

#include "absl/synchronization/mutex.h"
#include "absl/synchronization/notification.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace lockd::mysql {
namespace {

using ::testing::ElementsAre;

// No job here runs a statement, so no database is needed.
TEST(WorkerPoolTest, SubmitFirstRunsAheadOfQueuedJobs) {
  MysqlOptions options;
  DbHealth health;
  WorkerPool pool(1, &options, &health);
  absl::Notification started, go;
  absl::Mutex mu;
  std::vector<int> order;
  auto record = [&](int n) {
    return [&, n](Connection*) {
      absl::MutexLock l(&mu);
      order.push_back(n);
    };
  };
  pool.Submit([&](Connection*) {
    started.Notify();
    go.WaitForNotification();
  });
  started.WaitForNotification();  // the only worker is busy: the rest queue
  pool.Submit(record(1));
  pool.Submit(record(2));
  pool.SubmitFirst(record(3));
  go.Notify();
  {
    // The worker runs them in queue order (Close would run queued jobs
    // itself, racing the worker).
    absl::MutexLock l(&mu);
    mu.Await(absl::Condition(
        +[](std::vector<int>* o) { return o->size() == 3; }, &order));
    EXPECT_THAT(order, ElementsAre(3, 1, 2));
  }
  pool.Close();
}

TEST(WorkerPoolTest, SubmitFirstAfterCloseRunsInlineWithoutAConnection) {
  MysqlOptions options;
  DbHealth health;
  WorkerPool pool(1, &options, &health);
  pool.Close();
  bool ran = false;
  pool.SubmitFirst([&](Connection* s) { ran = s == nullptr; });
  EXPECT_TRUE(ran);
}

}  // namespace
}  // namespace lockd::mysql
