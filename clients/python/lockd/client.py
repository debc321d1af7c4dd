"""lockd Python client: leased, auto-renewed, fenced locks over gRPC.

    import lockd

    client = lockd.Client("127.0.0.1:7411")
    with client.lock("orders/42", ttl=10, wait=5) as lease:
        charge(order, fencing_token=lease.fencing_token)

Sessions (the default, ``use_sessions=True``; docs/api.md "Sessions"): a
Client binds its locks to one Session stream, opened by the first acquire,
with open.owner = the Client's owner, keep_on_disconnect (the
``keep_on_disconnect`` argument, default True) and one lease: the ttl of
that first acquire (none: lockd's default). acquire() and release() are
operations on that stream; what changes:

* lockd renews the leases while the stream is open: no watchdog thread, no
  Renew calls. ``lease.valid_until`` is infinite while the stream is open.
* A lease is lost (``lease.lost`` set, ``on_lost`` called once) when lockd
  sends ``lost`` (reason LEASE_EXPIRED, FORCE_RELEASED or NOT_HELD).
* A waiting acquire whose deadline passes, or that is interrupted, is
  cancelled in lockd (it leaves no hold once lockd answers CANCELLED).
* When the stream breaks (lockd restarted, connection lost) the client
  reconnects with capped, jittered backoff and resumes its live leases
  (open.resume); those lockd does not return are lost (LOCK_NOT_HELD). Until
  resumed a lease is valid until ``break - K + ttl*2/3 - drift`` (then lost,
  VALIDITY_EXPIRED): lockd renews every ttl/3 and was alive at ``break - K``
  or later. Operations in flight at the break fail like an UNAVAILABLE call
  (an acquire is undone, see "No hold left behind").
* K = keepalive_time + keepalive_timeout: the channel pings lockd (HTTP/2
  keepalive), so one that hangs without closing the connection (stopped,
  partitioned) breaks the stream within K. Until then the lease looks valid,
  so the session is only used when ttl*2/3 - drift > K (ttl > 6.1 s with
  the defaults, K = 4 s): a shorter ttl goes unary (watchdog, send-time
  validity), as does every acquire once the session learnt that the lease
  lockd granted it is too short.
* With keep_on_disconnect=True a client that vanishes (killed, partitioned)
  keeps its locks until their lease ends, so that a reconnect can resume
  them; with False lockd releases them as soon as the stream breaks, and a
  break makes every lease lost (SESSION_ENDED).
* close() ends the stream as a break would: holds (detached ones included)
  end with their lease, or at once without keep_on_disconnect.
* The unary RPCs are used instead for an acquire with auto_renew=False, with
  an ``owner`` other than the Client's (a session acts for one owner), or
  with a ttl other than the session's lease (asked or granted: a session
  has one lease; an acquire without a ttl takes the session's), for
  everything but acquire/release, for undoing uncertain acquires, and for
  the whole Client with ``use_sessions=False`` or when lockd does not
  implement Session (UNIMPLEMENTED). lockd._paths has the whole table, the
  same in every lockd client (clients/testdata/acquire_paths.json).

Guarantees (the same as the C++ client, lockd::Client; the watchdog and
send-time validity apply to leases of the unary path):

* Validity from the send time: a lease's client-side deadline is
  ``send_time + ttl - drift`` where send_time is when the granting Acquire or
  Renew was *sent* (time.monotonic()), never when its reply arrived, so it is
  never later than the server's expiry. drift = ttl * clock_drift_factor +
  min_clock_drift.
* Watchdog: leases with ``auto_renew`` (the default) are renewed every ttl/3
  by one background thread per Client (not a thread per lease).
* Lost detection: a Renew answering LOCK_NOT_HELD, a Renew reporting another
  fencing token, or the validity deadline passing because renewals kept
  failing makes the lease lost: ``lease.lost`` (a threading.Event) is set,
  ``on_lost`` is called once, and ``release()`` / leaving the ``with`` block
  raise LockLost.
* Safe retries: Acquire and Release carry a request_id and are retried on
  UNAVAILABLE with capped, jittered backoff inside the caller's deadline. A
  Release keeps its request_id (the server answers a repeat with the first
  result, so a lost reply never decrements twice).
* Releases and renewals name their hold: ``release()`` (unary or over a
  session), ``renew()`` and the watchdog's renewals carry the lease's
  fencing_token, so one that reaches lockd late, after the owner released and
  acquired the lock again (a new token), changes nothing: LockLost, and the
  later hold stays. A reentrant lease has the first hold's token.
* No hold left behind: when the client cannot learn what became of an
  Acquire attempt (its deadline passed, it was interrupted, or it ended with
  UNAVAILABLE or another transport error after the request may have been
  sent), it undoes that attempt before it retries or raises: a Release with
  the same owner and ``acquire_request_id`` = the attempt's request_id
  (docs/api.md, "Uncertain outcomes"), which gives back the hold that
  attempt added, if any, and nothing else. The undo is bounded by
  min(rpc_timeout, release_timeout), retried on UNAVAILABLE within that, and
  runs even when the caller's deadline has passed. A retry after a confirmed
  undo uses a new request_id (a late give-back of the old attempt cannot
  touch the new hold); after an unconfirmed one it keeps the same request_id,
  so the server answers it with the first result and the hold count cannot
  double. So an acquire() that succeeds adds exactly one hold however many
  attempts it took, and one that fails leaves none unless the undo itself went
  unanswered: then the error's ``unconfirmed_acquire_request_id`` names the
  attempt (its hold, if any, ends with its lease, or now with
  ``client.undo_acquire()``). Needs a lockd that knows acquire_request_id.

Owners: a Client has one owner id (random per Client unless given), which is
also its session's owner. Locks are reentrant per owner, so threads sharing a
Client and taking the same lock all get it; use one Client per thread (or
pass ``owner=``) for mutual exclusion between threads.

Thread-safety: Client and Lease methods may be called from any thread.
"""

# The exceptions are in lockd.errors, LockInfo in lockd._values, what the
# Client shares with its helpers (stub, timeouts, drift, retries, releases)
# in lockd._core, the lease-validity formulas in lockd._validity, one
# acquire's request, retries and undo in lockd._acquire, the lease state and
# watchdog thread in lockd._watchdog, the Session stream in lockd._session;
# this module is the public Client and Lease, and the choice of path.

import logging
import os
import threading
import time
import weakref
from typing import Callable, Iterator, List, Optional, Sequence, Tuple, Union

import grpc

from lockd._acquire import AcquireCall
from lockd._auth import BearerTokenInterceptor
from lockd._auth import bearer_token as resolve_token
from lockd._cancel import Cancellation
from lockd._core import ClientCore
from lockd._handles import (
    LeaseSetView,
    LeaseView,
    check_acquire_args,
    proto_specs,
    semaphore_spec,
)
from lockd._proto.lockd.v1 import lock_pb2, lock_pb2_grpc
from lockd._paths import choose_session
from lockd._session import _Session
from lockd._target import keepalive_window, open_channel
from lockd._validity import unary_valid_until
from lockd._values import (
    SHARED,
    Holder,
    LockInfo,
    LockSpec,
    _lock_info_from_proto,
    _mode_from_proto,
    _new_owner,
    _seconds,
    _set_duration,
)
from lockd._watchdog import _LeaseState, _Watchdog
from lockd.errors import (  # noqa: F401 (re-exported)
    Cancelled,
    LockdError,
    LockLost,
    LockNotAcquired,
    Unavailable,
    _describe,
    _translate,
)

__all__ = [
    "Client", "Lease", "LeaseSet", "Semaphore", "LockInfo", "LockSpec", "Holder", "LockdError",
    "LockNotAcquired", "LockLost", "Unavailable", "Cancelled", "Cancellation", "DEFAULT_SERVER",
]

DEFAULT_SERVER = "127.0.0.1:7411"
_log = logging.getLogger("lockd")


def _unary_attempt(rpc, request, timeout: float, cancel: Optional[Cancellation]):
    """One unary Acquire (or AcquireAll) attempt; ``cancel`` cancels the
    call in flight: raises lockd.Cancelled (the caller undoes the attempt)."""
    if cancel is None:
        return rpc(request, timeout=timeout)
    future = rpc.future(request, timeout=timeout)
    stop = cancel.on_cancel(future.cancel)
    try:
        return future.result()
    except grpc.FutureCancelledError:
        raise Cancelled("lockd acquire cancelled") from None
    except grpc.RpcError as e:
        if e.code() == grpc.StatusCode.CANCELLED and cancel.cancelled:
            raise Cancelled("lockd acquire cancelled") from None
        raise
    finally:
        stop()


# --------------------------------------------------------------------------- Lease

class Lease(LeaseView):
    """One hold of one owner on (namespace, name).

    Use it as a context manager (``with client.lock(...) as lease``) or call
    ``release()``. A Lease that is garbage-collected while still active stops
    renewing and is released in the background (best effort).

    Attributes: name, namespace, owner, fencing_token (pass it to the protected
    resource with every write), hold_count (after this acquire), ttl (seconds,
    as granted), lost (threading.Event, set once the lease is lost), mode,
    limit and permits (the kind asked for).
    """

    def __init__(self, state: _LeaseState, watchdog: _Watchdog):
        self._state = state
        self._watchdog = watchdog
        abandon = (state.session.release_async if state.session is not None
                   else watchdog.abandon)
        self._finalizer = weakref.finalize(self, abandon, state)
        self._finalizer.atexit = False

    def renew(self) -> None:
        """Renews now (normally the watchdog does it).

        Raises LockLost if the lease is lost (now marked so), LockdError if the
        Lease is no longer active, Unavailable if lockd did not answer (the
        lease is unchanged)."""
        deadline = self._renew_deadline()
        self._watchdog.renewed(self._state, self._state.renew(deadline))

    def release(self, timeout: Optional[float] = None) -> None:
        """Stops renewing and gives up this hold (retried on UNAVAILABLE with one
        request_id, for up to ``timeout`` seconds, default the client's
        rpc_timeout). The Lease is inactive afterwards whatever happens.

        Raises LockLost if the lease had been lost (nothing is sent then),
        LockdError if already released or detached, Unavailable if lockd did not
        answer in time (the hold ends with its lease)."""
        s = self._state
        self._watchdog.remove(s)
        self._finalizer.detach()
        s.start_release()
        timeout = s.core.rpc_timeout if timeout is None else timeout
        try:
            s.core.release_hold(s.namespace, s.name, s.owner, s.fencing_token,
                                time.monotonic() + timeout, s.session)
        except LockLost as e:
            raise s.release_refused(e) from None

    def detach(self) -> None:
        """Stops renewing and tracking without releasing: the hold stays until
        its lease ends or someone releases it with ``owner``."""
        self._state.end(time.monotonic())
        self._watchdog.remove(self._state)
        if self._state.session is not None:
            self._state.session.forget(self._state)
        self._finalizer.detach()

    def __enter__(self) -> "Lease":
        return self

    def __exit__(self, exc_type, exc, tb) -> bool:
        if not self._state.active:
            return False
        if exc_type is not None:
            try:
                self.release(self._state.core.release_timeout)
            except LockdError:
                pass  # don't mask the block's own exception
            return False
        self.release(self._state.core.release_timeout)  # raises LockLost if lost
        return False


class LeaseSet(LeaseSetView):
    """The leases of one Client.acquire_all(), one per lock in the order
    given (index it, iterate it). Each is renewed, lost and released on its
    own. As a context manager it releases every active lease on exit (all of
    them even when one fails; then the first error is raised, unless the
    block raised)."""

    def release(self, timeout: Optional[float] = None) -> None:
        """Releases every active lease (each as Lease.release()); raises the
        first error after trying them all."""
        first: Optional[LockdError] = None
        for lease in self.leases:
            if not lease.active:
                continue
            try:
                lease.release(timeout)
            except LockdError as e:
                first = first or e
        if first is not None:
            raise first

    def __enter__(self) -> "LeaseSet":
        return self

    def __exit__(self, exc_type, exc, tb) -> bool:
        first: Optional[LockdError] = None
        for lease in self.leases:
            try:
                lease.__exit__(exc_type, exc, tb)
            except LockdError as e:
                first = first or e
        if first is not None:
            raise first
        return False


class Semaphore:
    """A leased semaphore: the name ``name`` with ``limit`` permits
    (1-10,000), shared by every owner that acquires it with the same limit.
    Owners whose permits add up to at most ``limit`` hold it at once; waiting
    acquires are granted in FIFO order (a large request at the head holds
    back later small ones). Each Lease is one owner's permits, with its own
    lease and fencing token. A handle (no state of its own); thread-safe.
    Made by Client.semaphore()."""

    def __init__(self, client: "Client", name: str, limit: int, namespace: Optional[str]):
        self.client, self.name, self.limit, self.namespace = client, name, limit, namespace

    def acquire(self, permits: int = 1, **kwargs) -> Lease:
        """Takes ``permits`` (1-limit), waiting up to ``wait``; keyword
        arguments as Client.acquire() (but not namespace). Raises as
        Client.acquire(), LockdError with reason LOCK_KIND_MISMATCH (the name
        is held as a lock, or as a semaphore of another limit) or
        PERMITS_MISMATCH (this owner holds it with other permits), at once
        whatever the wait; INVALID_ARGUMENT (nothing sent) for a limit or
        permits out of range."""
        spec = semaphore_spec(self.name, self.limit, permits, self.namespace)
        return self.client._acquire([spec], False, namespace=self.namespace, **kwargs)[0]

    def try_acquire(self, permits: int = 1, **kwargs) -> Lease:
        """acquire() with wait=0."""
        kwargs["wait"] = 0
        return self.acquire(permits, **kwargs)

    def hold(self, permits: int = 1, **kwargs) -> "_LockContext":
        """``with sem.hold(2, wait=5) as lease:``: acquire() on entry, release
        on exit."""
        return _LockContext(lambda: self.acquire(permits, **kwargs))


class _LockContext:
    """What Client.lock() and its kin return: acquires on enter (a Lease or
    a LeaseSet), releases on exit."""

    def __init__(self, acquire: Callable[[], Union[Lease, LeaseSet]]):
        self._acquire = acquire
        self._held: Optional[Union[Lease, LeaseSet]] = None

    def __enter__(self):
        self._held = self._acquire()
        return self._held

    def __exit__(self, exc_type, exc, tb) -> bool:
        held, self._held = self._held, None
        return held.__exit__(exc_type, exc, tb)


# --------------------------------------------------------------------------- Client

class Client:
    """A connection to lockd. Thread-safe. Use as a context manager or call
    close(); closing does not release outstanding leases (they end with their
    lease once renewal stops; see close() for sessions without
    keep_on_disconnect).

    Args:
      target: one lockd or several replicas, balanced with round_robin (see
        _target.channel_target): a gRPC target ("host:port", "dns:///name:port")
        or a list "host1:port1,host2:port2". Default: $LOCKD_SERVER, else
        127.0.0.1:7411. ValueError for a malformed or unresolvable entry.
      owner: owner id for every lock of this Client (default: random per Client).
      namespace: default namespace (default: the server's "default").
      credentials: grpc.ChannelCredentials for TLS (default: plaintext);
        ``lockd.tls_credentials(ca_file, cert_file, key_file)`` makes them,
        with a client certificate for mutual TLS.
      bearer_token: sent as ``authorization: Bearer TOKEN`` with every call
        (lockd's ``auth.tokens_file``); never logged. Default:
        $LOCKD_AUTH_TOKEN.
      bearer_token_file: file whose first line is the token (used when
        bearer_token is not given). Default: $LOCKD_AUTH_TOKEN_FILE.
      server_name: with credentials, the name to verify in the server's
        certificate instead of the target's host.
      channel: an existing grpc.Channel (then target/credentials are unused).
      rpc_timeout: seconds for calls that do not wait (release, renew,
        describe, list), retries included; also the slack an acquire gets
        beyond its wait.
      release_timeout: seconds for releases done when leaving a ``with`` block;
        capped at rpc_timeout, also the bound on the undo of an acquire attempt
        whose outcome the client did not learn.
      initial_backoff, max_backoff: bounds of the jittered backoff between
        retries and session reconnects, in seconds.
      use_sessions: acquire and release over a Session stream (see the
        module docstring); False: the unary RPCs only.
      keep_on_disconnect: the session asks lockd to keep its holds to their
        lease when the stream breaks (so a reconnect resumes them) instead of
        releasing them at once.
      keepalive_time, keepalive_timeout: HTTP/2 pings every keepalive_time
        seconds (>= 1.0); a ping unanswered for keepalive_timeout (> 0)
        drops the connection, so a hung lockd breaks the session within
        K = their sum (see the module docstring); ValueError when out of
        range. Not applied to a given ``channel``, but K still rules validity.
    """

    def __init__(self, target: Optional[str] = None, *, owner: Optional[str] = None,
                 namespace: str = "", credentials: Optional[grpc.ChannelCredentials] = None,
                 server_name: Optional[str] = None, channel: Optional[grpc.Channel] = None,
                 bearer_token: Optional[str] = None, bearer_token_file: Optional[str] = None,
                 rpc_timeout: float = 10.0, release_timeout: float = 2.0,
                 initial_backoff: float = 0.05, max_backoff: float = 2.0,
                 clock_drift_factor: float = 0.01, min_clock_drift: float = 0.002,
                 use_sessions: bool = True, keep_on_disconnect: bool = True,
                 keepalive_time: float = 2.0, keepalive_timeout: float = 2.0):
        hang_bound = keepalive_window(keepalive_time, keepalive_timeout)
        self.target = target or os.environ.get("LOCKD_SERVER") or DEFAULT_SERVER
        self._own_channel = channel is None
        if channel is None:
            channel = open_channel(grpc, self.target, credentials, server_name, keepalive_time,
                                   keepalive_timeout)
        self._channel = channel
        # Watching connectivity keeps one of grpcio's threads polling the
        # channel. Without it nothing drives reconnection between calls (only
        # gRPC's 5 s backup poller), and a server that comes back would be
        # seen seconds late: too late for short leases.
        self._connectivity = None
        self._channel.subscribe(self._on_connectivity, try_to_connect=False)
        token = resolve_token(bearer_token, bearer_token_file)
        if token:
            channel = grpc.intercept_channel(channel, BearerTokenInterceptor(token))
        # What the session, the watchdog and the leases share.
        self._core = ClientCore(
            lock_pb2_grpc.LockServiceStub(channel), owner=owner or _new_owner(),
            namespace=namespace, rpc_timeout=rpc_timeout, release_timeout=release_timeout,
            initial_backoff=initial_backoff, max_backoff=max_backoff,
            clock_drift_factor=clock_drift_factor, min_clock_drift=min_clock_drift,
            hang_bound=hang_bound)
        self._watchdog = _Watchdog(self._core)
        self._use_sessions = use_sessions
        self._keep_on_disconnect = keep_on_disconnect
        self._session_mu = threading.Lock()
        self._session: Optional[_Session] = None  # lockd._paths: one per Client

    # Kept in the core, which the session reads at each open.
    owner = property(lambda self: self._core.owner,
                     lambda self, owner: setattr(self._core, "owner", owner),
                     doc="The owner id of this Client's locks and session.")
    namespace = property(lambda self: self._core.namespace,
                         lambda self, ns: setattr(self._core, "namespace", ns),
                         doc='The default namespace ("": the server\'s, "default").')

    # -- lifecycle

    def close(self) -> None:
        """Ends the session, stops the watchdog and closes the channel (if
        this Client made it). Holds are not released: those of unary leases
        end with their lease once renewal stops, and so do those of session
        leases with keep_on_disconnect; without it lockd frees them at once
        (their leases become lost, CLIENT_CLOSED)."""
        with self._session_mu:
            session, self._session = self._session, None
            self._use_sessions = False
        if session is not None:
            session.close(self._core.rpc_timeout)
        self._watchdog.stop()
        self._channel.unsubscribe(self._on_connectivity)
        if self._own_channel:
            self._channel.close()

    def __enter__(self) -> "Client":
        return self

    def __exit__(self, *exc) -> bool:
        self.close()
        return False

    # -- locks

    def lock(self, name: str, *, ttl: Optional[float] = None, wait: float = 0,
             timeout: Optional[float] = None, namespace: Optional[str] = None,
             owner: Optional[str] = None, auto_renew: bool = True,
             on_lost: Optional[Callable[[LockLost], None]] = None,
             cancel: Optional[Cancellation] = None) -> _LockContext:
        """``with client.lock(name, ttl=10, wait=5) as lease:`` acquires on entry
        (see acquire()) and releases on exit; if the lease was lost meanwhile,
        the exit raises LockLost (unless the block raised)."""
        return _LockContext(lambda: self.acquire(name, ttl=ttl, wait=wait, timeout=timeout,
                                                 namespace=namespace, owner=owner,
                                                 auto_renew=auto_renew, on_lost=on_lost,
                                                 cancel=cancel))

    def acquire(self, name: str, *, ttl: Optional[float] = None, wait: float = 0,
                timeout: Optional[float] = None, namespace: Optional[str] = None,
                owner: Optional[str] = None, auto_renew: bool = True,
                on_lost: Optional[Callable[[LockLost], None]] = None,
                cancel: Optional[Cancellation] = None) -> Lease:
        """Takes the lock, waiting up to ``wait`` seconds while another owner
        holds it.

        ttl: lease in seconds (default: the server's, 30 s unless configured);
          over the session only if ttl*2/3 - drift > K and it is the
          session's lease (see the module docstring).
        timeout: overall seconds for the call, retries included (default
          wait + rpc_timeout).
        auto_renew: keep the lease alive (lockd renews it over the session;
          on the unary path the watchdog thread renews every ttl/3). False:
          the unary path, the lease ends with its ttl unless renewed.
        owner: acquire for this owner instead of the Client's (unary path).
        on_lost: called once with the LockLost when the lease is lost while
          active: for a session lease on a thread of its own, otherwise on
          the watchdog thread or the thread that noticed.
        cancel: a lockd.Cancellation whose cancel(), from any thread, ends
          the call (raising lockd.Cancelled, nothing of it held).

        Returns an active Lease. If the grant came so late that a renewal was
        already due (a long wait), it is renewed before returning.
        Raises LockNotAcquired (not acquired in time; ``holder`` says who has
        it), Cancelled (by ``cancel``), Unavailable, LockLost (granted, but
        the lease ended before the post-wait renewal), LockdError (e.g. INVALID_ARGUMENT). Whatever it
        raises (KeyboardInterrupt included), no hold of this call remains,
        unless the error's ``unconfirmed_acquire_request_id`` is set (see the
        module docstring). Past ``timeout`` the call may block for that undo
        (up to min(rpc_timeout, release_timeout)) or for the post-wait renewal
        (up to min(rpc_timeout, ttl/3))."""
        return self._acquire([LockSpec(name, namespace)], False, ttl=ttl, wait=wait,
                             timeout=timeout, namespace=namespace, owner=owner,
                             auto_renew=auto_renew, on_lost=on_lost, cancel=cancel)[0]

    def acquire_shared(self, name: str, **kwargs) -> Lease:
        """acquire() of the lock SHARED (a reader of a read-write lock):
        together with other shared holders, never with an exclusive one.
        FIFO across modes: behind an exclusive acquire that waits, a shared
        one waits too (writers never starve). An owner holding the lock
        exclusive gets a reentrant exclusive hold. Raises as acquire(), and
        LockdError with reason LOCK_KIND_MISMATCH (at once, whatever
        ``wait``) when the name is held as a semaphore.

        The other way round, acquire() by an owner holding the lock shared
        (an upgrade) is granted at once when it is the only holder and
        nobody waits, else raises LockdError with reason UPGRADE_WOULD_BLOCK
        at once: release the shared hold and acquire exclusive instead."""
        return self._acquire([LockSpec(name, kwargs.get("namespace"), SHARED)], False,
                             **kwargs)[0]

    def shared_lock(self, name: str, **kwargs) -> "_LockContext":
        """``with client.shared_lock(name, wait=5) as lease:``: acquire_shared()
        on entry, release on exit (as lock())."""
        return _LockContext(lambda: self.acquire_shared(name, **kwargs))

    def acquire_all(self, locks: Sequence[Union[str, LockSpec]], **kwargs) -> "LeaseSet":
        """Takes every lock of ``locks`` (1-64 names or LockSpecs, no
        (namespace, name) twice) for one owner, all or nothing, in one
        AcquireAll call (over the session when acquire() would use it).
        Keyword arguments as acquire(); ``namespace`` is that of a LockSpec
        without one. lockd takes the locks in (namespace, name) order within
        the one ``wait``, so two callers never deadlock whatever order they
        list them in. Returns a LeaseSet: one Lease per lock, in the order
        given, each renewed, lost and released on its own. Raises as
        acquire(): LockNotAcquired (``holder``: the lock that was held;
        nothing is held), LockdError with the reason of a kind refusal.
        An attempt whose outcome is unknown is undone on every lock."""
        specs = [LockSpec(x) if isinstance(x, str) else x for x in locks]
        return LeaseSet(self._acquire(specs, True, **kwargs))

    def lock_all(self, locks: Sequence[Union[str, LockSpec]], **kwargs) -> "_LockContext":
        """``with client.lock_all(["a", "b"], wait=5) as leases:``:
        acquire_all() on entry, every lease released on exit."""
        return _LockContext(lambda: self.acquire_all(locks, **kwargs))

    def semaphore(self, name: str, limit: int, *,
                  namespace: Optional[str] = None) -> "Semaphore":
        """A handle on the semaphore ``name`` of ``limit`` permits (1-10,000)."""
        return Semaphore(self, name, limit, namespace)

    def _acquire(self, specs: List[LockSpec], all_locks: bool, *, ttl: Optional[float] = None,
                 wait: float = 0, timeout: Optional[float] = None,
                 namespace: Optional[str] = None, owner: Optional[str] = None,
                 auto_renew: bool = True,
                 on_lost: Optional[Callable[[LockLost], None]] = None,
                 cancel: Optional[Cancellation] = None) -> List[Lease]:
        """The one acquire of every kind: ``specs`` (one, or all of them with
        AcquireAll) on the path _choose_path picks."""
        check_acquire_args(ttl, wait, timeout)
        if cancel is not None:
            cancel.check()  # nothing sent
        locks = proto_specs(specs, namespace, self._ns)
        session = self._choose_path(ttl, owner, auto_renew)
        call = AcquireCall(self._core, locks, owner or self.owner, ttl, wait, timeout,
                           all_locks)
        if session is not None:
            states = self._acquire_over_session(session, call, on_lost, cancel)
            if states is not None:
                return [Lease(state, self._watchdog) for state in states]
        return self._acquire_unary(call, ttl, auto_renew, on_lost, cancel)

    # The one choice of path: lockd._paths (its table).
    def _choose_path(self, ttl: Optional[float], owner: Optional[str],
                     auto_renew: bool) -> Optional[_Session]:
        """The session to acquire over, or None for the unary RPCs
        (lockd._paths)."""
        with self._session_mu:
            self._session, chosen = choose_session(
                self._session, lambda asked: _Session(self._core, asked, self._keep_on_disconnect),
                ttl=ttl, owner=owner, client_owner=self.owner, auto_renew=auto_renew,
                use_sessions=self._use_sessions, session_safe=self._core.session_safe)
            return chosen

    def _acquire_over_session(self, session: _Session, call: AcquireCall, on_lost,
                              cancel: Optional[Cancellation]) -> Optional[List[_LeaseState]]:
        """The session path: ``call`` as operations on the stream of
        ``session``, which keeps the lease (lockd renews it while the stream
        is open). Returns the lease's state, or None when lockd does not
        implement Session (UNIMPLEMENTED, nothing sent): the Client is unary
        from then on and the caller goes on with ``call`` on that path."""
        undo_bound = self._core.undo_timeout()
        try:
            resp, states = call.send(
                lambda t: session.acquire(call.request, t, undo_bound, on_lost, cancel), cancel)
        except grpc.RpcError as e:
            if e.code() == grpc.StatusCode.UNIMPLEMENTED:
                self._use_sessions = False
                return None
            raise call.failure(e) from None
        call.check_granted(resp)
        return states

    def _acquire_unary(self, call: AcquireCall, ttl: Optional[float], auto_renew: bool,
                       on_lost, cancel: Optional[Cancellation]) -> List[Lease]:
        """The unary path: Acquire (or AcquireAll) RPCs (``call`` retries
        them and undoes attempts of unknown outcome), validity from the
        granting attempt's send time, a renewal at once when the wait used up
        a third of the lease (_renew_late_grant), and the watchdog for the
        rest. Each lock of an AcquireAll is a grant of its own; if one cannot
        be used, the others are given back (all or nothing)."""
        rpc = self._core.stub.AcquireAll if call.all else self._core.stub.Acquire
        try:
            resp = call.send(lambda t: _unary_attempt(rpc, call.request, t, cancel), cancel)
        except grpc.RpcError as e:
            raise call.failure(e) from None
        responses = call.check_granted(resp)
        grants = []  # (spec, response, granted ttl, valid_until, renew_at)
        for i, (spec, r) in enumerate(zip(call.locks, responses)):
            try:
                granted = _seconds(r.lease_ttl) if r.HasField("lease_ttl") else (ttl or 0)
                if granted <= 0:
                    raise LockdError("lockd acquire of %s: the server granted the lock without "
                                     "a lease_ttl" % _describe(spec.namespace, spec.name),
                                     grpc.StatusCode.INTERNAL)
                valid_until, renew_at = self._renew_late_grant(call, spec, r, granted, auto_renew)
            except LockdError:
                for j, (other, o) in enumerate(zip(call.locks, responses)):
                    if j != i:
                        self._give_back(other, call.owner, o.fencing_token)
                raise
            grants.append((spec, r, granted, valid_until, renew_at))
        leases = []
        for spec, r, granted, valid_until, renew_at in grants:
            state = _LeaseState(self._core, spec.namespace, spec.name, call.owner,
                                r.fencing_token, r.hold_count, granted, auto_renew,
                                valid_until, on_lost, _mode_from_proto(spec.mode), spec.limit,
                                spec.permits)
            self._watchdog.add(state, renew_at)
            leases.append(Lease(state, self._watchdog))
        return leases

    def _give_back(self, spec: lock_pb2.LockSpec, owner: str, token: int) -> None:
        """Best effort release of a grant that is not handed out."""
        try:
            self._core.release_hold(spec.namespace, spec.name, owner, token,
                                    time.monotonic() + self._core.release_timeout)
        except LockdError:
            pass

    def _renew_late_grant(self, call: AcquireCall, spec: lock_pb2.LockSpec,
                          resp: lock_pb2.AcquireResponse,
                          granted: float, auto_renew: bool) -> Tuple[float, float]:
        """(valid_until, first renewal) of a unary grant of ``spec`` for
        ``granted`` seconds. After a long wait most of the validity measured
        from the send time may be gone although the grant is fresh: when a
        renewal is already due (or the validity has passed) it renews now.
        Raises LockLost if the lease ended meanwhile; Unavailable (after
        releasing the hold) if it could not be renewed before its validity
        passed."""
        core, ns, name = self._core, spec.namespace, spec.name
        valid_until = unary_valid_until(call.send_time, granted, core.drift(granted))
        renew_at = call.send_time + granted / 3
        now = time.monotonic()
        if not ((auto_renew and now >= renew_at) or now >= valid_until):
            return valid_until, renew_at
        rreq = lock_pb2.RenewRequest(namespace=ns, name=name, owner=call.owner,
                                     fencing_token=resp.fencing_token)
        _set_duration(rreq.lease_ttl, granted)
        rsend = time.monotonic()
        try:
            rresp = core.stub.Renew(
                rreq, timeout=max(call.deadline - rsend, min(core.rpc_timeout, granted / 3)))
            if rresp.fencing_token != resp.fencing_token:
                raise LockLost("lockd acquire of %s: the grant was lost before it could be "
                               "renewed (fencing token %d instead of %d)"
                               % (_describe(ns, name), rresp.fencing_token,
                                  resp.fencing_token), "FENCING_TOKEN_CHANGED")
            g = _seconds(rresp.lease_ttl) if rresp.HasField("lease_ttl") else granted
            return unary_valid_until(rsend, g, core.drift(g)), rsend + granted / 3
        except grpc.RpcError as e:
            err = _translate("renew", ns, name, e)
            if isinstance(err, LockLost):
                raise LockLost("lockd acquire of %s: granted, but the lease ended before "
                               "the reply could be used: %s" % (_describe(ns, name), err)) \
                    from None
            if time.monotonic() >= valid_until:
                self._give_back(spec, call.owner, resp.fencing_token)
                raise Unavailable("lockd acquire of %s: granted after waiting, but the "
                                  "lease could not be renewed: %s"
                                  % (_describe(ns, name), err)) from None
        return valid_until, renew_at

    def try_acquire(self, name: str, **kwargs) -> Lease:
        """acquire() with wait=0: one attempt (retried only on UNAVAILABLE)."""
        kwargs["wait"] = 0
        return self.acquire(name, **kwargs)

    # -- low-level operations by owner (tools, handing a lock between processes)

    def release(self, name: str, owner: str, *, namespace: Optional[str] = None,
                fencing_token: int = 0) -> Tuple[bool, int]:
        """Gives up one hold of ``owner``. Returns (released, remaining hold
        count). Raises LockLost if owner does not hold the lock. A non-zero
        ``fencing_token`` (the one its acquire returned) releases only the
        hold with that token: if owner released and acquired the lock again
        since, the newer hold stays and LockLost is raised."""
        ns = self._ns(namespace)
        return self._core.release_hold(ns, name, owner, fencing_token,
                                       time.monotonic() + self._core.rpc_timeout)

    def undo_acquire(self, name: str, owner: str, acquire_request_id: str, *,
                     namespace: Optional[str] = None, fencing_token: int = 0) -> Tuple[bool, int]:
        """Undoes owner's Acquire whose request_id is ``acquire_request_id``
        (e.g. an error's unconfirmed_acquire_request_id): if it is the owner's
        last request on the lock and it added a hold (with a non-zero
        ``fencing_token``: a hold with that token), that hold is given back;
        otherwise nothing changes (a repeat is harmless). Returns (released,
        the owner's remaining hold count) either way. Raises LockdError
        (INVALID_ARGUMENT for an empty or too long id), Unavailable."""
        if not acquire_request_id:
            raise LockdError("acquire_request_id must not be empty",
                             grpc.StatusCode.INVALID_ARGUMENT)
        ns = self._ns(namespace)
        return self._core.undo_acquire(ns, name, owner, acquire_request_id,
                                       time.monotonic() + self._core.rpc_timeout, fencing_token)

    def renew(self, name: str, owner: str, *, ttl: Optional[float] = None,
              namespace: Optional[str] = None, fencing_token: int = 0) -> Tuple[float, int]:
        """Resets owner's lease. Returns (ttl seconds, fencing token). Raises
        LockLost if owner does not hold the lock (with a non-zero
        ``fencing_token``: the hold with that token; a newer one is left
        alone)."""
        ns = self._ns(namespace)
        req = lock_pb2.RenewRequest(namespace=ns, name=name, owner=owner,
                                    fencing_token=fencing_token)
        if ttl is not None:
            _set_duration(req.lease_ttl, ttl)
        resp = self._call("renew", ns, name, self._core.stub.Renew, req)
        return _seconds(resp.lease_ttl), resp.fencing_token

    def describe(self, name: str, *, namespace: Optional[str] = None) -> LockInfo:
        """The lock's state (held=False when free)."""
        ns = self._ns(namespace)
        req = lock_pb2.DescribeRequest(namespace=ns, name=name)
        return _lock_info_from_proto(self._call("describe", ns, name, self._core.stub.Describe,
                                                req))

    def list(self, prefix: str = "", *, namespace: Optional[str] = None,
             page_size: int = 0) -> Iterator[LockInfo]:
        """Held locks whose name starts with ``prefix``, by name, fetching pages
        lazily."""
        ns = self._ns(namespace)
        token = ""
        while True:
            req = lock_pb2.ListRequest(namespace=ns, prefix=prefix, page_size=page_size,
                                       page_token=token)
            resp = self._call("list", ns, prefix + "*", self._core.stub.List, req)
            for info in resp.locks:
                yield _lock_info_from_proto(info)
            if not resp.next_page_token:
                return
            token = resp.next_page_token

    def force_release(self, name: str, reason: str, *, fencing_token: int = 0,
                      namespace: Optional[str] = None) -> Tuple[bool, LockInfo]:
        """Operators only (the ``admin`` permission): frees the lock whatever
        its owner and hold count; ``reason`` goes to lockd's audit log. With a
        non-zero ``fencing_token`` only that holding is freed (LockdError with
        code FAILED_PRECONDITION otherwise). One attempt, never retried.
        Returns (released, the lock's previous state)."""
        ns = self._ns(namespace)
        req = lock_pb2.ForceReleaseRequest(namespace=ns, name=name, reason=reason,
                                           fencing_token=fencing_token)
        try:
            resp = self._core.stub.ForceRelease(req, timeout=self._core.rpc_timeout)
        except grpc.RpcError as e:
            raise _translate("force-release", ns, name, e) from None
        return resp.released, _lock_info_from_proto(resp.previous)

    # -- internals

    def _on_connectivity(self, state: grpc.ChannelConnectivity) -> None:
        self._connectivity = state

    def _ns(self, namespace: Optional[str]) -> str:
        return (self.namespace if namespace is None else namespace) or "default"

    def _call(self, what: str, ns: str, name: str, rpc, req):
        """rpc(req), a call that does not wait, retried on UNAVAILABLE within
        rpc_timeout; its error translated (``what`` of ``name``)."""
        try:
            return self._core.call_with_retry(time.monotonic() + self._core.rpc_timeout,
                                              lambda t: rpc(req, timeout=t))
        except grpc.RpcError as e:
            raise _translate(what, ns, name, e) from None
