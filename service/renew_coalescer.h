// Joins the renewal rounds of many sessions into few Backend::RenewMany
// calls, as a database joins commits (group commit).
//
// A round submitted while fewer than `max_in_flight` batches are in flight
// goes to the backend at once, alone: at light load nothing waits. Otherwise
// it waits, and when a batch completes, every round that waited meanwhile
// goes in the next batch (up to `max_batch` renewals; a round is never
// split). So under load one backend call carries the renewals of many
// sessions: one Redis pipeline, one SQL statement, one ZooKeeper multi per
// chunk, instead of one per session. A waiting round's renewals reach the
// backend later than its session asked, so the lease the backend grants
// starts later too: a session that dates its lease from its request is on
// the safe side.
//
// Each round's callback gets its own results, in its own order, exactly as
// if it had called Backend::RenewMany itself.
//
// Thread-safe. No lock is held while the backend is called or a callback
// runs. Batches in flight keep what they need alive, so the coalescer may
// be destroyed before they complete (their callbacks still run).

#ifndef LOCKD_SERVICE_RENEW_COALESCER_H_
#define LOCKD_SERVICE_RENEW_COALESCER_H_

#include <cstddef>
#include <memory>
#include <vector>

#include "backends/backend.h"

namespace lockd {

class RenewCoalescer {
 public:
  static constexpr size_t kDefaultMaxInFlight = 4;
  static constexpr size_t kDefaultMaxBatch = 2000;

  // `backend` must outlive every batch (the backend drains its calls when
  // it shuts down). REQUIRES: max_in_flight >= 1, max_batch >= 1.
  explicit RenewCoalescer(Backend* backend, size_t max_in_flight = kDefaultMaxInFlight,
                          size_t max_batch = kDefaultMaxBatch);
  RenewCoalescer(const RenewCoalescer&) = delete;
  RenewCoalescer& operator=(const RenewCoalescer&) = delete;

  // As Backend::RenewMany: `done` runs once with one result per element of
  // `params`, in order.
  void RenewMany(std::vector<RenewParams> params, RenewManyCallback done);

 private:
  struct State;
  std::shared_ptr<State> state_;
};

}  // namespace lockd

#endif  // LOCKD_SERVICE_RENEW_COALESCER_H_
