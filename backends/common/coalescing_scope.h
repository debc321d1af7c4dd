// Round trips a backend starts on one thread, held back while a
// CoalescingScope is open on that thread and sent together when it closes.
// The session reactor opens one around the ops of each SessionBatch it reads
// (docs/api.md "Batches on a Session"), so that a batch of acquires and
// releases reaches the backend in one write instead of one write each.
//
// Rules:
//  1. A scope belongs to the thread that opened it. Current() is the
//     outermost scope open on the calling thread, or null; a scope opened
//     inside another is pass-through (the outer one sends).
//  2. A backend that holds work back registers one Pending per destination
//     (e.g. its command connections) under a key of its own (Find, Add),
//     and adds to it on later calls. Holding back is a backend's choice: a
//     backend that ignores scopes sends at once, as without one.
//  3. The scope closes by calling Send() on every Pending in the order they
//     were added, on the closing thread, with no lock of the scope's held.
//     Send() must finish each held-back operation (send it, or run its
//     callback with the error), never leave one unfinished.
//  4. Whoever opens a scope must not wait, while it is open, for anything a
//     held-back round trip produces: it would wait for ever. The session
//     reactor handles ops without waiting for backend replies.
//
// Not thread-safe: a scope is used by the thread that opened it only.

#ifndef LOCKD_BACKENDS_COMMON_COALESCING_SCOPE_H_
#define LOCKD_BACKENDS_COMMON_COALESCING_SCOPE_H_

#include <memory>
#include <utility>
#include <vector>

namespace lockd {

class CoalescingScope {
 public:
  // Work held back for one destination until the scope closes.
  class Pending {
   public:
    virtual ~Pending() = default;
    // Sends (or fails) everything held back; called once (rule 3).
    virtual void Send() = 0;
  };

  CoalescingScope();
  // Sends every Pending (rule 3) if this scope is the outermost.
  ~CoalescingScope();
  CoalescingScope(const CoalescingScope&) = delete;
  CoalescingScope& operator=(const CoalescingScope&) = delete;

  // The outermost scope open on the calling thread, or null.
  static CoalescingScope* Current();

  // The Pending added under `key`, or null.
  Pending* Find(const void* key) const;
  // Adds `pending` under `key` and returns it. REQUIRES: Find(key) is null.
  Pending* Add(const void* key, std::unique_ptr<Pending> pending);

 private:
  bool outermost_ = false;
  std::vector<std::pair<const void*, std::unique_ptr<Pending>>> pending_;
};

}  // namespace lockd

#endif  // LOCKD_BACKENDS_COMMON_COALESCING_SCOPE_H_
