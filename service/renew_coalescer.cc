#include "service/renew_coalescer.h"

#include <deque>
#include <utility>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"

namespace lockd {

struct RenewCoalescer::State : std::enable_shared_from_this<State> {
  struct Round {
    std::vector<RenewParams> params;
    RenewManyCallback done;
  };

  State(Backend* b, size_t in_flight, size_t batch)
      : backend(b), max_in_flight(in_flight), max_batch(batch) {}

  // Sends `rounds` as one RenewMany; when it completes, hands each round its
  // results, then sends what waited meanwhile (or frees the slot).
  void Send(std::vector<Round> rounds) {
    std::vector<RenewParams> all;
    for (Round& r : rounds) {
      for (RenewParams& p : r.params) all.push_back(std::move(p));
    }
    backend->RenewMany(std::move(all),
                       [self = shared_from_this(), rounds = std::move(rounds)](
                           std::vector<absl::StatusOr<RenewResult>> results) mutable {
                         self->Answer(std::move(rounds), std::move(results));
                         if (std::vector<Round> next = self->NextOrFreeSlot(); !next.empty()) {
                           self->Send(std::move(next));
                         }
                       });
  }

  static void Answer(std::vector<Round> rounds, std::vector<absl::StatusOr<RenewResult>> results) {
    size_t at = 0;
    for (Round& r : rounds) {
      std::vector<absl::StatusOr<RenewResult>> mine;
      mine.reserve(r.params.size());
      // r.params was moved from element by element, so it keeps its size.
      for (size_t i = 0; i < r.params.size(); ++i, ++at) {
        mine.push_back(at < results.size()
                           ? std::move(results[at])
                           : absl::StatusOr<RenewResult>(absl::InternalError(
                                 "renewal batch answered fewer results than renewals")));
      }
      std::move(r.done)(std::move(mine));
    }
  }

  // The rounds that waited (up to max_batch renewals, at least one round);
  // none, after releasing the caller's slot, when nothing waits.
  std::vector<Round> NextOrFreeSlot() {
    std::vector<Round> next;
    absl::MutexLock l(&mu);
    size_t n = 0;
    while (!waiting.empty() && (next.empty() || n + waiting.front().params.size() <= max_batch)) {
      n += waiting.front().params.size();
      next.push_back(std::move(waiting.front()));
      waiting.pop_front();
    }
    if (next.empty()) --in_flight;
    return next;
  }

  Backend* const backend;
  const size_t max_in_flight;
  const size_t max_batch;
  absl::Mutex mu;
  size_t in_flight ABSL_GUARDED_BY(mu) = 0;
  std::deque<Round> waiting ABSL_GUARDED_BY(mu);
};

RenewCoalescer::RenewCoalescer(Backend* backend, size_t max_in_flight, size_t max_batch)
    : state_(std::make_shared<State>(backend, max_in_flight, max_batch)) {}

void RenewCoalescer::RenewMany(std::vector<RenewParams> params, RenewManyCallback done) {
  State::Round round{std::move(params), std::move(done)};
  {
    absl::MutexLock l(&state_->mu);
    if (state_->in_flight >= state_->max_in_flight) {
      state_->waiting.push_back(std::move(round));
      return;
    }
    ++state_->in_flight;
  }
  std::vector<State::Round> rounds;
  rounds.push_back(std::move(round));
  state_->Send(std::move(rounds));
}

}  // namespace lockd
