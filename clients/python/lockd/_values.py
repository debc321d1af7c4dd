"""Values of the lockd client: LockInfo (public, re-exported by ``lockd``) and
conversions between seconds and protobuf Durations."""

import os
import socket
import uuid
from dataclasses import dataclass

from lockd._proto.lockd.v1 import lock_pb2


@dataclass(frozen=True)
class LockInfo:
    """One lock's state. owner/hold_count/fencing_token/ttl_remaining only mean
    something when ``held``. ttl_remaining is in seconds (backend clock)."""
    namespace: str
    name: str
    held: bool
    owner: str
    hold_count: int
    fencing_token: int
    ttl_remaining: float
    waiters: int
    backend: str


def _lock_info_from_proto(p: lock_pb2.LockInfo) -> LockInfo:
    return LockInfo(namespace=p.namespace or "default", name=p.name, held=p.held,
                    owner=p.owner, hold_count=p.hold_count, fencing_token=p.fencing_token,
                    ttl_remaining=_seconds(p.ttl_remaining), waiters=p.waiters,
                    backend=p.backend)


def _seconds(d) -> float:
    return d.seconds + d.nanos / 1e9


def _set_duration(field, seconds: float) -> None:
    nanos = int(round(seconds * 1e9))
    field.seconds = nanos // 1_000_000_000
    field.nanos = nanos % 1_000_000_000


def _new_owner() -> str:
    host = (socket.gethostname() or "unknown-host")[:64]
    return "%s-%d-%s" % (host, os.getpid(), uuid.uuid4().hex)
