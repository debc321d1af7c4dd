// What this replica knows about the holders of each lock, and the reaping of
// leases that ran out. A lock held exclusive has one holder node; a shared
// lock or a semaphore one per holder (the admitted prefix of its queue,
// queue_rules.h), each with its own lease, tracked and reaped on its own.
//
// Leases are measured by this replica's monotonic clock from when it wrote a
// lease (precise) or first saw it (not precise: options.observer_grace is
// added), never by a wall clock, so clock skew between replicas does not
// matter. A lease ends when its holder node is deleted ("reaped") with a
// versioned delete, so a renewal that wins the race keeps it.
//
// A lowest node still marked waiting (NodeData::waiting) is a grant its
// replica has not confirmed: its "lease" is observer_grace from when this
// replica first saw it, so a grant to a call that ended (its replica died,
// or is cut off) is reaped within that time rather than held for the lease
// it asked for or until its replica's session expires.
//
// Who reaps:
//   - a timer at the lease end, kept for leases this replica wrote and for
//     holders of locks it has local waiters on (Arm);
//   - every options.reap_interval, a scan of every lock of the root
//     (StartReaper), which also forgets holders no longer seen;
//   - any read that finds a lease that ran out (StateOf, ReadLock users).
//
// Also kept per lock: the "floor", the highest contender sequence this
// replica has seen as the lowest node, so that a waiter whose predecessor at or
// below the floor was deleted knows it is lowest without listing.
//
// Thread-safe: all state is guarded by mu_. Lock order: an AcquireAttempt's
// mutex, then mu_, then WaiterRegistry's mutex (has_local_waiters). No callback
// runs with mu_ held.

#ifndef LOCKD_BACKENDS_ZOOKEEPER_LEASE_TRACKER_H_
#define LOCKD_BACKENDS_ZOOKEEPER_LEASE_TRACKER_H_

#include <cstdint>
#include <deque>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/functional/any_invocable.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "backends/backend.h"
#include "backends/common/timer_queue.h"
#include "backends/zookeeper/contender_listing.h"
#include "backends/zookeeper/node_deleter.h"
#include "backends/zookeeper/zk_codec.h"
#include "backends/zookeeper/zk_common.h"
#include "backends/zookeeper/zk_transport.h"

namespace lockd::zk {

// One holder node as read.
struct HolderView {
  std::string path;
  struct Stat stat = {};
  NodeData data;
  ContenderKind kind;
};

// One read of a lock: its contender queue and its holders' data.
struct LockView {
  bool lock_exists = false;
  struct Stat lock_stat = {};
  std::string lock_data;  // only when asked for (the tombstone)
  size_t contenders = 0;
  std::vector<HolderView> holders;  // in queue order (the head first)

  // The holder node of `owner`, or null.
  const HolderView* Of(absl::string_view owner) const {
    for (const HolderView& h : holders) {
      if (h.data.owner == owner) return &h;
    }
    return nullptr;
  }
};

class LeaseTracker {
 public:
  struct Options {
    absl::Duration observer_grace = absl::Seconds(1);
    absl::Duration reap_interval = absl::Seconds(1);
    int reap_parallelism = 32;
  };
  // The holder of a lock as last seen, with its lease judged now: `expired`
  // compares the lease end with the monotonic clock at Lookup(), whether or
  // not the lease timer or the reaper has run yet.
  struct Known {
    std::string path;
    int64_t czxid = 0;
    int32_t version = 0;
    NodeData data;
    bool expired = false;
    ContenderKind kind;  // from the node's name
  };
  // The result of Observe(): the holder's data version as recorded, whether
  // its lease has run out, and the lock's state from it.
  struct Sighting {
    int32_t version = 0;
    bool expired = false;
    LockState state;
  };

  // Every pointer must outlive this object. `has_local_waiters(key)` says
  // whether this replica has parked Acquire calls on `key`; `serving()`
  // whether the session serves (the reaper scans only then).
  LeaseTracker(Options options, const Paths* paths, Transport* zk, ContenderListing* listing,
               NodeDeleter* deleter, TimerQueue* timers,
               absl::AnyInvocable<bool(const LockKey&) const> has_local_waiters,
               absl::AnyInvocable<bool() const> serving);
  LeaseTracker(const LeaseTracker&) = delete;
  LeaseTracker& operator=(const LeaseTracker&) = delete;

  // The holder node of `owner` on `key` as last seen, or nullopt.
  std::optional<Known> Lookup(const LockKey& key, absl::string_view owner) const;
  // The holder node `path` of `key` as last seen, or nullopt.
  std::optional<Known> LookupPath(const LockKey& key, absl::string_view path) const;

  // Records a sighting of the holder node `path` of `key` (REQUIRES: it is
  // admitted, queue_rules.h; an exclusive holder replaces every other one
  // known) with `data` at
  // `stat` (or this replica's own write of it, when `new_lease`: the lease
  // is then timed from now without grace). Stale reads (an older data
  // version) change nothing. When `arm`, keeps a timer at the lease end (see
  // Arm). `waiters` is only copied into the returned state. No-op after
  // Stop() (returns a sighting of an expired lease).
  Sighting Observe(const LockKey& key, const std::string& path, const struct Stat& stat,
                   const NodeData& data, bool new_lease, bool arm = false, uint32_t waiters = 0);

  // Records this replica's own successful write of a new lease epoch of the
  // holder `path` of `key` (now at `stat` with `data`), sent at `sent`. The
  // lease is timed from `sent`, not from the reply: the write may have been
  // applied any time after it was sent, and the caller's lease (a Session's,
  // say) started no later. Keeps a timer at the lease end (see Arm). Returns
  // true if that lease has already ended (a reply slower than the lease; the
  // timer then reaps it at once). No-op after Stop() (returns true).
  bool ObserveRenewal(const LockKey& key, const std::string& path, const struct Stat& stat,
                      const NodeData& data, Clock::time_point sent);

  // Keeps a timer at the lease end of the holder `path` of `key`, if this
  // replica wrote the lease or has local waiters on the lock. The timer reaps
  // the lease when it runs out.
  void Arm(const LockKey& key, const std::string& path);

  // Forgets the holder `path` of `key` (deleted).
  void Forget(const LockKey& key, const std::string& path);

  // The data version of the holder `path` of `key` if its lease has run
  // out, else nullopt.
  std::optional<int32_t> ExpiredVersion(const LockKey& key, const std::string& path) const;

  // Records that the contender with sequence `seq` was the lowest of the
  // lock node incarnation `lock_czxid` (a lock node that ZooKeeper deleted
  // when empty and that was created again restarts its sequence at 0).
  void NoteFloor(const LockKey& key, int64_t lock_czxid, int32_t seq);
  // True if every contender of incarnation `lock_czxid` up to `seq` has been
  // seen holding the lock or below one that did (so it is gone for good).
  bool FloorCovers(const LockKey& key, int64_t lock_czxid, int32_t seq) const;

  // Deletes the holder node `path` of `key` if its data is still `version`
  // (a renewal in between is re-read, and reaped if its lease ran out too).
  // Then runs `then` (if any). Never blocks.
  void Reap(const LockKey& key, const std::string& path, int32_t version, int tries,
            absl::AnyInvocable<void() &&> then);

  // Reads the contender queue of `key` and its holders' data (and, when
  // `with_lock_data`, the lock node's data), records the holder sightings
  // (forgetting holders of `key` no longer there),
  // and runs `cb` with the view: a lock that does not exist is an OK empty
  // view; ZooKeeper errors go through ZkError. Re-reads when the holder
  // vanishes between the two reads. The view reflects every write
  // acknowledged to any replica before the call (Freshness::kLatest), so a
  // lock acquired or released through one replica is seen so through any
  // other, whichever ensemble server each talks to. Never blocks.
  void ReadLock(const LockKey& key, bool with_lock_data,
                absl::AnyInvocable<void(absl::StatusOr<LockView>) &&> cb, int tries = 0);

  // The LockState for `view` (holders whose lease ran out left out); starts
  // reaping those.
  LockState StateOf(const LockKey& key, const LockView& view);

  // Starts the periodic reaper (every options.reap_interval).
  void StartReaper();

  // Stops timers; later calls record nothing. The TimerQueue may go after.
  void Stop();

 private:
  struct Holder {
    std::string path;
    int64_t czxid = 0;
    int32_t version = 0;
    NodeData data;
    // The lease is timed from `since`: when this replica wrote lease epoch
    // `lease` itself (precise) or first saw it (not precise: grace added).
    uint64_t lease = 0;
    Clock::time_point since;
    bool precise = false;
    Clock::time_point touched;  // last read or write, for pruning
    uint64_t scan = 0;          // last reaper scan that saw it
    TimerQueue::TimerId timer = 0;
    Clock::time_point timer_at;
  };
  struct Floor {
    int64_t lock_czxid;
    int32_t seq;
  };
  struct Scan {
    uint64_t number = 0;
    Clock::time_point start;
    std::deque<std::pair<LockKey, std::string>> locks;  // key, lock node path
    int listing = 0;
    int reading = 0;
    bool complete = true;
  };

  Clock::time_point LeaseEnd(const Holder& h) const;
  bool Expired(const Holder& h, Clock::time_point now) const { return now >= LeaseEnd(h); }
  // A new lease epoch of this replica's own (`new_lease`) is timed from
  // `start` (<= now); any other sighting from `now`.
  Holder* FindLocked(const LockKey& key, absl::string_view path) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void EraseLocked(const LockKey& key, absl::string_view path) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  Known KnownLocked(const Holder& h, Clock::time_point now) const
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  Holder& ObserveLocked(const LockKey& key, const std::string& path, const struct Stat& stat,
                        const NodeData& data, bool new_lease, Clock::time_point now,
                        Clock::time_point start) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void ArmLocked(const LockKey& key, Holder& h) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // The state made of `holders` (those whose lease has not run out).
  LockState StateLocked(const LockKey& key, const std::vector<const Holder*>& holders,
                        uint32_t waiters, Clock::time_point now) const
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void OnLockRead(const LockKey& key, bool with_lock_data, const Listing& children, Result data,
                  absl::AnyInvocable<void(absl::StatusOr<LockView>) &&> cb, int tries);
  void OnHoldersRead(const LockKey& key, bool with_lock_data, int tries, LockView v,
                     std::vector<Result> results,
                     absl::AnyInvocable<void(absl::StatusOr<LockView>) &&> cb);
  // Keeps only the holders of `key` at `paths` (a fresh read's).
  void RetainLocked(const LockKey& key, const std::vector<HolderView>& paths)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void Refresh(const LockKey& key, const std::string& path, int tries,
               absl::AnyInvocable<void() &&> then);
  // The lease timer of `key`'s holder at `path` ran: re-arms it if the
  // lease was renewed meanwhile, else reaps the holder.
  void CheckLease(const LockKey& key, const std::string& path);

  // The periodic reaper (lease_reaper.cc).
  void ScheduleReapTick() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // The reaper's interval passed: starts a scan unless one runs (or the
  // session is not serving), and schedules the next.
  void StartReapScan();
  void ListNamespace(const std::string& ns_enc);
  void PumpScan();
  void ScanLock(const LockKey& key, const std::string& lock_path);
  void ScanLockDone(bool ok);
  void EndScan();

  // Constant after construction.
  const Options options_;
  const Paths* const paths_;
  Transport* const zk_;
  ContenderListing* const listing_;
  NodeDeleter* const deleter_;
  TimerQueue* const timers_;  // used only with mu_ held and !stopped_
  const absl::AnyInvocable<bool(const LockKey&) const> has_local_waiters_;
  const absl::AnyInvocable<bool() const> serving_;

  mutable absl::Mutex mu_;
  bool stopped_ ABSL_GUARDED_BY(mu_) = false;
  // One entry per holder node (one for an exclusive lock).
  absl::flat_hash_map<LockKey, std::vector<Holder>> holders_ ABSL_GUARDED_BY(mu_);
  absl::flat_hash_map<LockKey, Floor> floors_ ABSL_GUARDED_BY(mu_);
  std::unique_ptr<Scan> scan_ ABSL_GUARDED_BY(mu_);
  uint64_t scans_ ABSL_GUARDED_BY(mu_) = 0;
};

}  // namespace lockd::zk

#endif  // LOCKD_BACKENDS_ZOOKEEPER_LEASE_TRACKER_H_
