// One Acquire call that needs a contender node: the lock recipe of the
// ZooKeeper backend (etcd's concurrency/mutex.go plays the same part).
//
// The recipe: create a persistent sequential contender node named
// "c-<attempt id>-<kind><seq>" under the lock node (the kind asked for, an
// exclusive or shared lock or k permits of a semaphore, is in the name:
// zk_codec.h), list the queue, and
//   - the head is of another kind (a lock, a semaphore, another limit):
//     delete the node, answer LOCK_KIND_MISMATCH;
//   - admitted (queue_rules.h: the head, readers behind a reader head,
//     permits that fit behind a semaphore head): granted (the node is the
//     holding; its czxid the token);
//   - not admitted, try-once (wait == 0): delete the node, answer the
//     holders;
//   - not admitted, waiting: be admitted under the max_waiters rule
//     (backends/common/waiter_registry.h) and watch the node(s) that
//     queue_rules.h WatchTargets names (no herd); when one goes, list
//     again, or, for an exclusive contender whose predecessor was the
//     lowest (or everything below it is known gone: LeaseTracker floors),
//     be granted without listing.
// This owner already holding the name (through any replica, by the owner
// tag in node names, zk_codec.h, confirmed by the node's data) follows
// the reentrancy rules (queue_rules.h ReentryFor): a reentrant acquire
// rewrites the holding node's data with a version check and deletes the
// attempt's own node; an upgrade (SHARED held, EXCLUSIVE asked), when the
// owner's shared node is the only one ahead of the attempt's, deletes the
// shared node and confirms the attempt's (exclusive, hold count + 1, a new
// larger token) in one multi, else UPGRADE_WOULD_BLOCK; a kind or permits
// mismatch is answered at once. An exclusive waiter that sees a node of its
// own owner waiting ahead of it watches the holder instead of its
// predecessor, so that it is granted at once when that node comes to hold
// the lock.
//
// Confirmed grants: a waiter marks its node waiting (NodeData::waiting)
// when it parks, and when the node becomes lowest clears the mark with a
// versioned write before it answers the grant. Until then the node holds
// nothing for sure: a replica that finds it lowest and still marked after
// observer_grace deletes it (LeaseTracker), so the node of a call that
// ended with its replica (killed, cut off) never holds the lock; the
// versions make exactly one of the confirm and that delete win.
//
// A create whose reply was lost to a connection loss is found again by the
// attempt id in its name (never created twice); if the session is not back
// its prefix is left to NodeDeleter as an orphan.
//
// States (one enum; every transition happens under mu_):
//
//   kRunning ──watch fires──▶ kRecheck ──watch set──▶ kRunning (list again)
//   kRunning ──watch set, nothing meanwhile──▶ kWaiting
//   kWaiting ──watch fires──▶ kRunning
//   kRunning, kRecheck ──Stop()──▶ kStopCancel / kStopDeadline
//   kWaiting ──Stop()──▶ kStopCancel / kStopDeadline, then abandoned at once
//   kStop*   ──the operation in flight returns──▶ abandoned
//   any      ──answered (granted, refused, error, session end)──▶ kDone
//
// "Abandoned" means: the node is deleted, then a cancelled call answers
// kCancelled and one whose deadline passed answers not-acquired with the
// lock's state read after the delete. kDone is final: the callback has run
// (exactly once) and every later event is ignored.
//
// Thread-safe: the attempt's state is guarded by mu_. ZooKeeper callbacks
// run on the client's completion thread, timers on the TimerQueue thread.
// Lock order: mu_, then LeaseTracker's, NodeDeleter's, WaiterRegistry's
// mutexes. Never calls out (ZooKeeper, the caller's callback) with mu_ held.

#ifndef LOCKD_BACKENDS_ZOOKEEPER_ACQUIRE_ATTEMPT_H_
#define LOCKD_BACKENDS_ZOOKEEPER_ACQUIRE_ATTEMPT_H_

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"
#include "backends/backend.h"
#include "backends/common/waiter_registry.h"
#include "backends/zookeeper/contender_listing.h"
#include "backends/zookeeper/lease_tracker.h"
#include "backends/zookeeper/node_deleter.h"
#include "backends/zookeeper/queue_rules.h"
#include "backends/zookeeper/zk_common.h"
#include "backends/zookeeper/zk_transport.h"

namespace lockd::zk {

class AcquireAttempt final : public WaiterRegistry::Call,
                             public std::enable_shared_from_this<AcquireAttempt> {
 public:
  // What an attempt works with; everything must outlive every attempt (the
  // backend closes the client, which runs every pending callback, first).
  struct Deps {
    const Paths* paths = nullptr;
    Transport* zk = nullptr;
    ContenderListing* listing = nullptr;
    LeaseTracker* leases = nullptr;
    NodeDeleter* deleter = nullptr;
    WaiterRegistry* waiters = nullptr;
  };

  enum class State {
    kRunning,       // an operation of the attempt is in flight
    kRecheck,       // kRunning, and the watched predecessor changed meanwhile
    kStopCancel,    // kRunning, and the call was cancelled meanwhile
    kStopDeadline,  // kRunning, and the deadline passed meanwhile
    kWaiting,       // parked behind its predecessor's watch; nothing in flight
    kDone,          // answered
  };

  AcquireAttempt(const Deps* deps, AcquireParams params, std::shared_ptr<CancelSignal> cancel,
                 Callback<AcquireResult> done);
  AcquireAttempt(const AcquireAttempt&) = delete;
  AcquireAttempt& operator=(const AcquireAttempt&) = delete;

  // Starts the attempt. With `known`, this replica's sighting of the same
  // owner holding the lock, tries a reentrant acquire on it first (falling
  // back to the recipe if that sighting is stale). The callback runs exactly
  // once, on whatever thread settles it.
  void Start(const std::optional<LeaseTracker::Known>& known);

  // The predecessor watch of this attempt fired for `path` (`type` is
  // ZOO_DELETED_EVENT, ZOO_CHANGED_EVENT, ...). A watch set for an earlier
  // node of the attempt is ignored.
  void OnWatch(int type, absl::string_view path);

  // From the WaiterRegistry: the deadline passed (kDeadline) or the call was
  // cancelled (kCancelled): the attempt is abandoned; or the backend shuts
  // down (kShutdown): Fail(ShuttingDownError()).
  void Stop(WaiterRegistry::StopReason why) override;

  // Answers `status` at once (the session ended, or shutdown) and deletes
  // the attempt's node (after the next reconnect if there is no session;
  // a node whose create is unanswered is looked for by its attempt id).
  // No-op if already answered.
  void Fail(absl::Status status);

  const LockKey& key() const { return params_.key; }

 private:
  using Ptr = std::shared_ptr<AcquireAttempt>;
  struct WatchTarget {
    std::string name;  // child name of the watched node
    // More watched nodes (the first waiter of a semaphore watches every
    // holder); an event on any of them counts as one on `name`.
    std::vector<std::string> also;
    bool is_holder = false;
    // The holder is watched in place of a predecessor of this same owner:
    // its deletion says nothing about who is lowest now.
    bool skips = false;
    int32_t seq = 0;
    int32_t lowest_seq = 0;  // of the queue the watch was chosen from
  };

  // What the contender node is created with (and holds once lowest).
  static NodeData InitialData(const AcquireParams& p);
  void Begin();
  void CreateNode();
  void OnCreated(const Listing& children);
  void EnsureParentsThenCreate();
  void Recover();
  void AdoptFound(const std::string& path, ListingPtr listing);
  // What Evaluate() does next, decided under mu_.
  struct Decision {
    enum {
      kGone,
      kStop,
      kGranted,
      kConfirm,
      kTryOnce,
      kFull,
      kWait,
      kReenter,
      kMismatch,
      kCheckOwn
    } action = kGone;
    std::string holder_path, pred_path;
    std::string own_path;     // kCheckOwn: a holding node of this owner's tag
    uint32_t held_limit = 0;  // kMismatch: the holders' limit
    AcquireResult granted;
    size_t waiters = 0;
    bool read_holder = true;
    std::optional<int32_t> reap;
    std::optional<LeaseTracker::Known> known;
    absl::Status refused;  // kFull: the max_waiters rule's answer
  };
  void Evaluate(const Listing& listing);
  Decision DecideLocked(const Listing& listing) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // The attempt's node is lowest and holds the lock with `data` at `stat`
  // (its creation data, or the confirmed data). Times the lease from now.
  AcquireResult GrantLocked(const NodeData& data, const struct Stat& stat)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  AcquireResult GrantLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Whether a grant must first clear the node's waiting mark (Confirm).
  bool NeedsConfirmLocked() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return mark_sent_; }
  // The node is lowest and was marked waiting: clears the mark, then
  // answers the grant (or starts over if the node was reaped meanwhile).
  void Confirm(int tries);
  void ConfirmFromRead(int tries);
  void OnConfirmed(const NodeData& nd, int tries, Result r);
  void TryOnceRefused(const std::string& holder_path, size_t waiters);
  void OnHolderRead(const std::string& holder_path, size_t waiters, Result r);
  void Watch(const std::string& holder_path, const std::string& pred_path, bool read_holder);
  void OnWatchSet(const std::string& holder_path, Result pred, Result* holder_read);
  bool CheckHolderWhileWatching(const std::string& holder_path, const Result& holder);
  void OnPredecessorDeleted(int rc);
  void Reevaluate();
  // This owner holds the name through `path` (data `d` at `stat`): the
  // reentrancy rules (queue_rules.h ReentryFor). `from_cache`: a sighting
  // of this replica, which only a reentrant acquire may act on.
  void OnOwnHold(const std::string& path, const struct Stat& stat, const NodeData& d,
                 bool from_cache);
  void CheckOwn(const std::string& path);
  void Upgrade(const std::string& held_path, const struct Stat& stat, const NodeData& d);
  void Reenter(const std::string& path, const struct Stat& stat, const NodeData& d, int tries,
               bool from_cache);
  void OnReentered(const std::string& path, const NodeData& nd, int64_t czxid, int tries,
                   bool from_cache, Result r);
  void RereadForReentry(const std::string& path, int tries);
  void Restart();
  bool CountRetry();
  void Abandon();
  // The op deleting the attempt's node, or nullopt if it has none (or its
  // delete was already sent).
  std::optional<Op> DeleteOwnOp();
  void FailWithNode(absl::Status status);
  void Finish(absl::StatusOr<AcquireResult> result);
  // Moves to kDone and returns the callback (null if already kDone).
  Callback<AcquireResult> TakeDone();
  bool Stopping() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    return state_ == State::kStopCancel || state_ == State::kStopDeadline;
  }

  // Constant after construction (id_ after Begin()).
  const Deps* const deps_;
  const AcquireParams params_;
  const std::shared_ptr<CancelSignal> cancel_;
  const uint64_t owner_tag_;  // OwnerTag(params_.owner)
  const ContenderKind kind_;  // asked for, from params_

  mutable absl::Mutex mu_;
  State state_ ABSL_GUARDED_BY(mu_) = State::kRunning;
  Callback<AcquireResult> done_ ABSL_GUARDED_BY(mu_);
  uint64_t id_ ABSL_GUARDED_BY(mu_) = 0;  // WaiterRegistry id, also the watch id
  Clock::time_point deadline_ ABSL_GUARDED_BY(mu_);
  int retries_ ABSL_GUARDED_BY(mu_) = 0;
  std::string prefix_ ABSL_GUARDED_BY(mu_);  // "c-<attempt id>-" of the current node
  // The reply to creating the current node: ZCONNECTIONLOSS until it arrives
  // (a listing that finds no reply treats it as lost).
  int create_rc_ ABSL_GUARDED_BY(mu_) = ZCONNECTIONLOSS;
  // The own contender node once known; cleared once its delete is sent.
  std::string path_ ABSL_GUARDED_BY(mu_);
  int64_t czxid_ ABSL_GUARDED_BY(mu_) = 0;
  int32_t version_ ABSL_GUARDED_BY(mu_) = 0;
  int32_t seq_ ABSL_GUARDED_BY(mu_) = 0;
  // The own node's waiting mark: sent (once per node), and known applied
  // (version_ is then the marked version).
  bool mark_sent_ ABSL_GUARDED_BY(mu_) = false;
  bool marked_ ABSL_GUARDED_BY(mu_) = false;
  int64_t lock_czxid_ ABSL_GUARDED_BY(mu_) = 0;  // lock node incarnation of the queue
  WatchTarget watched_ ABSL_GUARDED_BY(mu_);
  // The node of this owner's tag ahead that CheckOwn found not to be a
  // live hold of this owner (not checked again), and whether the last
  // listing had the attempt's node right behind the owner's head node
  // (an upgrade is then possible).
  std::string own_checked_ ABSL_GUARDED_BY(mu_);
  bool upgrade_alone_ ABSL_GUARDED_BY(mu_) = false;
};

}  // namespace lockd::zk

#endif  // LOCKD_BACKENDS_ZOOKEEPER_ACQUIRE_ATTEMPT_H_
