"""Values of the lockd client: LockInfo (public, re-exported by ``lockd``) and
conversions between seconds and protobuf Durations."""

import os
import socket
import uuid
from dataclasses import dataclass
from typing import Optional, Tuple

from lockd._proto.lockd.v1 import lock_pb2


EXCLUSIVE = "exclusive"
SHARED = "shared"


@dataclass(frozen=True)
class Holder:
    """One owner's hold of a name (LockInfo.holders): mode "exclusive" or
    "shared" ("exclusive" for a semaphore), permits (0 for a lock),
    ttl_remaining in seconds (backend clock)."""
    owner: str
    mode: str
    hold_count: int
    permits: int
    fencing_token: int
    ttl_remaining: float


@dataclass(frozen=True)
class LockInfo:
    """One lock's state. owner/hold_count/fencing_token/ttl_remaining only mean
    something when ``held`` (for a shared lock or a semaphore: the newest
    holder's). ttl_remaining is in seconds (backend clock). mode: "exclusive"
    or "shared" ("exclusive" when free and for a semaphore); limit: non-zero
    for a semaphore; holders: every holder, oldest first."""
    namespace: str
    name: str
    held: bool
    owner: str
    hold_count: int
    fencing_token: int
    ttl_remaining: float
    waiters: int
    backend: str
    mode: str = EXCLUSIVE
    limit: int = 0
    holders: Tuple[Holder, ...] = ()


@dataclass(frozen=True)
class LockSpec:
    """One lock of Client.acquire_all(): a lock (mode "exclusive" or
    "shared") or, with ``limit``, ``permits`` of a semaphore. namespace None:
    the call's, else the Client's."""
    name: str
    namespace: Optional[str] = None
    mode: str = EXCLUSIVE
    limit: int = 0
    permits: int = 0


def _mode_to_proto(mode: str) -> int:
    if mode not in (EXCLUSIVE, SHARED):
        raise ValueError('mode must be "exclusive" or "shared", not %r' % (mode,))
    return lock_pb2.LOCK_MODE_SHARED if mode == SHARED else lock_pb2.LOCK_MODE_EXCLUSIVE


def _mode_from_proto(mode: int) -> str:
    return SHARED if mode == lock_pb2.LOCK_MODE_SHARED else EXCLUSIVE


def _lock_info_from_proto(p: lock_pb2.LockInfo) -> LockInfo:
    holders = tuple(Holder(owner=h.owner, mode=_mode_from_proto(h.mode), hold_count=h.hold_count,
                           permits=h.permits, fencing_token=h.fencing_token,
                           ttl_remaining=_seconds(h.ttl_remaining)) for h in p.holders)
    return LockInfo(namespace=p.namespace or "default", name=p.name, held=p.held,
                    owner=p.owner, hold_count=p.hold_count, fencing_token=p.fencing_token,
                    ttl_remaining=_seconds(p.ttl_remaining), waiters=p.waiters,
                    backend=p.backend, mode=_mode_from_proto(p.mode), limit=p.limit,
                    holders=holders)


def _seconds(d) -> float:
    return d.seconds + d.nanos / 1e9


def _set_duration(field, seconds: float) -> None:
    nanos = int(round(seconds * 1e9))
    field.seconds = nanos // 1_000_000_000
    field.nanos = nanos % 1_000_000_000


def _new_owner() -> str:
    host = (socket.gethostname() or "unknown-host")[:64]
    return "%s-%d-%s" % (host, os.getpid(), uuid.uuid4().hex)
