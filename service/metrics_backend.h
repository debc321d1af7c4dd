// A Backend decorator that records lockd's metrics (service/metrics.h)
// around every call of the backend it wraps, and tracks the holds granted
// through it to publish `lockd_locks_held` and hold durations.
//
// Hold tracking ("what this replica sees"), per holder: an exclusive hold
// under its lock, a shared or semaphore hold under its (lock, owner). A
// first grant starts a hold; a reentrant acquire or Renew moves its lease
// end; a Release that ends the caller's hold ends it as released, a
// ForceRelease (every holder, or the one with its token) as force_released;
// a hold whose lease end passed (checked by SweepExpired(), which the owner
// calls about once a second, and by the holder's Renew/Release answering
// LOCK_NOT_HELD) ends as expired. A hold renewed through another replica may
// thus be counted as expired here, and so may a shared hold upgraded to
// exclusive. The tracker is sharded by lock so that concurrent calls on
// different locks rarely meet on a mutex, and keyed by 64-bit hashes of the
// lock and the owner, so that a call copies no strings (two locks with the
// same hash would only merge their hold metrics).
//
// Thread-safe, as the wrapped backend is.

#ifndef LOCKD_SERVICE_METRICS_BACKEND_H_
#define LOCKD_SERVICE_METRICS_BACKEND_H_

#include <array>
#include <memory>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "backends/backend.h"
#include "service/metrics.h"

namespace lockd {

class MetricsBackend final : public Backend {
 public:
  // `metrics` must outlive this object.
  MetricsBackend(std::unique_ptr<Backend> inner, Metrics* metrics);
  ~MetricsBackend() override;

  absl::string_view name() const override { return inner_->name(); }
  void Acquire(AcquireParams params, std::shared_ptr<CancelSignal> cancel,
               Callback<AcquireResult> done) override;
  void Release(ReleaseParams params, Callback<ReleaseResult> done) override;
  void Renew(RenewParams params, Callback<RenewResult> done) override;
  void RenewMany(std::vector<RenewParams> params, RenewManyCallback done) override;
  void Describe(LockKey key, Callback<LockState> done) override;
  void List(ListParams params, Callback<ListResult> done) override;
  void ForceRelease(ForceReleaseParams params, Callback<ForceReleaseResult> done) override;
  absl::Status Health() const override { return inner_->Health(); }
  void Shutdown() override { inner_->Shutdown(); }

  // Ends, as expired, every tracked hold whose lease end is before `now`
  // (absl::Now() readings). Call periodically.
  void SweepExpired(absl::Time now);

  Backend* inner() const { return inner_.get(); }

 private:
  struct Hold {
    int ns = 0;
    uint64_t token = 0;
    size_t owner = 0;  // hash
    absl::Time since;
    absl::Time until;
  };
  struct Shard {
    absl::Mutex mu;
    absl::flat_hash_map<size_t, Hold> holds ABSL_GUARDED_BY(mu);  // by lock hash
  };
  static constexpr size_t kShards = 32;

  // What a Renew's metrics need from its request.
  struct RenewCall {
    absl::Time start;
    int ns = 0;
    size_t key = 0;
    size_t owner = 0;
  };
  RenewCall StartRenew(const RenewParams& params);
  void Renewed(const RenewCall& call, const absl::StatusOr<RenewResult>& r);

  Shard& ShardOf(size_t key) { return shards_[key % kShards]; }
  void Granted(size_t key, size_t owner, int ns, uint64_t token, absl::Duration ttl,
               absl::Time now);
  // Ends the hold tracked under `key` if `owner` holds it; false if not.
  bool EndedIfOwner(size_t key, size_t owner, HoldEnd how, absl::Time now);
  // The owner's hold of lock `key`, exclusive or not.
  void HolderEnded(size_t key, size_t owner, HoldEnd how, absl::Time now);
  void Extended(size_t key, size_t owner, absl::Duration ttl, absl::Time now);
  void Ended(size_t key, HoldEnd how, absl::Time now);

  const std::unique_ptr<Backend> inner_;
  Metrics* const metrics_;
  std::array<Shard, kShards> shards_;
};

}  // namespace lockd

#endif  // LOCKD_SERVICE_METRICS_BACKEND_H_
