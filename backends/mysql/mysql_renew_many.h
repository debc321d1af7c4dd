// Batched renewals for the MySQL backend (Backend::RenewMany): renewals of
// any number of RenewMany calls, whatever their owners, are coalesced and run
// as a few set-based statements instead of one renew procedure CALL per hold.
// A lockd with 10,000 sessions of one hold each at a 2 s lease renews 15,000
// holds a second. The service already joins sessions' renewal rounds into
// few RenewMany calls (service/renew_coalescer.h); this queue turns the calls
// that reach the backend into pool jobs, ahead of other work.
//
// Each hold's result is one the renew procedure (mysql_schema.cc, kRenewBody)
// could have given at some instant during the call: a caller cannot tell a
// batch from N Renews.
//   OK {ttl, token}       the owner held the lock with a live lease; its lease
//                         now ends `ttl` after the renewing statement.
//   HeldByOtherError      another owner holds it (live lease).
//   OtherHoldError        the owner holds it under another token than the
//                         renewal's fencing_token (when not 0).
//   LockFreeError         nobody holds it (no row, or the lease had ended), or
//                         the owner's holding ended and a new one began.
//   kUnavailable, ...     (UnavailableUnlessBug) a statement failed; the holds whose
//                         outcome it leaves unknown get its error.
// A lease that had ended, or another owner's, is never extended.

#ifndef LOCKD_BACKENDS_MYSQL_MYSQL_RENEW_MANY_H_
#define LOCKD_BACKENDS_MYSQL_MYSQL_RENEW_MANY_H_

#include <cstddef>
#include <deque>
#include <memory>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "backends/backend.h"
#include "backends/common/renew_join.h"
#include "backends/mysql/mysql_connection.h"
#include "backends/mysql/mysql_schema.h"

namespace lockd::mysql {

// Renew of one hold by the renew procedure (one CALL): Backend::Renew.
absl::StatusOr<RenewResult> RenewOne(Connection& s, const MysqlSchema& schema,
                                     const RenewParams& p);

// At most this many holds go into one statement.
inline constexpr size_t kRenewChunk = 500;

// Renews every element of `params` on `s` and returns one result per
// element, in order. Per kRenewChunk holds of one ttl: a SELECT of the rows,
// an UPDATE of those the owner holds (with the renewal's fencing_token, when
// not 0), matching owner, the token the SELECT saw and a live lease at the
// UPDATE, and, only if the UPDATE matched fewer rows than the SELECT
// promised (a concurrent change), a second SELECT to say which. Holds of
// names held SHARED or as a semaphore (their holders are <p>holders rows)
// are renewed one by one with RenewOne. Blocks for those statements.
std::vector<absl::StatusOr<RenewResult>> RenewBatch(Connection& s, const MysqlSchema& schema,
                                                    const std::vector<const RenewParams*>& params);

// Queues renewals and runs them through RenewBatch on the pool: one job takes
// everything queued (up to kRenewChunk * kChunksPerJob holds), so renewals
// that arrive while a job runs form the next batch. Jobs go to the front of
// the pool's queue (WorkerPool::SubmitFirst): behind a backlog of Acquires
// (10,000 sessions opening at once) leases would run out while they wait. At
// most `max_jobs` jobs are queued or running at once, so renewals never take
// the whole pool.
// Thread-safe: the queue is guarded by mu_.
class RenewBatcher {
 public:
  static constexpr size_t kChunksPerJob = 4;

  // `pool` and `schema` must outlive the batcher. REQUIRES: max_jobs >= 1.
  RenewBatcher(WorkerPool* pool, const MysqlSchema* schema, size_t max_jobs)
      : pool_(pool), schema_(schema), max_jobs_(max_jobs) {}

  // Renews `params`; `done` gets one result per element, in order, on a
  // pool thread (or inline: an empty `params`, or a closed pool, which
  // answers ShuttingDownError()).
  void Add(std::vector<RenewParams> params, RenewManyCallback done);

 private:
  struct Item {
    RenewParams params;
    std::shared_ptr<RenewJoin> join;
    size_t index;
  };

  // Takes a batch off the queue and renews it on `s` (or answers it with
  // ShuttingDownError() if `s` is null); queues itself again while renewals
  // are left.
  void Job(Connection* s);

  WorkerPool* const pool_;
  const MysqlSchema* const schema_;
  const size_t max_jobs_;

  absl::Mutex mu_;
  std::deque<Item> queue_ ABSL_GUARDED_BY(mu_);
  // Jobs submitted to the pool and not finished. Never 0 while queue_ has
  // items.
  size_t jobs_ ABSL_GUARDED_BY(mu_) = 0;
};

}  // namespace lockd::mysql

#endif  // LOCKD_BACKENDS_MYSQL_MYSQL_RENEW_MANY_H_
