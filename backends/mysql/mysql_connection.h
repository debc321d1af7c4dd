// How the MySQL backend runs statements: a pool of worker threads, each with
// one Connection, which keeps a client connection (MysqlConnection,
// mysql_client.h) made on first use and remade after a failure, and the
// database's reachability as all of them see it (DbHealth). Statements are
// plain text (values quoted by SqlBytes, mysql_client.h).

#ifndef LOCKD_BACKENDS_MYSQL_MYSQL_CONNECTION_H_
#define LOCKD_BACKENDS_MYSQL_MYSQL_CONNECTION_H_

#include <atomic>
#include <cstdint>
#include <deque>
#include <memory>
#include <optional>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/functional/any_invocable.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "backends/backend.h"
#include "backends/common/timer_queue.h"
#include "backends/mysql/mysql_backend.h"
#include "backends/mysql/mysql_client.h"

namespace lockd::mysql {

// A failed statement's status as the Backend contract reports it: kInternal
// (a bug, such as an unexpected row) and kUnavailable as they are; anything
// else the database said is a reason to retry later, so kUnavailable with
// the same message. OK stays OK.
absl::Status UnavailableUnlessBug(absl::Status s);

// Parses column `i` of `row` into `out`; false if it is missing, NULL or not
// a number.
bool ParseField(const MysqlRow& row, size_t i, int64_t* out);
bool ParseField(const MysqlRow& row, size_t i, uint64_t* out);

// kInternal: `what` ("renew", ...) of `key` returned a row it cannot return.
absl::Status Unexpected(absl::string_view what, const LockKey& key);

// `d` scaled by a random factor in [0.75, 1.25). Thread-safe.
absl::Duration Jitter(absl::Duration d);

// Reachability of the database as seen by every connection of the pool, and
// a generation number bumped on each connection failure so that the other
// connections (likely dead too after a server restart) are remade before use
// rather than failing a statement. Changes are not logged here: the server
// logs health transitions. Thread-safe: atomics for the per-statement fast
// path, a mutex for the rest.
class DbHealth {
 public:
  // OK, or kUnavailable with the last connection failure.
  absl::Status status() const;
  uint64_t generation() const { return generation_.load(std::memory_order_acquire); }

  void OnReachable();
  // `connect`: the failure was a connect (starts the fail-fast window).
  void OnConnectionFailure(const absl::Status& s, bool connect);

  // The error to fail with instead of connecting, if a connect failed very
  // recently.
  std::optional<absl::Status> FailFast() const;

 private:
  std::atomic<bool> ok_{true};
  std::atomic<uint64_t> generation_{0};
  mutable absl::Mutex mu_;
  absl::Status status_ ABSL_GUARDED_BY(mu_);
  SteadyClock::time_point last_connect_failure_ ABSL_GUARDED_BY(mu_);
};

// One worker's connection: made on first use, remade after a failure.
// Not thread-safe: owned by one worker thread.
class Connection {
 public:
  // `options` and `health` must outlive the connection.
  Connection(const MysqlOptions* options, DbHealth* health) : options_(options), health_(health) {}

  struct Flags {
    // Also retry a duplicate-key error (a first grant racing another replica:
    // the retry sees the winner's row).
    bool retry_duplicate;
    // The statement changes nothing (a read): after a connection error it is
    // run once more on a new connection.
    bool read_only;
    // Connect even if a connect failed a moment ago (the health probe).
    bool probe;
  };
  static constexpr Flags kWrite{false, false, false};
  static constexpr Flags kGrant{true, false, false};
  static constexpr Flags kRead{false, true, false};
  static constexpr Flags kProbe{false, true, true};

  // Runs `sql`, connecting first if needed; blocks for at most the client's
  // timeouts per try. Retries deadlocks and lock wait timeouts (InnoDB rolled
  // the transaction back) a bounded number of times. Errors: kUnavailable
  // when the server cannot be reached or the connection broke (a write's
  // effect is then unknown), else the server's error (MysqlError).
  absl::StatusOr<MysqlResult> Run(absl::string_view sql, absl::string_view context, Flags flags);

 private:
  absl::Status EnsureConnected(bool probe);

  const MysqlOptions* const options_;
  DbHealth* const health_;
  std::unique_ptr<MysqlConnection> conn_;
  uint64_t generation_ = 0;
  absl::Time last_used_;
};

// Worker threads, each with its own Connection, running jobs in FIFO order.
// Thread-safe: the queue is guarded by one mutex.
class WorkerPool {
 public:
  // Runs with the worker's connection, or with nullptr if the pool closed
  // before the job ran (the job must then finish with ShuttingDownError()).
  using Job = absl::AnyInvocable<void(Connection* connection) &&>;

  // Starts `n` threads. `options` and `health` must outlive the pool.
  WorkerPool(size_t n, const MysqlOptions* options, DbHealth* health);
  ~WorkerPool() { Close(); }

  // Queues `job`; after Close() runs it inline with nullptr.
  void Submit(Job job);
  // The same, ahead of every queued job: for work that must not wait behind
  // a backlog (renewals: leases run out meanwhile). The caller bounds how
  // many such jobs it queues, so the others are not starved.
  void SubmitFirst(Job job);

  // Stops taking jobs, runs the queued ones with nullptr, waits for the
  // running ones and joins the threads. Idempotent.
  void Close();

 private:
  void Enqueue(Job job, bool first);
  void Work(const MysqlOptions* options, DbHealth* health);
  bool HasWorkOrClosed() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    return closed_ || !jobs_.empty();
  }

  absl::Mutex mu_;
  bool closed_ ABSL_GUARDED_BY(mu_) = false;
  std::deque<Job> jobs_ ABSL_GUARDED_BY(mu_);
  std::vector<std::thread> threads_;
};

}  // namespace lockd::mysql

#endif  // LOCKD_BACKENDS_MYSQL_MYSQL_CONNECTION_H_
