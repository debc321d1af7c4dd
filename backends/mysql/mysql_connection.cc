#include "backends/mysql/mysql_connection.h"

#include <mysql.h>

#include <utility>

#include "absl/random/random.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "backends/common/errors.h"

namespace lockd::mysql {
namespace {

// Deadlocks and lock wait timeouts are retried this many times.
constexpr int kTransactionRetries = 8;
// A connection idle this long is pinged before use: the server (wait_timeout)
// or a proxy may have closed it, and a statement on it would fail ambiguously.
constexpr absl::Duration kIdlePing = absl::Seconds(60);
// After a failed connect, statements fail fast for this long instead of each
// waiting for its own connect attempt.
constexpr absl::Duration kConnectBackoff = absl::Milliseconds(100);

}  // namespace

absl::Status UnavailableUnlessBug(absl::Status s) {
  switch (s.code()) {
    case absl::StatusCode::kOk:
    case absl::StatusCode::kUnavailable:
    case absl::StatusCode::kInternal:
      return s;
    default:
      return absl::UnavailableError(s.message());
  }
}

bool ParseField(const MysqlRow& row, size_t i, int64_t* out) {
  return i < row.size() && row[i].has_value() && absl::SimpleAtoi(*row[i], out);
}
bool ParseField(const MysqlRow& row, size_t i, uint64_t* out) {
  return i < row.size() && row[i].has_value() && absl::SimpleAtoi(*row[i], out);
}

absl::Status Unexpected(absl::string_view what, const LockKey& key) {
  return absl::InternalError(
      absl::StrCat("mysql ", what, " of lock ", LockName(key), ": unexpected result row"));
}

absl::Duration Jitter(absl::Duration d) {
  thread_local absl::BitGen gen;
  return d * absl::Uniform(gen, 0.75, 1.25);
}

absl::Status DbHealth::status() const {
  if (ok_.load(std::memory_order_acquire)) return absl::OkStatus();
  absl::MutexLock l(&mu_);
  return status_;
}

void DbHealth::OnReachable() {
  if (ok_.load(std::memory_order_acquire)) return;
  absl::MutexLock l(&mu_);
  status_ = absl::OkStatus();
  ok_.store(true, std::memory_order_release);
}

void DbHealth::OnConnectionFailure(const absl::Status& s, bool connect) {
  absl::MutexLock l(&mu_);
  generation_.fetch_add(1, std::memory_order_acq_rel);
  if (connect) last_connect_failure_ = SteadyClock::now();
  status_ = absl::UnavailableError(s.message());
  ok_.store(false, std::memory_order_release);
}

std::optional<absl::Status> DbHealth::FailFast() const {
  if (ok_.load(std::memory_order_acquire)) return std::nullopt;
  absl::MutexLock l(&mu_);
  if (status_.ok() ||
      SteadyClock::now() - last_connect_failure_ > absl::ToChronoNanoseconds(kConnectBackoff)) {
    return std::nullopt;
  }
  return status_;
}

absl::StatusOr<MysqlResult> Connection::Run(absl::string_view sql, absl::string_view context,
                                            Flags flags) {
  for (int attempt = 0;; ++attempt) {
    absl::Status connected = EnsureConnected(flags.probe);
    if (!connected.ok()) return connected;
    MysqlOutcome o = conn_->Query(sql, context);
    last_used_ = absl::Now();
    if (o.result.ok()) {
      health_->OnReachable();
      return std::move(o.result);
    }
    if (conn_->broken()) {
      conn_.reset();
      health_->OnConnectionFailure(o.result.status(), /*connect=*/false);
      // Whether a write reached the server is unknown: report UNAVAILABLE
      // (its effect, if any, ends with the lease). A read is safe to repeat.
      if (flags.read_only && attempt == 0) continue;
      return o.result.status();
    }
    health_->OnReachable();
    bool again = IsRetryableTransactionError(o.error_code) ||
                 (flags.retry_duplicate && o.error_code == kErDupEntry);
    if (!again || attempt >= kTransactionRetries) return o.result.status();
    // Let the transaction we collided with finish (a first grant of a name
    // that many callers race for, e.g. a semaphore's, may collide several
    // times in a row: back off a little more each time).
    if (o.error_code == kErLockDeadlock || o.error_code == kErDupEntry) {
      absl::SleepFor(Jitter(absl::Milliseconds(2) * (attempt + 1)));
    }
  }
}

absl::Status Connection::EnsureConnected(bool probe) {
  if (conn_ != nullptr && generation_ != health_->generation()) conn_.reset();
  if (conn_ != nullptr && absl::Now() - last_used_ > kIdlePing) {
    MysqlOutcome o = conn_->Ping();
    if (!o.result.ok()) conn_.reset();
  }
  if (conn_ != nullptr) return absl::OkStatus();
  if (!probe) {
    if (std::optional<absl::Status> fail = health_->FailFast()) return *fail;
  }
  uint64_t generation = health_->generation();
  absl::StatusOr<std::unique_ptr<MysqlConnection>> c =
      MysqlConnection::Connect(*options_, /*use_database=*/true);
  if (!c.ok()) {
    health_->OnConnectionFailure(c.status(), /*connect=*/true);
    return UnavailableUnlessBug(c.status());
  }
  conn_ = *std::move(c);
  generation_ = generation;
  last_used_ = absl::Now();
  return absl::OkStatus();
}

WorkerPool::WorkerPool(size_t n, const MysqlOptions* options, DbHealth* health) {
  for (size_t i = 0; i < n; ++i) {
    threads_.emplace_back([this, options, health] { Work(options, health); });
  }
}

void WorkerPool::Submit(Job job) { Enqueue(std::move(job), /*first=*/false); }

void WorkerPool::SubmitFirst(Job job) { Enqueue(std::move(job), /*first=*/true); }

void WorkerPool::Enqueue(Job job, bool first) {
  {
    absl::MutexLock l(&mu_);
    if (!closed_) {
      if (first) {
        jobs_.push_front(std::move(job));
      } else {
        jobs_.push_back(std::move(job));
      }
      return;
    }
  }
  std::move(job)(nullptr);
}

void WorkerPool::Close() {
  std::deque<Job> pending;
  {
    absl::MutexLock l(&mu_);
    if (closed_) return;
    closed_ = true;
    pending.swap(jobs_);
  }
  for (Job& job : pending) std::move(job)(nullptr);
  for (std::thread& t : threads_) t.join();
}

void WorkerPool::Work(const MysqlOptions* options, DbHealth* health) {
  mysql_thread_init();
  Connection connection(options, health);
  while (true) {
    Job job;
    {
      absl::MutexLock l(&mu_);
      mu_.Await(absl::Condition(this, &WorkerPool::HasWorkOrClosed));
      if (jobs_.empty()) break;  // closed
      job = std::move(jobs_.front());
      jobs_.pop_front();
    }
    std::move(job)(&connection);
  }
  mysql_thread_end();
}

}  // namespace lockd::mysql
