// The contract every lock backend implements (memory, redis, mysql,
// zookeeper). The gRPC service validates input, then calls exactly one of
// these methods per RPC; all lock semantics of docs/api.md live behind this
// interface.
//
// Threading: every Backend is thread-safe; any method may be called from any
// thread concurrently. No method blocks for long: each either completes inline
// or hands the work to the backend's own threads / event loop, and reports the
// result through `done`.
//
// Callbacks: `done` is called exactly once, on any thread (possibly inline,
// before the method returns). The caller must not hold a mutex that `done`
// needs. A backend never calls `done` while holding one of its own mutexes
// that a call into the Backend would take (so `done` may call back into it).
//
// Status codes passed to `done`:
//   OK                   the result is valid.
//   kFailedPrecondition  Release/Renew by an owner that does not hold the lock
//                        (never held, lease expired, another owner). Always
//                        built with LockNotHeldError() so the service can
//                        attach ErrorInfo{reason: LOCK_NOT_HELD}. Nothing
//                        changed.
//   kUnavailable         the backend server is unreachable, timed out, or the
//                        backend is shutting down. The operation had no effect
//                        or its effect is undone by lease expiry.
//   kResourceExhausted   too many parked waiters (Options::max_waiters).
//   kCancelled           only from Acquire: the caller's CancelSignal fired
//                        before a result; nothing is held by this call.
//   kUnauthenticated     the backend server refused lockd's credentials.
//   kInternal            a bug or an unexpected reply; no secrets in messages.
// Input has been validated by the caller; backends need not re-check it
// (REQUIRES clauses below) and never return kInvalidArgument.
//
// Kinds (see docs/api.md "Shared locks, semaphores and all-or-nothing acquires"):
// a name is a *lock*, held EXCLUSIVE by one owner or SHARED by
// any number of owners, or a *semaphore* of `limit` permits, held by owners
// whose permits add up to at most `limit`. Its holders decide its kind; a
// name without holders takes the kind of its next grant. Every backend
// implements all of it natively, with these rules:
//   - Each holder is on its own: its own hold count, lease (backend clock),
//     fencing token and permits. Release, Renew and RenewMany act on the
//     caller's hold only; ReleaseResult::released is true when the caller's
//     count reached zero, whatever other holders remain. A holder whose
//     lease ends loses only its own hold.
//   - Fencing: every first grant to an owner, in any mode, takes a token
//     strictly greater than every token granted before on that name (one
//     counter per name, as for exclusive locks).
//   - Kind mismatch: while a name has holders, an acquire of another kind (a
//     semaphore acquire of a held lock, a lock acquire of a held semaphore,
//     a semaphore acquire with another limit) fails at once, whatever its
//     wait, with LockKindMismatchError; nothing changes. SHARED and
//     EXCLUSIVE are one kind.
//   - Queueing is FIFO across modes, across every replica sharing the
//     backend server: an acquire that cannot be granted at once, or that
//     finds anyone waiting ahead of it, waits behind them (a SHARED acquire
//     behind a waiting EXCLUSIVE one: writers never starve). SHARED acquires
//     at the head are granted together. A semaphore acquire is granted when
//     its permits fit beside those held and nothing waits ahead of it (no
//     barging). A backend whose waiters may sit on several replicas keeps
//     the queue on its server, each entry with a lifetime its replica
//     extends while the call waits, so a dead replica's entries drop out.
//   - Reentrancy: an acquire in the mode the owner holds is reentrant (count
//     + 1, same token, lease reset; a semaphore acquire must ask the permits
//     held, else PermitsMismatchError). An EXCLUSIVE holder asking SHARED
//     gets a reentrant exclusive hold. A SHARED holder asking EXCLUSIVE (an
//     upgrade) is granted at once when it is the only holder and nobody
//     waits: its hold becomes exclusive with count + 1 and a new, larger
//     token; otherwise UpgradeWouldBlockError and nothing changes.
//   - ForceRelease frees every holder, or with a fencing_token only the
//     holder with that token.
// AcquireAll (several locks at once) is built by the service on Acquire and
// Release; backends know nothing of it.

// Sessions: a backend has no notion of a client session. The service's
// Session stream is built on this interface alone: its acquires are
// Acquire calls, it takes holds over with Describe and Renew, renews them
// with RenewMany and, when the stream ends, releases them with Release (or
// leaves them to their leases). The only sessions below this interface are
// a backend's own connections to its server (ZooKeeper's), which no hold
// depends on.

#ifndef LOCKD_BACKENDS_BACKEND_H_
#define LOCKD_BACKENDS_BACKEND_H_

#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/functional/any_invocable.h"
#include "absl/hash/hash.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"

namespace lockd {

// Identifies one lock. REQUIRES (checked by the service): `ns` is 1-64 bytes
// of [A-Za-z0-9._-]; `name` is 1-512 bytes of valid UTF-8 without control
// characters. Backends must round-trip any such name exactly.
struct LockKey {
  std::string ns;
  std::string name;

  friend bool operator==(const LockKey& a, const LockKey& b) {
    return a.ns == b.ns && a.name == b.name;
  }
  friend bool operator<(const LockKey& a, const LockKey& b) {
    return a.ns != b.ns ? a.ns < b.ns : a.name < b.name;
  }
  template <typename H>
  friend H AbslHashValue(H h, const LockKey& k) {
    return H::combine(std::move(h), k.ns, k.name);
  }
};

enum class LockMode { kExclusive = 0, kShared = 1 };

// One owner's hold of a name.
struct HolderState {
  std::string owner;
  LockMode mode = LockMode::kExclusive;  // kExclusive for a semaphore holder
  uint32_t hold_count = 0;
  uint32_t permits = 0;  // semaphore permits held; 0 for a lock
  uint64_t fencing_token = 0;
  absl::Duration ttl_remaining = absl::ZeroDuration();
};

// A name's state as seen by the backend. For a free name only `key`, `held`
// (false) and `waiters` are meaningful.
struct LockState {
  LockKey key;
  bool held = false;  // !holders.empty()
  // The single-holder fields: the holder of an exclusive lock; for a shared
  // lock or a semaphore, the newest holder (largest token).
  std::string owner;
  uint32_t hold_count = 0;
  uint64_t fencing_token = 0;
  absl::Duration ttl_remaining = absl::ZeroDuration();
  // Acquires parked on this name that the backend can see: this process's
  // waiters, or every replica's where the backend keeps waiters centrally.
  uint32_t waiters = 0;
  LockMode mode = LockMode::kExclusive;  // kShared while held shared
  uint32_t limit = 0;                    // non-zero: held as a semaphore
  std::vector<HolderState> holders;      // by fencing token, oldest first
};

// Fills the single-holder fields of `s` from `s.holders` (which must be in
// token order) and sets `held`, `mode` is left as is. For backends that
// build the holder list first.
void FillNewestHolder(LockState& s);

struct AcquireParams {
  LockKey key;
  std::string owner;   // REQUIRES: 1-256 bytes (the service fills a default).
  absl::Duration ttl;  // REQUIRES: within the configured lease bounds.
  // How long to wait for a held lock, measured from the call. Zero: try once.
  absl::Duration wait = absl::ZeroDuration();
  std::string request_id;  // Empty, or at most 128 bytes.
  // The kind asked for (validated by the service): a lock when limit is 0
  // (mode kExclusive or kShared, permits 0); a semaphore of `limit`
  // permits (1-10,000) otherwise (mode kExclusive, permits 1..limit).
  LockMode mode = LockMode::kExclusive;
  uint32_t limit = 0;
  uint32_t permits = 0;
};

struct AcquireResult {
  bool acquired = false;
  // When acquired: the token of this holding (new on hold count 0 -> 1,
  // unchanged on a reentrant acquire), the owner's hold count after this
  // acquire, and the lease now in force.
  uint64_t fencing_token = 0;
  uint32_t hold_count = 0;
  absl::Duration ttl = absl::ZeroDuration();
  // When acquired: a moment by this process's clock (absl::Now()) no later
  // than the one at which the backend started the lease above (a lower
  // bound: e.g. when the request that granted it was sent), however long
  // the call waited before. InfinitePast: unknown; the caller then takes
  // the time it made the call. A replay (the owner's last request_id again)
  // starts no lease: its lease_start is, where the backend cannot tell it
  // from a grant, the replay's own.
  absl::Time lease_start = absl::InfinitePast();
  // When !acquired: the lock's state (its holder) when the wait ended.
  LockState current;
};

struct ReleaseParams {
  LockKey key;
  std::string owner;
  std::string request_id;  // Empty, or at most 128 bytes.
  // Non-empty (at most 128 bytes; then request_id is empty): undo the
  // Acquire with this request_id instead of releasing a hold. If the owner's
  // last request on the lock is that Acquire and it added a hold, gives that
  // hold back (freeing the lock on zero and waking the next waiter; the next
  // grant gets a larger token). Otherwise changes nothing and answers OK
  // with the owner's current hold count (0 if it holds nothing), never
  // kFailedPrecondition. An undo that gave a hold back becomes the owner's
  // last request, so a repeat of it changes nothing more.
  std::string acquire_request_id;
  // Non-zero: act only on the owner's hold with this fencing token. A hold
  // with another token (a later grant: the owner released and acquired
  // again since this request was sent) or no hold at all answers
  // kFailedPrecondition (LockNotHeldError) and changes nothing; a repeat of
  // the owner's last request_id still returns its first result. With
  // acquire_request_id: the undo gives the hold back only if it has this
  // token, otherwise it changes nothing and answers OK as above. Zero: any
  // hold of the owner (the request predates tokens on releases).
  uint64_t fencing_token = 0;
};

struct ReleaseResult {
  bool released = false;    // hold count reached zero; the lock is free
  uint32_t hold_count = 0;  // remaining holds of the owner
};

struct RenewParams {
  LockKey key;
  std::string owner;
  absl::Duration ttl;  // REQUIRES: within the configured lease bounds.
  // Non-zero: renew only the owner's hold with this fencing token; another
  // token, or no hold, is kFailedPrecondition (LockNotHeldError) and changes
  // nothing. Zero: any hold of the owner.
  uint64_t fencing_token = 0;
};

struct RenewResult {
  absl::Duration ttl;
  uint64_t fencing_token = 0;
};

struct ListParams {
  std::string ns;
  std::string prefix;      // may be empty
  uint32_t page_size = 0;  // REQUIRES: 1..1000
  // Opaque to callers; a backend returns it in ListResult::next_page_token.
  // Backends use the last name of the previous page ("list names > token").
  std::string page_token;
};

struct ListResult {
  std::vector<LockState> locks;  // held locks, ordered by name (bytewise)
  std::string next_page_token;   // empty on the last page
};

struct ForceReleaseParams {
  LockKey key;
  // Non-zero: free the lock only if its holder's fencing token equals this.
  uint64_t fencing_token = 0;
};

struct ForceReleaseResult {
  bool released = false;  // a hold was freed (false: the lock was already free)
  LockState previous;     // the lock's state just before (held=false if free)
};

template <typename T>
using Callback = absl::AnyInvocable<void(absl::StatusOr<T>) &&>;

// One result per renewed hold, in the order of the request.
using RenewManyCallback = absl::AnyInvocable<void(std::vector<absl::StatusOr<RenewResult>>) &&>;

// A one-shot, thread-safe cancellation signal. The caller of
// Backend::Acquire owns it (through a shared_ptr) and fires Cancel() when the
// RPC is cancelled or its deadline passes; the backend registers what to do
// about it.
class CancelSignal {
 public:
  CancelSignal() = default;
  CancelSignal(const CancelSignal&) = delete;
  CancelSignal& operator=(const CancelSignal&) = delete;

  // Fires the signal: runs the registered callback (once, on this thread,
  // with no internal lock held). Idempotent.
  void Cancel();

  bool cancelled() const;

  // Registers `fn` to run when Cancel() is called, replacing any earlier
  // callback, and returns true. If the signal has already fired, returns
  // false and never runs `fn`: the caller, which may hold its own locks
  // here, treats the call as cancelled itself. `fn` may run concurrently
  // with, or after, ClearCallback() returns, so it must look its waiter up
  // rather than hold a pointer to it.
  bool SetCallback(absl::AnyInvocable<void() &&> fn);

  // Drops the registered callback, if it has not run yet.
  void ClearCallback();

 private:
  mutable absl::Mutex mu_;
  bool cancelled_ ABSL_GUARDED_BY(mu_) = false;
  absl::AnyInvocable<void() &&> fn_ ABSL_GUARDED_BY(mu_);
};

class Backend {
 public:
  virtual ~Backend() = default;

  // "memory", "redis", "mysql" or "zookeeper" (LockInfo.backend).
  virtual absl::string_view name() const = 0;

  // Takes the lock for params.owner. If it is free (or expired), grants it
  // with a new fencing token; if params.owner holds it, increments the hold
  // count, resets the lease and keeps the token. Otherwise, when params.wait
  // is positive, parks the call (no thread is held) until the lock can be
  // granted, the wait ends (then OK with acquired=false and `current`), or
  // `cancel` fires (then kCancelled, and nothing is held by this call).
  // Waiters on one process are granted in arrival order.
  //
  // If params.request_id equals the owner's last request id on this lock,
  // returns the result of that request again and changes nothing.
  //
  // A parked call whose owner comes to hold the lock (through another call,
  // on this process or another replica) is granted at once as a reentrant
  // acquire; it never waits on its own owner.
  //
  // `cancel` may be null (the call cannot be cancelled).
  virtual void Acquire(AcquireParams params, std::shared_ptr<CancelSignal> cancel,
                       Callback<AcquireResult> done) = 0;

  // Gives up one hold of params.owner. On zero, frees the lock and wakes the
  // next waiter. kFailedPrecondition (LockNotHeldError) if owner does not hold
  // the lock. A repeat of the owner's last request_id returns the first result
  // and changes nothing, also after the lock went to another owner (a repeat
  // of the release that freed it answers released=true for as long as the
  // backend remembers it). With params.acquire_request_id: undoes that
  // Acquire instead (see ReleaseParams).
  virtual void Release(ReleaseParams params, Callback<ReleaseResult> done) = 0;

  // Resets the lease of a lock held by params.owner to params.ttl from now.
  // kFailedPrecondition (LockNotHeldError) if owner does not hold it.
  virtual void Renew(RenewParams params, Callback<RenewResult> done) = 0;

  // Renews several holds, each exactly as Renew would, in as few round trips
  // to the backend server as the backend allows (the service's Session
  // stream renews all its holds this way). `done` is called once, with one result per element of
  // `params`, in the same order. The default calls Renew for each.
  virtual void RenewMany(std::vector<RenewParams> params, RenewManyCallback done);

  // The state of one lock; a free lock is OK with held=false.
  virtual void Describe(LockKey key, Callback<LockState> done) = 0;

  // Held locks of a namespace whose names start with params.prefix.
  virtual void List(ListParams params, Callback<ListResult> done) = 0;

  // Frees the lock whatever its owner and hold count (an operator's action,
  // authorized by the service). If params.fencing_token is non-zero and the
  // holder's token differs, kFailedPrecondition (FencingTokenMismatchError)
  // and nothing changes. A free lock is OK with released=false. Afterwards
  // the lock is free exactly as after a Release that reached zero: the next
  // grant gets a larger token, the first waiter is granted at once, and the
  // former holder's Release/Renew answer LockNotHeldError. The owner's
  // remembered request ids are forgotten.
  virtual void ForceRelease(ForceReleaseParams params, Callback<ForceReleaseResult> done);

  // OK while the backend server is reachable; kUnavailable (with the reason)
  // while it is not. Cheap and non-blocking: reports the last known state.
  virtual absl::Status Health() const = 0;

  // Finishes every parked Acquire with kUnavailable and answers every later
  // call with kUnavailable. Blocks until no callback of this backend is
  // running. Idempotent; the destructor calls it.
  virtual void Shutdown() = 0;
};

// The kFailedPrecondition status for "owner does not hold this lock". The
// service recognises it (IsLockNotHeld) and attaches
// google.rpc.ErrorInfo{reason: "LOCK_NOT_HELD", domain: "lockd"}.
absl::Status LockNotHeldError(const LockKey& key, absl::string_view detail);
bool IsLockNotHeld(const absl::Status& status);

// The ErrorInfo reason for LockNotHeldError.
inline constexpr absl::string_view kLockNotHeldReason = "LOCK_NOT_HELD";

// The kFailedPrecondition status for a ForceRelease whose fencing_token is
// not the holder's. The service attaches google.rpc.ErrorInfo{reason:
// FENCING_TOKEN_MISMATCH, domain: lockd}.
absl::Status FencingTokenMismatchError(const LockKey& key, uint64_t expected, uint64_t actual);
bool IsFencingTokenMismatch(const absl::Status& status);
inline constexpr absl::string_view kFencingTokenMismatchReason = "FENCING_TOKEN_MISMATCH";

// kFailedPrecondition, reason LOCK_KIND_MISMATCH: an acquire of another kind
// than the name's holders (see "Kinds" above). `held_limit` is the holders'
// limit: 0 when the name is held as a lock.
absl::Status LockKindMismatchError(const LockKey& key, uint32_t held_limit);
inline constexpr absl::string_view kLockKindMismatchReason = "LOCK_KIND_MISMATCH";
// kFailedPrecondition, reason UPGRADE_WOULD_BLOCK: a SHARED holder asked
// EXCLUSIVE while another owner holds or waits.
absl::Status UpgradeWouldBlockError(const LockKey& key);
inline constexpr absl::string_view kUpgradeWouldBlockReason = "UPGRADE_WOULD_BLOCK";
// kFailedPrecondition, reason PERMITS_MISMATCH: a semaphore holder asked
// again with other permits than it holds.
absl::Status PermitsMismatchError(const LockKey& key, uint32_t held, uint32_t asked);
inline constexpr absl::string_view kPermitsMismatchReason = "PERMITS_MISMATCH";

// The reason attached by one of the error constructors above ("" if none),
// and its ErrorInfo metadata (for LOCK_KIND_MISMATCH: `kind` = lock or
// semaphore and, for a semaphore, `limit`), as (key, value) pairs.
std::string ErrorReasonOf(const absl::Status& status);
std::vector<std::pair<std::string, std::string>> ErrorMetadataOf(const absl::Status& status);

// The error for calls made after Shutdown().
absl::Status ShuttingDownError();

}  // namespace lockd

#endif  // LOCKD_BACKENDS_BACKEND_H_
