"""What a lockd.Client shares with its sessions, its watchdog and its
leases (as ClientCore does in the C++ client): the stub, the owner and
default namespace, the timeouts, the drift allowance and hang bound, the
capped jittered backoff, the retried call, and the Release calls (a hold's
release and the undo of an acquire attempt). CoreSettings is the part
without I/O, which lockd.aio's AsyncCore (lockd._aio_core) shares. Private
to the lockd package.

Thread-safe: every attribute is set once by the Client (``owner`` and
``namespace`` also when the Client's own attributes are assigned); the
methods keep no state but the jitter's random.Random (thread-safe).
"""

import random
import time
import uuid
from typing import Callable, List, Optional, Tuple, TypeVar

import grpc

from lockd._plan import ATTEMPT, SLEEP, run
from lockd._proto.lockd.v1 import lock_pb2, lock_pb2_grpc
from lockd._validity import drift as validity_drift
from lockd._validity import session_safe as validity_session_safe
from lockd.errors import LockdError, LockLost, _translate

T = TypeVar("T")


class CoreSettings:
    """What both cores share: the stub (a blocking or a grpc.aio one), the
    settings and the rules that need no I/O. Times in seconds
    (time.monotonic() clock)."""

    def __init__(self, stub, *, owner: str, namespace: str, hang_bound: float,
                 rpc_timeout: float = 10.0, release_timeout: float = 2.0,
                 initial_backoff: float = 0.05, max_backoff: float = 2.0,
                 clock_drift_factor: float = 0.01, min_clock_drift: float = 0.002):
        """The defaults are lockd.Client's (lockd.aio.Client takes them from
        here)."""
        self.stub = stub
        self.owner = owner
        self.namespace = namespace
        # Calls that do not wait, retries included (and an acquire's slack
        # beyond its wait).
        self.rpc_timeout = rpc_timeout
        # Releases when leaving a ``with`` block, and (capped at rpc_timeout)
        # the bound on the undo of an acquire attempt: undo_timeout().
        self.release_timeout = release_timeout
        self.initial_backoff = max(initial_backoff, 0.001)
        self.max_backoff = max(max_backoff, self.initial_backoff)
        self.clock_drift_factor = clock_drift_factor
        self.min_clock_drift = min_clock_drift
        # K: the longest a hung lockd goes unnoticed on the channel.
        self.hang_bound = hang_bound
        self._random = random.Random()

    # -- lease validity: lockd._validity with this Client's settings

    def drift(self, ttl: float) -> float:
        return validity_drift(ttl, self.clock_drift_factor, self.min_clock_drift)

    def session_safe(self, ttl: Optional[float]) -> bool:
        """_validity.session_safe for ``ttl``; None (the server's default, not
        known yet) is safe."""
        ttl = ttl or 0
        return validity_session_safe(ttl, self.drift(ttl), self.hang_bound)

    # -- backoff and retries (the loop is the I/O core's call_with_retry)

    def jittered(self, backoff: float) -> float:
        """A pause of ``backoff`` with jitter: uniform in [backoff/2, backoff]."""
        return self._random.uniform(backoff / 2, backoff)

    def next_backoff(self, backoff: float) -> float:
        return min(backoff * 2, self.max_backoff)

    def retry_plan(self, deadline: float):
        """The plan (lockd._plan) of call_with_retry: an attempt again after
        UNAVAILABLE, paused by a capped jittered backoff, until another
        outcome or the deadline."""
        backoff = self.initial_backoff
        while True:
            try:
                return (yield ATTEMPT, max(deadline - time.monotonic(), 0.0))
            except grpc.RpcError as e:
                if e.code() != grpc.StatusCode.UNAVAILABLE:
                    raise
                sleep = self.jittered(backoff)
                if time.monotonic() + sleep >= deadline:
                    raise
                yield SLEEP, sleep
                backoff = self.next_backoff(backoff)

    @staticmethod
    def undo_answered(error: "LockdError", errors: Optional[List["LockdError"]]) -> bool:
        """Whether a failed undo was answered all the same (LOCK_NOT_HELD,
        which the contract never sends for an undo, also means nothing is
        held); if not, ``error`` is appended to ``errors``."""
        if isinstance(error, LockLost):
            return True
        if errors is not None:
            errors.append(error)
        return False

    # -- requests

    @staticmethod
    def release_request(ns: str, name: str, owner: str,
                        fencing_token: int) -> lock_pb2.ReleaseRequest:
        """The Release of one hold (a fresh request_id, kept by retries)."""
        return lock_pb2.ReleaseRequest(namespace=ns, name=name, owner=owner,
                                       request_id=uuid.uuid4().hex, fencing_token=fencing_token)

    @staticmethod
    def undo_request(ns: str, name: str, owner: str, request_id: str,
                     fencing_token: int) -> lock_pb2.ReleaseRequest:
        """The undo of owner's Acquire ``request_id`` (see undo_acquire)."""
        return lock_pb2.ReleaseRequest(namespace=ns, name=name, owner=owner,
                                       acquire_request_id=request_id,
                                       fencing_token=fencing_token)

    def undo_timeout(self) -> float:
        """The bound on one undo of an acquire attempt."""
        return min(self.rpc_timeout, self.release_timeout)


class ClientCore(CoreSettings):
    """CoreSettings with blocking calls (the synchronous lockd.Client's)."""

    stub: lock_pb2_grpc.LockServiceStub

    def call_with_retry(self, deadline: float, attempt: Callable[[float], T]) -> T:
        """Calls attempt(timeout_seconds) again after UNAVAILABLE, with capped
        jittered backoff, until another outcome or the deadline."""
        return run(self.retry_plan(deadline),
                   lambda action, arg: attempt(arg) if action == ATTEMPT else time.sleep(arg))

    def release_hold(self, ns: str, name: str, owner: str, fencing_token: int, deadline: float,
                     session=None) -> Tuple[bool, int]:
        """Releases one hold, over ``session`` (a lockd._session._Session)
        when given and not failed (retried with the same request_id, on the
        reconnected stream), else with the unary RPC. ``fencing_token``
        non-zero: only the hold with that token (a newer hold of owner
        answers LOCK_NOT_HELD and stays); 0: any hold of owner. Returns
        (released, remaining hold count); raises LockLost, Unavailable,
        LockdError."""
        req = self.release_request(ns, name, owner, fencing_token)

        def attempt(t: float):
            if session is not None and not session.failed:
                return session.release(req, t)
            return self.stub.Release(req, timeout=t)

        try:
            resp = self.call_with_retry(deadline, attempt)
        except grpc.RpcError as e:
            raise _translate("release", ns, name, e) from None
        return resp.released, resp.hold_count

    def undo_acquire(self, ns: str, name: str, owner: str, request_id: str, deadline: float,
                     fencing_token: int = 0) -> Tuple[bool, int]:
        """The undo of owner's Acquire ``request_id`` (a unary Release with
        acquire_request_id); ``fencing_token``: its grant's token when known
        (the undo then touches only that hold), else 0. Returns (released,
        remaining hold count); raises LockLost, Unavailable, LockdError."""
        req = self.undo_request(ns, name, owner, request_id, fencing_token)
        try:
            resp = self.call_with_retry(deadline, lambda t: self.stub.Release(req, timeout=t))
        except grpc.RpcError as e:
            raise _translate("undo of the acquire", ns, name, e) from None
        return resp.released, resp.hold_count

    def undo_confirmed(self, ns: str, name: str, owner: str, request_id: str, deadline: float,
                       errors: Optional[List[LockdError]] = None,
                       fencing_token: int = 0) -> bool:
        """undo_acquire(); True if it was answered (LOCK_NOT_HELD, which the
        contract never sends for an undo, also means nothing is held), else
        False with the error appended to ``errors``."""
        try:
            self.undo_acquire(ns, name, owner, request_id, deadline, fencing_token)
            return True
        except LockdError as e:
            return self.undo_answered(e, errors)
