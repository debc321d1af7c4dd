// The backend's ZooKeeper session, seen from the backend: whether it serves,
// and what happens when it changes (etcd's concurrency/session.go is the
// model).
//
//   - Start(): opens the first session and waits (up to connect_wait) until
//     the root exists and can be read. While no host of the connect string
//     can be used (none resolves yet), it keeps trying every second.
//   - Each new session (first connect, or after expiry) creates the root
//     with its parents and reads it; only then does the backend serve.
//   - Disconnected: not serving (kUnavailable with the reason); parked
//     waiters stay parked, their nodes and watches survive a reconnect
//     within the session timeout. Reconnected within the session: serving
//     again, and on_serving runs (to delete orphaned nodes).
//   - Silent: connected, but the server has not answered a probe (a read of
//     the root, sent every silence_bound/4 at most) for silence_bound (the
//     server is paused, or the network drops packets without a reset): not
//     serving (kUnavailable) until an answer comes, long before the client
//     itself gives the connection up (2/3 of the session timeout).
//   - Expired (or credentials refused): not serving; on_lost runs (the
//     backend fails parked waiters and forgets the old session's locks),
//     then a new session is opened (after 1 s for refused credentials) until
//     one connects.
//
// Thread-safe: state guarded by mu_; OnState() runs on the client's event
// thread, reopening on the TimerQueue thread; no listener runs with mu_
// held.

#ifndef LOCKD_BACKENDS_ZOOKEEPER_ZK_SESSION_H_
#define LOCKD_BACKENDS_ZOOKEEPER_ZK_SESSION_H_

#include <chrono>
#include <cstdint>
#include <string>

#include "absl/base/thread_annotations.h"
#include "absl/functional/any_invocable.h"
#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "backends/common/timer_queue.h"
#include "backends/zookeeper/zk_transport.h"

namespace lockd::zk {

class Session {
 public:
  struct Options {
    std::string hosts;  // for messages only
    std::string root;
    absl::Duration connect_wait = absl::Seconds(10);
    // How long a connected session may go without an answer before it counts
    // as not serving; zero: never.
    absl::Duration silence_bound = absl::ZeroDuration();
  };
  struct Listener {
    // A session became usable again after a reconnect, or a new session
    // checked the root.
    absl::AnyInvocable<void()> on_serving;
    // The session ended (expired or refused): its ephemeral nodes are gone.
    absl::AnyInvocable<void()> on_lost;
  };

  // `timers` must outlive Stop(); Attach() a client before Start().
  Session(Options options, TimerQueue* timers, Listener listener);
  Session(const Session&) = delete;
  Session& operator=(const Session&) = delete;

  // The client whose state events OnState() receives. Must outlive this.
  void Attach(Transport* zk) { zk_ = zk; }

  // Opens the first session and waits up to connect_wait until it serves.
  // kInvalidArgument for an unusable connect string; kUnauthenticated (naming
  // the root) if the server refuses access to the root. OK otherwise, also when
  // still connecting (Usable() then says so).
  absl::Status Start();

  // The client's state callback.
  void OnState(SessionState state, uint64_t generation);

  // OK while serving; kUnavailable with the reason, or the shutdown error
  // after Stop().
  absl::Status Usable() const;
  bool serving() const;

  // Stops serving and reopening for good.
  void Stop();

 private:
  void Reopen();
  // The probe timer: sends a probe, or declares the session silent.
  void Probe();
  void EnsureRoot(uint64_t generation);
  void RootFailed(uint64_t generation, int rc);
  void RootReady(uint64_t generation);

  const Options options_;
  TimerQueue* const timers_;  // used only with mu_ held and !stopped_
  Listener listener_;
  Transport* zk_ = nullptr;

  mutable absl::Mutex mu_;
  bool stopped_ ABSL_GUARDED_BY(mu_) = false;
  bool ready_ ABSL_GUARDED_BY(mu_) = false;  // connected, root checked
  std::string reason_ ABSL_GUARDED_BY(mu_);  // why not ready
  absl::Status root_error_ ABSL_GUARDED_BY(mu_);
  uint64_t root_generation_ ABSL_GUARDED_BY(mu_) = 0;
  // The probe in flight (sent at probe_sent_), and whether the session is
  // silent (connected, but no answer for silence_bound).
  bool probing_ ABSL_GUARDED_BY(mu_) = false;
  std::chrono::steady_clock::time_point probe_sent_ ABSL_GUARDED_BY(mu_);
  bool silent_ ABSL_GUARDED_BY(mu_) = false;
};

}  // namespace lockd::zk

#endif  // LOCKD_BACKENDS_ZOOKEEPER_ZK_SESSION_H_
