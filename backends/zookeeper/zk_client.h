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

namespace lockd::zk {

// Translates a ZooKeeper return code into a Status whose message names the
// operation (`context`, which should include the lock). The one place where
// ZooKeeper codes become Status codes:
//   connection loss, operation timeout, closing, session expired/moved,
//   throttled, invalid handle state        -> kUnavailable
//   anything else (including ZNOAUTH)      -> kInternal
absl::Status ZkError(absl::string_view context, int rc);

// True for the codes ZkError maps to kUnavailable.
bool IsTransient(int rc);

// The outcome of one operation.
struct Result {
  int rc = ZOK;
  struct Stat stat = {};              // create, get, set, children (the parent's)
  std::string value;                  // get: the data; create: the created path
  std::vector<std::string> children;  // children
  std::vector<int> multi;             // multi: each sub-operation's code
};

using Done = absl::AnyInvocable<void(Result) &&>;

struct Op {
  enum class Kind { kCreate, kDelete, kGet, kSet, kChildren, kCheck, kMulti };

  Kind kind = Kind::kGet;
  std::string path;
  std::string data;       // create, set
  int version = -1;       // delete, set, check; -1 matches any version
  int create_mode = 0;    // create: ZOO_PERSISTENT, ZOO_EPHEMERAL_SEQUENTIAL, ...
  bool open_acl = false;  // create: world-accessible even with digest auth
  uint64_t watch_id = 0;  // get: if nonzero, also sets a data watch reported
                          // to the WatchFn with this id
  std::vector<Op> ops;    // multi: kDelete, kSet and kCheck sub-operations
  Done done;              // not used for sub-operations of a multi

  static Op Create(std::string path, std::string data, int mode, Done done);
  static Op Delete(std::string path, int version, Done done);
  static Op Get(std::string path, Done done, uint64_t watch_id = 0);
  static Op Set(std::string path, std::string data, int version, Done done);
  static Op Children(std::string path, Done done);
  static Op Check(std::string path, int version);  // multi only
  static Op Multi(std::vector<Op> ops, Done done);
};

enum class SessionState {
  kConnecting,  // no connection; a session may or may not still exist
  kConnected,
  kExpired,     // the session is gone (its ephemeral nodes too); Reopen()
  kAuthFailed,  // the server refused the credentials; Reopen() to retry
};

absl::string_view SessionStateName(SessionState s);

class Client {
 public:
  struct Options {
    std::string hosts;  // "host:port,host:port[/chroot]"
    absl::Duration session_timeout = absl::Seconds(10);
    std::string digest;  // "user:password" for digest auth, or empty. Secret.
  };
  // `generation` counts sessions (1 for the first); an event of an older
  // generation is stale.
  using StateFn = absl::AnyInvocable<void(SessionState state, uint64_t generation) const>;
  // A watch set by a Get with watch_id fired for the node `path`; `type` is
  // ZOO_DELETED_EVENT, ZOO_CHANGED_EVENT, ... Session events are not
  // reported here.
  using WatchFn =
      absl::AnyInvocable<void(uint64_t watch_id, int type, absl::string_view path) const>;

  Client(Options options, StateFn on_state, WatchFn on_watch);
  // Close()s.
  ~Client();
  Client(const Client&) = delete;
  Client& operator=(const Client&) = delete;

  // Starts the first session (connecting in the background; on_state reports
  // kConnected). kInvalidArgument if the connect string is unusable.
  absl::Status Open();

  // Replaces the current session by a new one: closes the old handle (its
  // pending callbacks run with an error), then connects anew. For an expired
  // or auth-failed session. Blocks while the old handle's threads are
  // joined, so it must not run on a ZooKeeper callback thread.
  absl::Status Reopen();

  // Ends the session (the server deletes its ephemeral nodes at once) and
  // joins the C client's threads; every pending callback has run when it
  // returns. Later Submit()s fail with ZCLOSING. Idempotent. Must not run on
  // a ZooKeeper callback thread.
  void Close();

  // True while the session is connected.
  bool connected() const;
  // The current session's generation (0 before Open()).
  uint64_t generation() const;
  // The current session's id and password (secret); false if there is none.
  bool ClientId(int64_t* id, std::string* password) const;

  // Sends `ops` in order on the current session. See the class comment for
  // where callbacks run.
  void Submit(std::vector<Op> ops);
  void Submit(Op op);

  // The ACL new nodes get: creator-only when digest auth is configured,
  // otherwise open.
  struct ACL_vector* acl() const;

 private:
  struct Handle;
  struct Pending;

  static void GlobalWatcher(zhandle_t* zh, int type, int state, const char* path, void* ctx);
  static void PathWatcher(zhandle_t* zh, int type, int state, const char* path, void* ctx);
  static void OnStringStat(int rc, const char* value, const struct Stat* stat, const void* data);
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
