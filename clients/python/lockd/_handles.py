"""What lockd.Client and lockd.aio.Client hand out, without I/O: the read
side of a Lease and a LeaseSet, the checks of an acquire's arguments and of
a semaphore's permits, and the LockSpecs of a call. Written once for both
clients; each adds its own release/renew (blocking or coroutines).
Private to the lockd package."""

import time
from typing import Callable, Iterator, List, Optional

import grpc

from lockd._proto.lockd.v1 import lock_pb2
from lockd._values import LockSpec, _mode_to_proto
from lockd._watchdog import _LeaseState
from lockd.errors import LockdError, LockLost, _describe


class LeaseView:
    """The attributes of a lease (lockd.Lease documents them); thread-safe
    as its _LeaseState is."""

    _state: _LeaseState

    name = property(lambda self: self._state.name)
    namespace = property(lambda self: self._state.namespace)
    owner = property(lambda self: self._state.owner)
    fencing_token = property(lambda self: self._state.fencing_token)
    hold_count = property(lambda self: self._state.hold_count)
    ttl = property(lambda self: self._state.ttl)
    # The kind asked for: mode "shared" (acquire_shared) or "exclusive";
    # limit and permits of a semaphore (0 for a lock).
    mode = property(lambda self: self._state.mode)
    limit = property(lambda self: self._state.limit)
    permits = property(lambda self: self._state.permits)

    @property
    def lost(self):
        """A threading.Event, set once the lease is lost (sticky). Noticing
        a passed validity deadline also sets it."""
        self._state.check_expiry(time.monotonic())
        return self._state.lost

    @property
    def lost_error(self) -> Optional[LockLost]:
        """Why the lease was lost, or None."""
        self._state.check_expiry(time.monotonic())
        return self._state.lost_error

    @property
    def valid_until(self) -> float:
        """Client-side validity deadline on the time.monotonic() clock
        (math.inf for a session lease while its stream is open)."""
        return self._state.valid_until

    def remaining(self) -> float:
        """Seconds of validity left (<= 0 once passed)."""
        return self._state.valid_until - time.monotonic()

    @property
    def active(self) -> bool:
        """True until release() or detach()."""
        return self._state.active

    def valid(self) -> bool:
        """Not lost, active and within validity: check it right before an
        action the lock protects (and pass fencing_token along)."""
        now = time.monotonic()
        return (self._state.active and not self._state.check_expiry(now)
                and now < self._state.valid_until)

    def _renew_deadline(self) -> float:
        """The deadline of a renew() now. Raises LockdError if the lease is
        no longer active, its LockLost if lost."""
        s = self._state
        if not s.active:
            raise LockdError("lease of %s was already released or detached"
                             % _describe(s.namespace, s.name))
        if s.check_expiry(time.monotonic()):
            raise s.lost_error
        return min(time.monotonic() + s.core.rpc_timeout, s.valid_until)

    def __repr__(self) -> str:
        return "<%s.%s %s owner=%r token=%d%s>" % (
            type(self).__module__, type(self).__name__, _describe(self.namespace, self.name),
            self.owner, self.fencing_token, " LOST" if self._state.lost.is_set() else "")


class LeaseSetView:
    """The leases of one acquire_all(), one per lock in the order given
    (index it, iterate it)."""

    def __init__(self, leases: List):
        self.leases = leases

    def __getitem__(self, i: int):
        return self.leases[i]

    def __iter__(self) -> Iterator:
        return iter(self.leases)

    def __len__(self) -> int:
        return len(self.leases)

    def valid(self) -> bool:
        """Every lease valid()."""
        return bool(self.leases) and all(lease.valid() for lease in self.leases)

    def __repr__(self) -> str:
        return "<%s.%s %r>" % (type(self).__module__, type(self).__name__, self.leases)


def check_acquire_args(ttl: Optional[float], wait: float, timeout: Optional[float]) -> None:
    """Raises LockdError (INVALID_ARGUMENT, nothing sent) for a ttl or
    timeout that is not positive, or a negative wait."""
    if ttl is not None and ttl <= 0:
        raise LockdError("ttl must be positive", grpc.StatusCode.INVALID_ARGUMENT)
    if wait < 0 or (timeout is not None and timeout <= 0):
        raise LockdError("wait must not be negative and timeout must be positive",
                         grpc.StatusCode.INVALID_ARGUMENT)


def semaphore_spec(name: str, limit: int, permits: int, namespace: Optional[str]) -> LockSpec:
    """The LockSpec of ``permits`` of the semaphore ``name``. Raises
    LockdError (INVALID_ARGUMENT, nothing sent) for a limit or permits out
    of range."""
    if not 1 <= limit <= 10000:
        raise LockdError("semaphore limit must be 1-10000, not %d" % limit,
                         grpc.StatusCode.INVALID_ARGUMENT)
    if not 1 <= permits <= limit:
        raise LockdError("permits must be 1-%d (the limit), not %d" % (limit, permits),
                         grpc.StatusCode.INVALID_ARGUMENT)
    return LockSpec(name, namespace, limit=limit, permits=permits)


def proto_specs(specs: List[LockSpec], namespace: Optional[str],
                resolve: Callable[[Optional[str]], str]) -> List[lock_pb2.LockSpec]:
    """The call's locks with their namespaces resolved (a spec's own, else
    the call's ``namespace``, else the Client's: ``resolve``)."""
    default_ns = resolve(namespace)
    return [lock_pb2.LockSpec(namespace=resolve(s.namespace) if s.namespace is not None
                              else default_ns, name=s.name, mode=_mode_to_proto(s.mode),
                              limit=s.limit, permits=s.permits) for s in specs]
