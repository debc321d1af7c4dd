// Who holds a name and whom a waiter watches, from a listing of its
// contender queue alone (each node's kind is in its name, zk_codec.h).
// These are the queueing rules of
// docs/api.md "Shared locks, semaphores and all-or-nothing acquires"
// applied to ZooKeeper's sequential nodes:
//
//   - The holders are a prefix of the queue (sequence order): the head, and
//     behind it, while the head is a shared lock, every shared contender up
//     to the first exclusive one; while it is a semaphore, every contender
//     of that same limit whose permits, added to those ahead, fit in the
//     limit. Nodes only ever leave the queue, so a contender once admitted
//     stays admitted: FIFO across modes, no barging, writers never starve.
//   - A contender of another kind than the head (a semaphore behind a lock,
//     a lock behind a semaphore, another limit) is never admitted behind
//     it; its acquire answers LOCK_KIND_MISMATCH at once.
//   - A waiter watches one node, never the head by default (no herd): an
//     EXCLUSIVE contender its immediate predecessor; a SHARED one the
//     nearest EXCLUSIVE contender before it (only that one's exit can admit
//     it); a semaphore contender its predecessor while that one waits too
//     (it cannot be admitted before it). The first waiters of a semaphore
//     are the exception: those whose permits, with those of the waiters
//     ahead of them, fit in the limit (at most kSemaphoreWindow of them)
//     watch every holder, since any holder's exit frees permits towards
//     them, and their predecessor (which may give up); they are admitted in parallel rather than
//     one after the other's grant (each admission takes a read and a quorum write). An exit wakes
//     at most that window, never the whole queue.
//
// Pure functions; thread-safe.

#ifndef LOCKD_BACKENDS_ZOOKEEPER_QUEUE_RULES_H_
#define LOCKD_BACKENDS_ZOOKEEPER_QUEUE_RULES_H_

#include <cstddef>
#include <vector>

#include "backends/zookeeper/zk_codec.h"

namespace lockd::zk {

// The most semaphore waiters that watch the holders (see above).
inline constexpr size_t kSemaphoreWindow = 16;

// How many contenders at the head of `queue` hold the name.
size_t AdmittedCount(const std::vector<Contender>& queue);

// The indexes in `queue` of the nodes the waiting contender at `idx` watches
// (REQUIRES: AdmittedCount(queue) <= idx < queue.size()). One node, except
// for the first waiters of a semaphore (every holder).
std::vector<size_t> WatchTargets(const std::vector<Contender>& queue, size_t idx);

// What an acquire of kind `asked` by an owner already holding the name with
// a node of kind `held` is: reentrancy across modes, of
// docs/api.md "Shared locks, semaphores and all-or-nothing acquires".
enum class Reentry {
  kReenter,          // hold count + 1 on the held node, same token
  kUpgrade,          // SHARED held, EXCLUSIVE asked: only if alone
  kKindMismatch,     // a lock and a semaphore, or two limits
  kPermitsMismatch,  // a semaphore asked with other permits
};
Reentry ReentryFor(const ContenderKind& held, const ContenderKind& asked);

}  // namespace lockd::zk

#endif  // LOCKD_BACKENDS_ZOOKEEPER_QUEUE_RULES_H_
