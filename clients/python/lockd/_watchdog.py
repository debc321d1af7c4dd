"""The state of a held lease and the one watchdog thread per Client that
renews leases every ttl/3, notices leases whose validity ran out and releases
abandoned ones. Private to the lockd package; the public Lease and Client
are in lockd.client. Both work through the Client's lockd._core.ClientCore."""

import logging
import math
import threading
import time
from typing import Callable, List, Optional, Tuple

import grpc

from lockd._core import ClientCore
from lockd._proto.lockd.v1 import lock_pb2
from lockd._validity import unary_valid_until
from lockd._values import _seconds, _set_duration
from lockd.errors import LockdError, LockLost, _describe, _translate

_log = logging.getLogger("lockd")


# --------------------------------------------------------------------------- lease state

class _LeaseState:
    """Shared by a Lease handle, the watchdog and renewals; guarded by _mu."""

    def __init__(self, core: ClientCore, namespace: str, name: str, owner: str, token: int,
                 hold_count: int, ttl: float, auto_renew: bool, valid_until: float,
                 on_lost: Optional[Callable[[LockLost], None]], mode: str = "exclusive",
                 limit: int = 0, permits: int = 0):
        self.core = core
        # The kind asked for (a semaphore's permits at least 1).
        self.mode, self.limit = mode, limit
        self.permits = max(permits, 1) if limit else 0
        self.namespace = namespace
        self.name = name
        self.owner = owner
        self.fencing_token = token
        self.hold_count = hold_count
        self.ttl = ttl
        self.drift = core.drift(ttl)
        self.auto_renew = auto_renew
        self.lost = threading.Event()
        self._mu = threading.Lock()
        self._valid_until = valid_until
        self._lost_error: Optional[LockLost] = None
        self._active = True
        self._on_lost = on_lost
        self.session = None  # the lockd._session._Session keeping it, if any
        self.renewer = None  # lockd.aio: the asyncio.Task renewing it, if any

    @property
    def valid_until(self) -> float:
        with self._mu:
            return self._valid_until

    @property
    def active(self) -> bool:
        with self._mu:
            return self._active

    @property
    def lost_error(self) -> Optional[LockLost]:
        with self._mu:
            return self._lost_error

    def mark_lost(self, error: LockLost,
                  defer: Optional[Callable[[Callable[[], None]], None]] = None) -> None:
        """First call wins; runs on_lost once if the lease is still active
        (through ``defer`` when given: the session's reader thread must not
        run user code that may wait for it)."""
        with self._mu:
            if self._lost_error is not None:
                return
            self._lost_error = error
            callback = self._on_lost if self._active else None
            self._on_lost = None
        self.lost.set()
        if callback is None:
            return

        def run() -> None:
            try:
                callback(error)
            except Exception:  # a user callback must not kill the watchdog
                _log.exception("lockd: on_lost callback for %s raised",
                               _describe(self.namespace, self.name))

        if defer is not None:
            defer(run)
        else:
            run()

    def check_expiry(self, now: float,
                     defer: Optional[Callable[[Callable[[], None]], None]] = None) -> bool:
        with self._mu:
            if self._lost_error is not None:
                return True
            if not self._active or now < self._valid_until:
                return False
        self.mark_lost(LockLost(
            "lease of %s lost: its validity ran out before a renewal succeeded (ttl %gs)"
            % (_describe(self.namespace, self.name), self.ttl), "VALIDITY_EXPIRED"), defer)
        return True

    def on_renewed(self, send_time: float, reply_time: float, granted: float,
                   token: int) -> Optional[LockLost]:
        lost = None
        with self._mu:
            if self._lost_error is None:
                if token != self.fencing_token:
                    lost = LockLost(
                        "lease of %s lost: a renewal reported fencing token %d instead of %d "
                        "(the hold ended and the lock was granted again)"
                        % (_describe(self.namespace, self.name), token, self.fencing_token),
                        "FENCING_TOKEN_CHANGED")
                elif reply_time >= self._valid_until:
                    lost = LockLost(
                        "lease of %s lost: its validity ran out before a renewal's reply arrived"
                        % _describe(self.namespace, self.name), "VALIDITY_EXPIRED")
                else:
                    self._valid_until = max(
                        self._valid_until,
                        unary_valid_until(send_time, granted, self.core.drift(granted)))
        if lost is not None:
            self.mark_lost(lost)
        return self.lost_error

    def renew_request(self) -> lock_pb2.RenewRequest:
        """The Renew of this lease: of its fencing token's hold only, never
        a newer one."""
        req = lock_pb2.RenewRequest(namespace=self.namespace, name=self.name, owner=self.owner,
                                    fencing_token=self.fencing_token)
        _set_duration(req.lease_ttl, self.ttl)
        return req

    def renew_failed(self, error: grpc.RpcError) -> LockdError:
        """The error to raise for a failed Renew (a LockLost also marks the
        lease lost)."""
        err = _translate("renew", self.namespace, self.name, error)
        if isinstance(err, LockLost):
            self.mark_lost(err)
            return self.lost_error
        return err

    def renewed(self, send_time: float, resp: lock_pb2.RenewResponse) -> None:
        """Applies a Renew's reply; raises LockLost if it says the lease is
        lost (now marked so)."""
        granted = _seconds(resp.lease_ttl) if resp.HasField("lease_ttl") else self.ttl
        lost = self.on_renewed(send_time, time.monotonic(), granted, resp.fencing_token)
        if lost is not None:
            raise lost

    def renew(self, deadline: float) -> float:
        """One Renew RPC of this lease, applied to it. Returns the send time;
        raises LockLost (lease now marked lost) or another LockdError."""
        req = self.renew_request()
        send_time = time.monotonic()
        try:
            resp = self.core.stub.Renew(req, timeout=max(deadline - send_time, 0.0))
        except grpc.RpcError as e:
            raise self.renew_failed(e) from None
        self.renewed(send_time, resp)
        return send_time

    def suspend_session(self, until: float) -> None:
        """A session lease whose stream broke: valid until ``until`` unless
        resumed."""
        with self._mu:
            self._valid_until = until

    def resume_session(self) -> None:
        """A session lease the server keeps renewing: valid until lost."""
        with self._mu:
            self._valid_until = math.inf

    def end(self, now: float) -> Tuple[bool, Optional[LockLost]]:
        """Ends the lease locally: returns (was_active, lost error or None)."""
        with self._mu:
            was_active = self._active
            if was_active and self._lost_error is None and now >= self._valid_until:
                self._lost_error = LockLost(
                    "lease of %s lost: its validity had run out (ttl %gs)"
                    % (_describe(self.namespace, self.name), self.ttl), "VALIDITY_EXPIRED")
            self._active = False
            self._on_lost = None
            error = self._lost_error
        if error is not None:
            self.lost.set()
        return was_active, error

    def start_release(self) -> None:
        """Ends the lease locally for a release() (its session stops
        tracking it). Raises LockdError if it was no longer active, its
        LockLost if it had been lost: then nothing is to be sent (the
        server's hold, if any, ends within the drift margin, and a release
        could take away a newer hold of this owner)."""
        was_active, lost = self.end(time.monotonic())
        if self.session is not None:
            self.session.forget(self)
        if not was_active:
            raise LockdError("lease of %s was already released or detached"
                             % _describe(self.namespace, self.name))
        if lost is not None:
            raise lost

    def release_refused(self, error: LockLost) -> LockLost:
        """The error of a release() that lockd answered LOCK_NOT_HELD."""
        lost = LockLost("lease of %s had been lost before release(): %s"
                        % (_describe(self.namespace, self.name), error), "LOCK_NOT_HELD")
        self.set_lost_after_end(lost)
        return lost

    def set_lost_after_end(self, error: LockLost) -> None:
        with self._mu:
            if self._lost_error is None:
                self._lost_error = error
        self.lost.set()


# --------------------------------------------------------------------------- watchdog

class _Watchdog:
    """One daemon thread per Client: renews auto-renewed leases every ttl/3,
    notices leases whose validity ran out, and releases leases whose Lease
    object was garbage-collected while still active."""

    def __init__(self, core: ClientCore):
        self._core = core
        self._cv = threading.Condition()
        self._entries = {}  # _LeaseState -> next renewal (monotonic)
        self._abandoned: List[_LeaseState] = []
        self._thread: Optional[threading.Thread] = None
        self._stop = False
        self.renewals = 0

    def add(self, state: _LeaseState, first_renew: float) -> None:
        with self._cv:
            self._entries[state] = first_renew
            if self._thread is None and not self._stop:
                self._thread = threading.Thread(target=self._run, name="lockd-watchdog",
                                                daemon=True)
                self._thread.start()
            self._cv.notify_all()

    def remove(self, state: _LeaseState) -> None:
        with self._cv:
            self._entries.pop(state, None)

    def renewed(self, state: _LeaseState, send_time: float) -> None:
        with self._cv:
            if state in self._entries:
                self._entries[state] = send_time + state.ttl / 3
                self._cv.notify_all()

    def abandon(self, state: _LeaseState) -> None:
        """The Lease handle was collected while active: release it soon."""
        with self._cv:
            if self._stop:
                return
            self._entries.pop(state, None)
            self._abandoned.append(state)
            self._cv.notify_all()

    def stop(self) -> None:
        with self._cv:
            self._stop = True
            self._cv.notify_all()
            thread = self._thread
        if thread is not None and thread is not threading.current_thread():
            thread.join(timeout=self._core.rpc_timeout + 1)

    def _run(self) -> None:
        while True:
            with self._cv:
                if self._stop:
                    return
                now = time.monotonic()
                wake = now + 3600
                expired, due, due_at = [], None, None
                for state, next_renew in list(self._entries.items()):
                    if not state.active or state.lost_error is not None:
                        del self._entries[state]
                        continue
                    valid_until = state.valid_until
                    if now >= valid_until:
                        expired.append(state)
                        continue
                    wake = min(wake, valid_until)
                    if state.auto_renew:
                        if next_renew <= now:
                            if due_at is None or next_renew < due_at:
                                due, due_at = state, next_renew
                        else:
                            wake = min(wake, next_renew)
                abandoned, self._abandoned = self._abandoned, []
                if not expired and due is None and not abandoned:
                    self._cv.wait(timeout=max(0.0, wake - now))
                    continue
            for state in expired:
                state.check_expiry(time.monotonic())
            for state in abandoned:
                self._release_abandoned(state)
            if due is not None:
                self._renew_one(due)

    def _renew_one(self, state: _LeaseState) -> None:
        now = time.monotonic()
        deadline = min(now + self._core.rpc_timeout, state.valid_until)
        try:
            send_time = state.renew(deadline)
            ok = True
        except LockLost:
            ok = False
        except LockdError as e:
            _log.debug("lockd: renewal of %s failed: %s", _describe(state.namespace, state.name), e)
            ok = False
        except Exception:  # never let the watchdog die
            _log.exception("lockd: renewal of %s failed", _describe(state.namespace, state.name))
            ok = False
        with self._cv:
            self.renewals += 1
            if state not in self._entries:
                return
            if ok:
                self._entries[state] = send_time + state.ttl / 3
            else:
                self._entries[state] = time.monotonic() + min(max(state.ttl / 10, 0.05), 1.0)

    def _release_abandoned(self, state: _LeaseState) -> None:
        was_active, lost = state.end(time.monotonic())
        if not was_active or lost is not None:
            return
        try:
            self._core.release_hold(state.namespace, state.name, state.owner,
                                    state.fencing_token,
                                    time.monotonic() + self._core.release_timeout)
        except Exception as e:
            _log.debug("lockd: release of abandoned lease %s failed: %s",
                       _describe(state.namespace, state.name), e)
