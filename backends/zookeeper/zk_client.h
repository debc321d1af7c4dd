// A thin C++ layer over ZooKeeper's multi-threaded C client
// (libzookeeper_mt): one session at a time, asynchronous operations only,
// results delivered to C++ callbacks, and no raw C handles outside this file.
//
// What it adds to the C client:
//   - fail fast: while the session is not connected, operations fail at once
//     with ZCONNECTIONLOSS instead of queueing until a reconnect;
//   - pipelining: Submit() sends several operations back to back; ZooKeeper
//     answers one session's requests in order, and a read sent after a write
//     sees that write;
//   - exactly-once callbacks: every submitted Op's callback runs exactly once,
//     even if the session expires or the client is closed with the operation
//     in flight (then with ZSESSIONEXPIRED / ZCLOSING);
//   - watch ids: a read can set a watch identified by a caller-chosen number,
//     so watches need no heap context that could outlive its owner;
//   - the C client's own log goes to lockd's log at debug level, never to
//     stderr.
//
// Threading: thread-safe. Callbacks and watch/state events run on the C
// client's completion thread, one at a time, with no lock of this class
// held, except that an operation that fails before it is sent has its
// callback run inline, on the thread calling Submit(). So Submit() must not
// be called while holding a lock the callback takes.

#ifndef LOCKD_BACKENDS_ZOOKEEPER_ZK_CLIENT_H_
#define LOCKD_BACKENDS_ZOOKEEPER_ZK_CLIENT_H_

#include <zookeeper/zookeeper.h>

#include <cstdint>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/functional/any_invocable.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "backends/zookeeper/zk_transport.h"

namespace lockd::zk {

class Client final : public Transport {
 public:
  struct Options {
    std::string hosts;  // "host:port,host:port[/chroot]"
    absl::Duration session_timeout = absl::Seconds(10);
    std::string digest;  // "user:password" for digest auth, or empty. Secret.
  };

  Client(Options options, StateFn on_state, WatchFn on_watch);
  // Close()s.
  ~Client() override;
  Client(const Client&) = delete;
  Client& operator=(const Client&) = delete;

  // Starts the first session (connecting in the background; on_state reports
  // kConnected). kInvalidArgument if the connect string is unusable.
  absl::Status Open() override;

  // Replaces the current session by a new one: closes the old handle (its
  // pending callbacks run with an error), then connects anew. For an expired
  // or auth-failed session. Blocks while the old handle's threads are
  // joined, so it must not run on a ZooKeeper callback thread.
  absl::Status Reopen() override;

  // Ends the session (the server deletes its ephemeral nodes at once) and
  // joins the C client's threads; every pending callback has run when it
  // returns. Later Submit()s fail with ZCLOSING. Idempotent. Must not run on
  // a ZooKeeper callback thread.
  void Close() override;

  // True while the session is connected.
  bool connected() const override;
  // The current session's generation (0 before Open()).
  uint64_t generation() const override;
  // The current session's id and password (secret); false if there is none.
  bool ClientId(int64_t* id, std::string* password) const;

  // Sends `ops` in order on the current session. See the class comment for
  // where callbacks run.
  void Submit(std::vector<Op> ops) override;
  using Transport::Submit;

  // The ACL new nodes get: creator-only when digest auth is configured,
  // otherwise open.
  struct ACL_vector* acl() const;

 private:
  struct Handle;
  struct Pending;

  static void GlobalWatcher(zhandle_t* zh, int type, int state, const char* path, void* ctx);
  static void PathWatcher(zhandle_t* zh, int type, int state, const char* path, void* ctx);
  static void OnStringStat(int rc, const char* value, const struct Stat* stat, const void* data);
  static void OnString(int rc, const char* value, const void* data);
  static void OnVoid(int rc, const void* data);
  static void OnData(int rc, const char* value, int len, const struct Stat* stat, const void* data);
  static void OnStat(int rc, const struct Stat* stat, const void* data);
  static void OnStrings(int rc, const struct String_vector* strings, const struct Stat* stat,
                        const void* data);
  static void OnMulti(int rc, const void* data);
  static void Finish(Pending* p, Result r);

  absl::StatusOr<Handle*> NewHandle(uint64_t generation);
  // zookeeper_close()s `h`, runs what is still pending with ZCLOSING, frees it.
  static void CloseHandle(Handle* h);
  // Issues one operation on h->zh. Returns the C client's immediate code; on
  // failure op.done is left in `op` for the caller to run.
  int Issue(Handle* h, Op& op) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Issue() of a multi: its sub-operations move into p, which the C client
  // writes the results into until OnMulti.
  static int IssueMulti(zhandle_t* zh, Op& op, Pending* p);
  void OnSessionEvent(Handle* h, int state);
  // Makes `h` the current handle and delivers a state event that arrived
  // before it was installed. False (h not installed) if closed meanwhile.
  bool Install(Handle* h);

  const Options options_;
  StateFn on_state_;
  WatchFn on_watch_;

  // Held while a state event is delivered, so that events reach on_state_
  // in order even when one is parked until its handle is installed.
  absl::Mutex event_mu_ ABSL_ACQUIRED_BEFORE(mu_);
  mutable absl::Mutex mu_;
  Handle* handle_ ABSL_GUARDED_BY(mu_) = nullptr;
  // A state event of the current generation that arrived before its handle
  // was installed (the C client connects in the background at once).
  bool has_early_state_ ABSL_GUARDED_BY(mu_) = false;
  SessionState early_state_ ABSL_GUARDED_BY(mu_) = SessionState::kConnecting;
  uint64_t generation_ ABSL_GUARDED_BY(mu_) = 0;
  bool connected_ ABSL_GUARDED_BY(mu_) = false;
  bool closed_ ABSL_GUARDED_BY(mu_) = false;
};

}  // namespace lockd::zk

#endif  // LOCKD_BACKENDS_ZOOKEEPER_ZK_CLIENT_H_
