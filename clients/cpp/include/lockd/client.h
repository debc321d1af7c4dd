// lockd C++ client: leased, auto-renewed, fenced locks over gRPC.
//
//   absl::StatusOr<lockd::Client> client = lockd::Client::Connect("127.0.0.1:7411");
//   lockd::AcquireOptions options;
//   options.wait = absl::Seconds(5);
//   absl::StatusOr<lockd::Lease> lease = client->Acquire("orders/42", options);
//   if (lease.ok()) Charge(order, lease->fencing_token());  // released when `lease` dies
//
// Sessions (the default, ClientOptions::use_sessions). A Client holds its
// locks over ONE Session stream (docs/api.md "Sessions"), opened on its
// first Acquire with the Client's owner. What changes for session holds:
//  * No watchdog: the server renews every hold while the stream is up; a
//    Lease stays valid() (valid_until() is time_point::max()) until the
//    server pushes `lost` (ForceRelease, lease found gone), which marks it
//    lost at once and fires on_lost.
//  * Crash or disconnect: when the stream breaks, the server frees the holds
//    at once if ClientOptions::keep_on_disconnect is false; if it is true
//    (the default) it leaves them to their lease (session_ttl), so a crashed
//    process's locks free after that lease, not at once.
//  * Resume: a broken stream (network, or the lockd replica died or shut
//    down) is reopened with backoff, on the same target (another replica
//    when it names several, see NewLockdChannel), as a session of the
//    same owner that resumes every held lease; a lease the server does not
//    give back is lost. Meanwhile a lease stays valid for 2/3 of its ttl
//    minus the drift after the break, then is lost. Acquires and releases in
//    flight at the break follow the uncertain-outcome rules below (an
//    Acquire is undone with the unary Release{acquire_request_id} and
//    retried; a Release is repeated as a unary Release with its request_id).
//  * A lockd replica that hangs without closing the connection (SIGSTOP, a
//    partition dropping packets) stops answering the channel's HTTP/2
//    keepalive pings (KeepaliveOptions), so the stream breaks within
//    K = keepalive.time + keepalive.timeout of the hang and the rule above
//    applies, counted from K before the break was noticed: the lease stays
//    valid until break - K + 2/3 ttl - drift (the server was last known
//    alive then, and it renews every ttl/3). So a Lease is never valid()
//    after the backend could have let its hold go. That needs
//    2/3 ttl - drift > K: a hold whose ttl (or session_ttl) is shorter uses
//    the unary path (about 6.1 s and shorter with the default keepalive).
//  * A waiting Acquire whose options.timeout passes is cancelled on the
//    stream (SessionCancel) and leaves no hold.
//  * Batches: all threads share the one stream. An operation (acquire,
//    release, cancel) issued while no write is in flight is written at once,
//    alone, on the calling thread; those issued while a write is in flight
//    leave together as ONE batch when it completes (at most 1,000, the rest
//    in the next write), and the server answers in batches too (see
//    docs/api.md "Batches on a Session"). Nothing waits to fill a batch, so
//    a lone call pays no latency; many threads pay far fewer messages.
//  * Unary instead: acquires with AcquireOptions::owner other than the
//    Client's, with auto_renew false, with a ttl other than the session's
//    lease (see ClientOptions::session_ttl), or with a ttl too short for the
//    keepalive (above) use the unary RPCs, as does
//    every call when use_sessions is false or the server has no Session
//    stream (UNIMPLEMENTED). Everything below then applies as written.
//
// What this library adds over the raw stubs (docs/api.md has the contract):
//  * Validity from the send time. A Lease's client-side validity deadline is
//    `send_time + ttl - drift` where send_time is when the granting request
//    (Acquire or Renew) was sent, never when its reply arrived: the server's
//    lease cannot have started before the request left, so this deadline is
//    never later than the server's. drift = ttl * clock_drift_factor +
//    min_clock_drift (Redlock's allowance for clock rate differences).
//  * Watchdog (unary holds). Leases with auto_renew (the default) are renewed every ttl/3
//    by ONE background thread per Client (started on the first such lease),
//    not a thread per lease. Renewals are issued one at a time, each bounded
//    by min(rpc_timeout, the lease's remaining validity).
//  * Lost detection. A lease is lost when a Renew answers LOCK_NOT_HELD, when
//    a Renew reports a different fencing token (the hold was lost and the lock
//    re-granted), or when its validity deadline passes because renewals kept
//    failing. Lost is sticky: lost() stays true, on_lost fires once, Renew()
//    and Release() report kFailedPrecondition with IsLockLost() true.
//  * Safe retries. Acquire and Release carry a random request_id and are
//    retried on UNAVAILABLE, with capped, jittered exponential backoff, inside
//    the caller's deadline. A Release keeps its request_id, so a lost reply
//    never leaves a double decrement (the server answers a repeated
//    request_id with the first result).
//  * Releases and renewals name their hold. Lease::Release (unary or over the
//    session), Lease::Renew and the watchdog's renewals carry the Lease's
//    fencing_token, so one that reaches the server late, after the owner
//    released and acquired the lock again (a new token), finds another token
//    and changes nothing: LOCK_NOT_HELD, the Lease is lost, the later hold
//    stays. A reentrant Lease has the first hold's token.
//  * No hold left behind. When the client cannot learn what became of an
//    Acquire attempt (its deadline passed, or it ended with UNAVAILABLE or
//    another transport error after the request may have been sent), it
//    undoes that attempt before it retries or reports the failure: a Release
//    with the same owner and acquire_request_id = the attempt's request_id
//    (docs/api.md, "Uncertain outcomes"), which gives back the hold the
//    attempt added, if any, and nothing else. The undo is bounded by
//    min(rpc_timeout, release_timeout), retried on UNAVAILABLE within that,
//    and runs even when the caller's deadline has passed. A retry after a
//    confirmed undo uses a new request_id (so a late give-back of the old
//    attempt cannot touch the new hold); after an unconfirmed one it keeps
//    the same request_id, so the server answers it with the first result and
//    the hold count cannot double. So an Acquire that succeeds adds exactly
//    one hold however many attempts it took, and one that fails leaves none
//    unless the undo itself went unanswered (see
//    UnconfirmedAcquireRequestId). Needs a lockd that knows
//    acquire_request_id (an older one would take the undo for a plain
//    Release of one hold).
//
// Kinds (docs/api.md "Shared locks, semaphores and all-or-nothing acquires"):
// a name is a lock, held EXCLUSIVE (Client::Acquire, a writer)
// or SHARED (Client::AcquireShared, a reader), or a semaphore of `limit`
// permits (Semaphore::Acquire). Every holder has its own hold, lease and
// fencing token, so a Lease of a shared lock or of semaphore permits is
// renewed, lost, released and undone exactly as an exclusive one, on the
// session or the unary path alike. Client::AcquireAll takes several names
// for one owner, all or nothing (a LeaseSet). The server's refusals of a
// kind carry their reason (ErrorReason): LOCK_KIND_MISMATCH (another kind or
// limit holds the name), UPGRADE_WOULD_BLOCK (a SHARED holder asked
// EXCLUSIVE while others hold or wait), PERMITS_MISMATCH (a semaphore holder
// asked again with other permits); all kFailedPrecondition, returned at once.
//
// Owners: a Client has one owner id (ClientOptions::owner, default a random
// id per Client). Locks are reentrant per owner, so two threads sharing one
// Client and acquiring the same lock BOTH get it (hold count 2). For mutual
// exclusion between threads of one process use one Client per thread, or set
// AcquireOptions::owner per thread.
//
// Time: every deadline is measured with std::chrono::steady_clock, so wall
// clock steps neither extend nor shorten a lease.

#ifndef LOCKD_CLIENT_H_
#define LOCKD_CLIENT_H_

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "grpcpp/channel.h"
#include "lockd/v1/lock.grpc.pb.h"

namespace lockd {

namespace client_internal {
class CancelState;
class ClientCore;
class LeaseState;
}  // namespace client_internal

class CancellationToken;
namespace client_internal {
const std::shared_ptr<CancelState>& StateOf(const CancellationToken& token);
}  // namespace client_internal

// Transport security for NewLockdChannel / Client::Connect.
struct TlsOptions {
  // False: plaintext (insecure) channel; every other field is ignored.
  bool enabled = false;
  // PEM file with the root certificates that sign the server's certificate.
  // Empty: gRPC's default roots (GRPC_DEFAULT_SSL_ROOTS_FILE_PATH or the
  // bundled ones).
  std::string ca_file;
  // PEM client certificate chain and private key, for mutual TLS. Both or
  // neither.
  std::string cert_file;
  std::string key_file;
  // Name to verify in the server certificate (and to send as SNI/authority)
  // instead of the host in the target. Empty: the target's host.
  std::string server_name;
};

// Per-call credentials for NewLockdChannel / Client::Connect: the identity
// lockd authorizes when it is configured with bearer tokens
// (`auth.tokens_file`). Sent over TLS or plaintext alike (use TLS: a token
// on a plaintext channel can be read on the network).
struct AuthOptions {
  // Sent as `authorization: Bearer <token>` with every call. Never logged.
  std::string bearer_token;
  // File whose first line is the token, read once by NewLockdChannel; used
  // when bearer_token is empty.
  std::string bearer_token_file;
};

// HTTP/2 keepalive of a channel made by NewLockdChannel: a ping every `time`
// (raised to 1 s if shorter: lockd refuses pings more often than every
// 500 ms), and the connection is closed when a ping is not answered within
// `timeout`. It is how a session notices a lockd replica that hangs without
// closing the connection (see "Sessions" above). Both must be positive.
struct KeepaliveOptions {
  absl::Duration time = absl::Seconds(2);
  absl::Duration timeout = absl::Seconds(2);
};

// Creates a channel to `target`, with reconnect backoff tuned for leases
// (100 ms initial, 2 s cap: a client must see a restarted server well within a
// lease, not after gRPC's default 120 s cap). Does not connect yet.
//
// Replicas: lockd is stateless, so `target` may name several replicas and
// the channel balances calls over every address it resolves to with gRPC's
// round_robin policy (a replica that is down gets no calls until it is back):
//  * any gRPC target: "127.0.0.1:7411", "dns:///lockd-headless:7411" (a name
//    with several addresses), "ipv4:10.0.0.1:7411,10.0.0.2:7411";
//  * a comma-separated list "host1:7411,host2:7411,[::1]:7411": its host
//    names are resolved once, here (use a dns:/// target for names whose
//    addresses change); the list's first entry is the channel's authority,
//    the name TLS verifies unless tls.server_name is set.
// A call that fails UNAVAILABLE because its replica went away is retried on
// another (see "Safe retries"), and a broken session reopens on another
// replica and resumes its holds.
//
// Errors: kInvalidArgument for an empty target, a malformed or unresolvable
// list entry (named), a missing or unreadable TLS or token file (the message
// names the file, never its contents), an empty token file, a cert_file
// without key_file (or the reverse), or a keepalive time or timeout that is
// not positive (named).
absl::StatusOr<std::shared_ptr<grpc::Channel>> NewLockdChannel(
    absl::string_view target, const TlsOptions& tls = {}, const AuthOptions& auth = {},
    const KeepaliveOptions& keepalive = {});

struct ClientOptions {
  // Owner id for every lock this Client takes unless AcquireOptions::owner
  // says otherwise; 1-256 bytes. Empty: "<hostname>-<pid>-<32 random hex>",
  // unique per Client.
  std::string owner;
  // Namespace used when a call's `ns` is empty. Empty: the server's
  // "default".
  std::string default_namespace;
  // Deadline of every call that does not wait (Release, Renew, Describe,
  // List), retries included; also the slack an Acquire gets beyond `wait`.
  absl::Duration rpc_timeout = absl::Seconds(10);
  // Bound on the release done by ~Lease (best effort, retries included), and,
  // capped at rpc_timeout, on the undo of an Acquire attempt whose outcome
  // the client did not learn.
  absl::Duration release_timeout = absl::Seconds(2);
  // Retry backoff after UNAVAILABLE: starts at initial_backoff, doubles up to
  // max_backoff; each sleep is uniformly jittered in [backoff/2, backoff].
  absl::Duration initial_backoff = absl::Milliseconds(50);
  absl::Duration max_backoff = absl::Seconds(2);
  // Validity safety margin: drift = ttl * clock_drift_factor + min_clock_drift.
  double clock_drift_factor = 0.01;
  absl::Duration min_clock_drift = absl::Milliseconds(2);

  // Hold locks over the Client's Session stream (see "Sessions" above).
  // False: every call uses the unary RPCs and the watchdog, as before
  // sessions (also what a Client does, per call, when the server has no
  // Session stream).
  bool use_sessions = true;
  // The lease of session holds, kept renewed by the server while the stream
  // is up; it is how long a hold outlives a broken stream. Zero: the ttl of
  // the first Acquire that uses the session (zero: the server's default).
  absl::Duration session_ttl = absl::ZeroDuration();
  // True: when the stream breaks, the server leaves the session's holds to
  // their lease so that the Client can resume them on a new stream (on any
  // replica); a crash of this process then frees its locks only after
  // session_ttl. False: a broken stream (process crash, network loss) frees
  // the holds at once; a network break then loses them (the client cannot
  // resume them). A lockd replica that dies or shuts down leaves its
  // sessions' holds to their lease either way.
  bool keep_on_disconnect = true;
  // The channel's keepalive: Client::Connect makes its channel with it, and
  // session holds count on it (see "Sessions" above). A Client built on a
  // channel of its own must be given that channel's values.
  KeepaliveOptions keepalive;
};

// Called once, when a Lease becomes lost, with the reason (kFailedPrecondition,
// IsLockLost() true). Runs on the Client's watchdog thread (unary holds), its
// session thread (session holds: a `lost` from the server, a hold not
// resumed after a reconnect, validity run out while no stream was up), or on the thread
// whose Lease call (lost(), valid(), Renew()) noticed the loss first, never
// with a lock of this library held. It should return quickly (it delays other
// leases' renewals); it may call any Lease method, and may destroy the Lease.
// A loss that Release() discovers is reported by Release() only.
using LostCallback = std::function<void(const absl::Status& why)>;

// Cancels waiting acquires from another thread. Pass a token in
// AcquireOptions::cancel (of Acquire, AcquireShared, AcquireAll,
// Semaphore::Acquire, or several calls at once) and call Cancel() from any
// thread: every call using it that has not returned stops waiting and
// returns kCancelled promptly (well under a second: the unary RPC is
// cancelled, a session acquire is cancelled on the stream with
// SessionCancel), on either path, leaving no hold:
//  * cancelled before the call starts: nothing is sent;
//  * cancelled while it waits: lockd ends the wait with no hold (a grant
//    that raced the cancel is given back by lockd: docs/api.md
//    "Uncertain outcomes" and "Sessions"), and the client undoes the
//    attempt (Release{acquire_request_id}) before it returns;
//  * a grant the client had already received when it noticed the cancel is
//    released before the call returns kCancelled.
// Only a call that returned before Cancel() keeps its Lease; Cancel() does
// not touch held Leases. Like every failed acquire, a kCancelled one may
// carry UnconfirmedAcquireRequestId when its undo went unanswered.
//
// A token is a handle: copies share one state, cheap to copy. Cancellation
// is final (a token cannot be reset; make a new one). Thread-safe.
class CancellationToken {
 public:
  // A new token, not cancelled.
  CancellationToken();

  // Cancels every call using this token (or a copy), now and later.
  // Idempotent; does not block on the calls (they return on their own
  // threads).
  void Cancel() const;
  bool cancelled() const;

 private:
  friend const std::shared_ptr<client_internal::CancelState>& client_internal::StateOf(
      const CancellationToken& token);
  std::shared_ptr<client_internal::CancelState> state_;
};

struct AcquireOptions {
  // Lock namespace (1-64 bytes of [A-Za-z0-9._-]). Empty:
  // ClientOptions::default_namespace.
  std::string ns;
  // Owner of the hold. Empty: Client::owner().
  std::string owner;
  // Lease length. Zero: the server's default (30 s unless configured). Must be
  // within the server's [lease.min, lease.max] (default [1 s, 1 h]).
  absl::Duration ttl = absl::ZeroDuration();
  // How long to wait for a lock held by someone else. Zero: try once.
  absl::Duration wait = absl::ZeroDuration();
  // Overall deadline of the call, waiting and retries included. Zero:
  // wait + ClientOptions::rpc_timeout.
  absl::Duration timeout = absl::ZeroDuration();
  // Keep the lease renewed: by the server for a session hold, else every
  // ttl/3 from the watchdog thread. False: the lease lasts one ttl unless the
  // caller calls Lease::Renew(); its loss is still detected. Acquires with
  // auto_renew false use the unary path (a session renews all its holds).
  bool auto_renew = true;
  // Optional; see LostCallback.
  LostCallback on_lost;
  // Cancel() it from another thread to stop the call (see
  // CancellationToken). Default: a token of this call's own, never
  // cancelled.
  CancellationToken cancel;
};

// How a lock is held (lockd.v1.LockMode): alone (a mutex, a writer) or
// together with other SHARED holders (readers). Semaphore holds are
// kExclusive. Named HoldMode so that it never clashes with the server's
// lockd::LockMode in a program that has both.
enum class HoldMode { kExclusive, kShared };

// "exclusive" or "shared".
const char* HoldModeName(HoldMode mode);

// One owner's hold of a name (LockInfo::holders).
struct Holder {
  std::string owner;
  HoldMode mode = HoldMode::kExclusive;
  uint32_t hold_count = 0;
  uint32_t permits = 0;  // semaphore permits held (0 for a lock)
  uint64_t fencing_token = 0;
  absl::Duration ttl_remaining;  // by the backend's clock
};

// One lock's state (DescribeRequest / ListResponse).
struct LockInfo {
  std::string ns;
  std::string name;
  bool held = false;
  // The following are meaningful only when held.
  std::string owner;
  uint32_t hold_count = 0;
  uint64_t fencing_token = 0;
  absl::Duration ttl_remaining;  // by the backend's clock
  // Waiters parked on the answering server.
  uint32_t waiters = 0;
  // memory, redis, mysql or zookeeper.
  std::string backend;
  // How it is held (kExclusive when free and for a semaphore). For a shared
  // lock or a semaphore, owner, hold_count, fencing_token and ttl_remaining
  // describe the newest holder.
  HoldMode mode = HoldMode::kExclusive;
  // Non-zero: the name is held as a semaphore of this many permits.
  uint32_t limit = 0;
  // Every holder, by fencing token, oldest first.
  std::vector<Holder> holders;
};

struct ListOptions {
  std::string ns;          // empty: ClientOptions::default_namespace
  std::string prefix;      // only names starting with this
  uint32_t page_size = 0;  // 0: server default (100); at most 1000
  std::string page_token;  // from a previous ListPage; empty: first page
};

struct ListPage {
  std::vector<LockInfo> locks;  // held locks, ordered by name
  std::string next_page_token;  // empty on the last page
};

struct ReleaseOutcome {
  bool released = false;    // the hold count reached 0; the lock is free
  uint32_t hold_count = 0;  // holds the owner still has
};

struct RenewOutcome {
  absl::Duration ttl;  // the lease now in force
  uint64_t fencing_token = 0;
};

struct ForceReleaseOutcome {
  bool released = false;  // a hold was freed (false: the lock was already free)
  LockInfo previous;      // the lock's state before
};

// True if `status` reports that a lock is not (or no longer) held by the
// caller: the server's LOCK_NOT_HELD, or a Lease lost on the client side
// (validity ran out, fencing token changed). Always kFailedPrecondition.
bool IsLockLost(const absl::Status& status);

// For the kDeadlineExceeded returned when a lock was not acquired in time:
// the holder the server reported. nullopt for any other status.
std::optional<LockInfo> CurrentHolder(const absl::Status& status);

// The reason lockd gave for a refusal (the google.rpc.ErrorInfo reason of
// domain "lockd"): "LOCK_KIND_MISMATCH", "UPGRADE_WOULD_BLOCK",
// "PERMITS_MISMATCH", ...; for a lost lease (IsLockLost) why it was lost
// ("LOCK_NOT_HELD", "VALIDITY_EXPIRED", ...). nullopt when the status
// carries none. The status message also names it, with the ErrorInfo metadata (for
// LOCK_KIND_MISMATCH: kind=lock|semaphore and, for a semaphore, limit=N).
std::optional<std::string> ErrorReason(const absl::Status& status);

// For a failed Client::Acquire whose last attempt's outcome the client did
// not learn AND whose undo went unanswered (the server was unreachable for
// the whole undo bound): that attempt's request_id. The attempt may have left
// a hold, which ends with its lease, or now with Client::UndoAcquire(name,
// owner, id). The status message names the owner and id too. nullopt for any
// other status (including every failure whose undo was confirmed).
std::optional<std::string> UnconfirmedAcquireRequestId(const absl::Status& status);

// A held lock: one hold of one owner on (ns, name). Move-only RAII; the
// destructor of an active Lease stops its renewal and releases it (best
// effort, bounded by ClientOptions::release_timeout, errors ignored: the
// server's lease ends an unreleased hold). Call Release() to see the outcome.
//
// A Lease keeps its Client's connection, session and watchdog alive: it may outlive
// the Client object it came from.
//
// Thread-safety: every method may be called concurrently from any thread
// (state lives behind a mutex), except that moving or destroying a Lease must
// not race with other calls on the same Lease object. A moved-from Lease is
// empty: accessors return empty/zero values, lost() is false, Release() and
// Renew() return kFailedPrecondition.
class Lease {
 public:
  Lease() = default;  // empty
  Lease(Lease&&) noexcept;
  Lease& operator=(Lease&&) noexcept;  // releases the lease it replaces
  Lease(const Lease&) = delete;
  Lease& operator=(const Lease&) = delete;
  ~Lease();

  const std::string& ns() const;
  const std::string& name() const;
  const std::string& owner() const;
  // Pass this to the protected resource with every write; it must reject
  // writes carrying a smaller token than one it has seen.
  uint64_t fencing_token() const;
  // The owner's hold count right after this acquire (1 on a first grant).
  uint32_t hold_count() const;
  // The lease granted by the server.
  absl::Duration ttl() const;
  // The kind asked for: mode() kShared for Client::AcquireShared (an owner
  // that already held the lock exclusive got a reentrant exclusive hold),
  // else kExclusive; limit() the semaphore's limit and permits() the
  // permits this hold took (both 0 for a lock).
  HoldMode mode() const;
  uint32_t limit() const;
  uint32_t permits() const;

  // The client-side validity deadline: send time of the last successful
  // Acquire/Renew + ttl - drift. Never later than the server's expiry.
  // Session holds: time_point::max() while the stream is up (the server
  // renews them); after a break, the break + 2/3 ttl - drift.
  std::chrono::steady_clock::time_point valid_until() const;
  // valid_until() - now; zero or negative once passed.
  absl::Duration validity_remaining() const;
  // !lost() and validity_remaining() > 0. Check it just before an action the
  // lock protects; pass fencing_token() along for the cases timing can't catch.
  bool valid() const;
  // True once the lease is lost (sticky). Also notices a validity deadline
  // that has passed and, if so, marks the lease lost (firing on_lost).
  bool lost() const;
  // OK while not lost; otherwise why (kFailedPrecondition, IsLockLost()).
  absl::Status lost_status() const;
  // True until Release(), Detach(), or move-from.
  bool active() const;

  // Renews now (normally the watchdog does this). Blocks up to
  // ClientOptions::rpc_timeout. Session holds: no call (the server renews
  // them); OK unless lost.
  // OK: validity extended from this call's send time.
  // kFailedPrecondition + IsLockLost(): the lease is lost (now marked so).
  // kFailedPrecondition (not IsLockLost): the Lease is not active.
  // kUnavailable / kDeadlineExceeded: no answer; the lease is unchanged and
  //   stays valid until validity_remaining() runs out.
  absl::Status Renew();

  // Stops renewal and gives up this hold (retried on UNAVAILABLE with one
  // request_id). Blocks up to `timeout` (zero: ClientOptions::rpc_timeout).
  // Afterwards the Lease is inactive whatever the result.
  // OK: released (the lock is free, or the owner's other holds remain).
  // kFailedPrecondition + IsLockLost(): the lease had been lost (the hold was
  //   gone, or may have been: the work done under it was not protected), or
  //   the owner's hold has another token now (it is left alone).
  // kFailedPrecondition (not IsLockLost): already released or detached.
  // kUnavailable / kDeadlineExceeded: no answer in time; the hold ends when
  //   its lease does.
  absl::Status Release(absl::Duration timeout = absl::ZeroDuration());

  // Stops renewal and tracking WITHOUT releasing: the hold stays on the
  // server until its lease ends or someone releases it with owner() (as
  // `lockctl acquire` does). The Lease becomes inactive. A session hold
  // stays in the server's session (renewed, and released when the Client's
  // session ends): acquire with auto_renew false to hand a hold on.
  void Detach();

 private:
  friend class Client;
  friend class Semaphore;
  Lease(std::shared_ptr<client_internal::ClientCore> core,
        std::shared_ptr<client_internal::LeaseState> state);

  std::shared_ptr<client_internal::ClientCore> core_;
  std::shared_ptr<client_internal::LeaseState> state_;
};

// The holds of one Client::AcquireAll, one Lease per lock in the order the
// locks were given. Move-only RAII: the destructor releases every active
// Lease (each as ~Lease does). Each Lease is renewed, lost and released on
// its own; take one out with Take() to keep it past the set.
//
// Thread-safety: as Lease (moving or destroying a LeaseSet must not race
// with other calls on it).
class LeaseSet {
 public:
  LeaseSet() = default;  // empty
  explicit LeaseSet(std::vector<Lease> leases) : leases_(std::move(leases)) {}
  LeaseSet(LeaseSet&&) noexcept = default;
  LeaseSet& operator=(LeaseSet&&) noexcept = default;  // releases the leases it replaces
  ~LeaseSet() = default;

  size_t size() const { return leases_.size(); }
  Lease& operator[](size_t i) { return leases_[i]; }
  const Lease& operator[](size_t i) const { return leases_[i]; }
  std::vector<Lease>::iterator begin() { return leases_.begin(); }
  std::vector<Lease>::iterator end() { return leases_.end(); }
  std::vector<Lease>::const_iterator begin() const { return leases_.begin(); }
  std::vector<Lease>::const_iterator end() const { return leases_.end(); }
  // Moves the i-th Lease out (the set keeps an empty one in its place).
  Lease Take(size_t i) { return std::move(leases_[i]); }

  // Every Lease valid() (false for an empty set).
  bool valid() const;
  // Some Lease lost().
  bool lost() const;
  // Releases every active Lease (Lease::Release with `timeout` each), all
  // of them even after a failure. OK if every release was; else the first
  // error (each Lease is inactive afterwards whatever the result).
  absl::Status Release(absl::Duration timeout = absl::ZeroDuration());

 private:
  std::vector<Lease> leases_;
};

// One lock of Client::AcquireAll.
struct LockSpec {
  std::string name;
  // Empty: AcquireOptions::ns, else ClientOptions::default_namespace.
  std::string ns;
  // A lock: kExclusive (a writer) or kShared (a reader), limit 0.
  HoldMode mode = HoldMode::kExclusive;
  // A semaphore: limit 1-10,000 with permits 1-limit (0: 1); mode kExclusive.
  uint32_t limit = 0;
  uint32_t permits = 0;
};

// A connection to lockd. Cheap to move; not copyable; a moved-from Client may
// only be destroyed or assigned to. Thread-safe: every method may be called
// concurrently. Destroying the Client does not end the Leases it issued (they
// keep what they need alive).
class Client {
 public:
  // A Client on a new channel (NewLockdChannel): `target` is one lockd or
  // several replicas. Errors as NewLockdChannel. Does not contact the server.
  static absl::StatusOr<Client> Connect(absl::string_view target, ClientOptions options = {},
                                        const TlsOptions& tls = {}, const AuthOptions& auth = {});

  // A Client on an existing channel. While it backs off after UNAVAILABLE,
  // and while it has leases and the channel is not READY, the Client keeps
  // the channel connecting (gRPC's synchronous API otherwise retries a
  // connection only every 5 s), so a restarted server is reached promptly.
  explicit Client(std::shared_ptr<grpc::ChannelInterface> channel, ClientOptions options = {});
  // A Client on any stub implementation, e.g. lockd::v1::MockLockServiceStub
  // in tests. It cannot see the stub's channel, so it does not keep it
  // connecting as above. REQUIRES: stub != nullptr.
  explicit Client(std::shared_ptr<v1::LockService::StubInterface> stub, ClientOptions options = {});

  Client(Client&&) noexcept;
  Client& operator=(Client&&) noexcept;
  Client(const Client&) = delete;
  Client& operator=(const Client&) = delete;
  ~Client();

  // This Client's owner id.
  const std::string& owner() const;

  // Takes the lock `name`, waiting up to options.wait while another owner
  // holds it. Blocks until granted, not granted in time, or options.timeout.
  // OK: a Lease (active, valid, renewed by the watchdog if auto_renew).
  //   Reentrant: if the owner already holds the lock, the Lease is one more
  //   hold with the same fencing token. If the grant arrived so late that
  //   renewing was already due (a long wait), the lease is renewed before
  //   returning so that it comes back with close to a full validity.
  // kDeadlineExceeded: not acquired within wait (or timeout); nothing is held.
  //   CurrentHolder(status) describes the holder when the server said.
  // kInvalidArgument: a field breaks a rule (message names it).
  // kUnavailable: the server was unreachable or unresponsive until the
  //   deadline. A grant that did happen was undone (see "No hold left behind"
  //   above).
  // kResourceExhausted: the server has too many waiters; retry later.
  // kFailedPrecondition + IsLockLost(): granted, but the lease was gone by
  //   the time the post-wait renewal reached the server (rare).
  // kCancelled: options.cancel was cancelled before the call returned
  //   (see CancellationToken); nothing is held.
  // Any error: no hold of this call remains, except when
  //   UnconfirmedAcquireRequestId(status) is set (the undo went unanswered;
  //   the hold, if any, ends with its lease).
  // Past options.timeout the call may block for the undo of an attempt
  // whose outcome it did not learn (up to min(rpc_timeout, release_timeout)),
  // or for the post-wait renewal (up to min(rpc_timeout, ttl/3)).
  absl::StatusOr<Lease> Acquire(absl::string_view name, AcquireOptions options = {});

  // Acquire with options.wait = 0: one attempt (retried only on UNAVAILABLE).
  absl::StatusOr<Lease> TryAcquire(absl::string_view name, AcquireOptions options = {});

  // Takes the lock `name` SHARED (a reader of a read-write lock): together
  // with other SHARED holders, never with an EXCLUSIVE one (Acquire). FIFO
  // across modes: behind an EXCLUSIVE acquire that waits, a SHARED one
  // waits too (writers never starve). Reentrant; an owner that holds the
  // lock EXCLUSIVE gets a reentrant exclusive hold. Blocks, returns and
  // undoes as Acquire, plus kFailedPrecondition with ErrorReason
  // LOCK_KIND_MISMATCH when the name is held as a semaphore (at once,
  // whatever options.wait).
  //
  // The other way round, Acquire by an owner that holds the lock SHARED
  // (an upgrade) is granted at once when that owner is the only holder and
  // nobody waits (a new, larger token), else it fails at once with
  // kFailedPrecondition and ErrorReason UPGRADE_WOULD_BLOCK: release the
  // shared hold and acquire exclusive instead.
  absl::StatusOr<Lease> AcquireShared(absl::string_view name, AcquireOptions options = {});

  // Takes every lock of `locks` (1-64, no (ns, name) twice) for one owner,
  // all or nothing, with one AcquireAll call (over the session when the
  // Client's session holds, see ChooseAcquirePath's rows; options as for
  // Acquire, options.ns being the namespace of a LockSpec without one).
  // The server takes them in (ns, name) order within options.wait, so two
  // callers never deadlock whatever order they list them in.
  // OK: a LeaseSet with one Lease per lock, in the order of `locks`; each
  //   has its own hold and token (renewed, lost and released on its own).
  // kDeadlineExceeded: not every lock within the wait; nothing is held;
  //   CurrentHolder(status) is the lock that could not be taken.
  // kFailedPrecondition + ErrorReason (LOCK_KIND_MISMATCH,
  //   UPGRADE_WOULD_BLOCK, PERMITS_MISMATCH) for one of the locks; nothing
  //   is held. kInvalidArgument, kUnavailable, kResourceExhausted, kCancelled as
  //   Acquire.
  // Uncertain outcomes are undone lock by lock (Release with
  // acquire_request_id = the call's request_id, on every lock), so a failed
  // call leaves no hold unless UnconfirmedAcquireRequestId(status) is set.
  absl::StatusOr<LeaseSet> AcquireAll(const std::vector<LockSpec>& locks,
                                      AcquireOptions options = {});

  // Low-level operations on a hold identified by owner, for tools and for
  // handing a lock between processes. Each blocks up to rpc_timeout,
  // retrying on UNAVAILABLE (Release with one request_id).
  // `fencing_token` non-zero: act only on owner's hold with that token (the
  // token its acquire returned), so that a late or repeated call never
  // touches a hold the owner took again since; zero: any hold of the owner.
  // Errors: kFailedPrecondition + IsLockLost() when `owner` does not hold the
  // lock (or holds it with another token: nothing changed);
  // kInvalidArgument, kUnavailable, kDeadlineExceeded as usual.
  absl::StatusOr<ReleaseOutcome> Release(absl::string_view name, absl::string_view owner,
                                         absl::string_view ns = "", uint64_t fencing_token = 0);
  // Undoes the Acquire of `owner` whose request_id is `acquire_request_id`
  // (from UnconfirmedAcquireRequestId, or one a tool recorded): if it is the
  // owner's last request on the lock and it added a hold, that hold is given
  // back (with a non-zero `fencing_token`, only if the hold has that token);
  // otherwise nothing changes. Blocks up to rpc_timeout, retrying on
  // UNAVAILABLE (a repeat is harmless: the undo becomes the owner's last
  // request). OK whether or not there was a hold to give back: hold_count is
  // what the owner holds now, released is true if the lock became free.
  // Errors: kInvalidArgument (e.g. an empty or too long id), kUnavailable,
  // kDeadlineExceeded.
  absl::StatusOr<ReleaseOutcome> UndoAcquire(absl::string_view name, absl::string_view owner,
                                             absl::string_view acquire_request_id,
                                             absl::string_view ns = "", uint64_t fencing_token = 0);
  // ttl zero: the server's default lease. `fencing_token` as for Release.
  absl::StatusOr<RenewOutcome> Renew(absl::string_view name, absl::string_view owner,
                                     absl::Duration ttl, absl::string_view ns = "",
                                     uint64_t fencing_token = 0);

  // One lock's state (held == false when free). Blocks up to rpc_timeout.
  absl::StatusOr<LockInfo> Describe(absl::string_view name, absl::string_view ns = "");
  // One page of held locks. Blocks up to rpc_timeout.
  absl::StatusOr<ListPage> List(const ListOptions& options = {});

  // Operators only (the `admin` permission): frees the lock whatever its
  // owner and hold count; `reason` (required) goes to lockd's audit log.
  // With a non-zero `fencing_token` only the holding with that token is
  // freed. One attempt (never retried: without a token, a retry could free
  // the next holder), bounded by rpc_timeout.
  // OK: released, or released == false if the lock was free.
  // kFailedPrecondition: the holder's token is not `fencing_token`.
  // kPermissionDenied / kUnauthenticated: not allowed; kInvalidArgument,
  // kUnavailable, kDeadlineExceeded as usual.
  absl::StatusOr<ForceReleaseOutcome> ForceRelease(absl::string_view name, absl::string_view reason,
                                                   uint64_t fencing_token = 0,
                                                   absl::string_view ns = "");

 private:
  friend class Lockable;
  friend class Semaphore;
  // Another handle on `core`'s connection (for a Lockable).
  explicit Client(std::shared_ptr<client_internal::ClientCore> core);
  std::shared_ptr<client_internal::ClientCore> core_;
};

// The largest semaphore limit lockd takes.
inline constexpr uint32_t kMaxSemaphoreLimit = 10000;

// A leased semaphore: the name `name` with `limit` permits, shared by every
// owner that acquires it with the same limit
// (docs/api.md "Shared locks, semaphores and all-or-nothing acquires").
// Owners whose permits add up to at most `limit` hold it at once; a waiting
// acquire is granted in FIFO order (a large request at the head holds back
// later small ones). Each
// Lease is one owner's permits with its own lease and fencing token; it is
// renewed, lost, released and undone as any Lease.
//
// A Semaphore is a handle (no state on the server of its own): cheap to
// copy, thread-safe, and it keeps its Client's connection alive.
class Semaphore {
 public:
  // `limit` 1-10,000 (checked by Acquire), fixed for the handle's life.
  Semaphore(const Client& client, std::string name, uint32_t limit, std::string ns = "");

  const std::string& name() const { return name_; }
  uint32_t limit() const { return limit_; }

  // Takes `permits` (1-limit) of the semaphore, waiting up to options.wait
  // (options.ns is ignored: the handle's namespace applies). Blocks,
  // returns and undoes as Client::Acquire, plus, at once and whatever the
  // wait, kFailedPrecondition with ErrorReason LOCK_KIND_MISMATCH (the name
  // is held as a lock, or as a semaphore of another limit) or
  // PERMITS_MISMATCH (this owner holds it with other permits: a reentrant
  // acquire must ask the same permits). kInvalidArgument (nothing sent)
  // for a limit or permits out of range.
  absl::StatusOr<Lease> Acquire(uint32_t permits = 1, AcquireOptions options = {});
  // Acquire with options.wait = 0.
  absl::StatusOr<Lease> TryAcquire(uint32_t permits = 1, AcquireOptions options = {});

 private:
  std::shared_ptr<client_internal::ClientCore> core_;
  std::string name_;
  std::string ns_;
  uint32_t limit_;
};

}  // namespace lockd

#endif  // LOCKD_CLIENT_H_
