"""The Session stream of one lockd.aio.Client: lockd._session's behaviour
(read its docstring: one session per lease ttl, lockd renews while the
stream is open, reconnect with capped jittered backoff and resume, lost
leases, validity ``break - K + ttl*2/3 - drift`` while suspended, the undo
of a grant whose caller gave up) on a grpc.aio stream, driven by one task
of the Client's event loop instead of a thread. What a session does without
I/O (messages, grants, errors) is lockd._session's, shared.

Not thread-safe: every method runs on the Client's event loop. on_lost
callbacks run through loop.call_soon, never inside the reader.
"""

import asyncio
import logging
import time
from typing import AsyncIterator, Dict, List, Optional, Set, Tuple

import grpc

from lockd._aio_core import AsyncCore
from lockd._proto.lockd.v1 import lock_pb2
from lockd._session import (
    _CANCELLED,
    _FATAL_AT_OPEN,
    _SessionError,
    break_validity,
    granted_locks,
    lost_key,
    op_error,
    op_message,
    open_request,
    resumed_keys,
    session_lease,
    undo_messages,
)
from lockd._values import _seconds
from lockd._watchdog import _LeaseState
from lockd.errors import LockLost, _describe

_log = logging.getLogger("lockd")


class _Op:
    """One acquire or release in flight: ``done`` resolved by the reader."""

    def __init__(self, kind: str, request, on_lost):
        self.kind, self.request, self.on_lost = kind, request, on_lost
        self.done: asyncio.Future = asyncio.get_running_loop().create_future()
        self.result: Optional[lock_pb2.SessionResult] = None
        self.states: List[_LeaseState] = []
        self.broken: Optional[str] = None
        self.abandoned = False

    def complete(self) -> None:
        if not self.done.done():
            self.done.set_result(None)


class AioSession:
    """One Session stream of a lockd.aio.Client (see the module docstring)."""

    def __init__(self, core: AsyncCore, ttl: Optional[float], keep_on_disconnect: bool):
        self._core, self._ttl, self._keep = core, ttl, keep_on_disconnect
        self._loop = asyncio.get_running_loop()
        # "idle" (no task), "connecting", "open", "failed", "closed".
        self._status = "idle"
        self._changed = asyncio.Event()  # set (and replaced) at each change of status
        self._error: Optional[_SessionError] = None
        self._task: Optional[asyncio.Task] = None
        self._requests: Optional[asyncio.Queue] = None
        self._call = None
        self._next_op = 1
        self._ops: Dict[int, _Op] = {}
        self._leases: Set[_LeaseState] = set()
        self._expiry: Optional[asyncio.TimerHandle] = None
        self.granted_ttl: Optional[float] = None

    @property
    def failed(self) -> bool:
        return self._status in ("failed", "closed")

    # -- operations

    async def acquire(self, request, timeout: float, undo_bound: float,
                      on_lost) -> Tuple[object, List[_LeaseState]]:
        """_Session.acquire; the task's cancellation is the interruption."""
        kind = "acquire_all" if isinstance(request, lock_pb2.AcquireAllRequest) else "acquire"
        op_id, op = await self._send(kind, request, time.monotonic() + timeout, on_lost)
        try:
            finished = await _wait(op.done, timeout)
        except BaseException:  # cancelled: the caller undoes what it may have added
            self._cancel(op_id, op)
            self._abandon(op_id, op)
            for state in op.states:
                self.forget(state)
            raise
        if not finished:
            self._cancel(op_id, op)
            if not await _wait(op.done, undo_bound) and self._abandon(op_id, op):
                raise _SessionError(grpc.StatusCode.DEADLINE_EXCEEDED,
                                    "no result before the deadline (cancel unanswered)")
            if op.states:  # granted after all: the caller undoes it
                for state in op.states:
                    self.forget(state)
                err = _SessionError(grpc.StatusCode.DEADLINE_EXCEEDED, "granted after the deadline")
                err.granted_tokens = [state.fencing_token for state in op.states]
                raise err
            if op.result is not None and op.result.status.code == _CANCELLED:
                raise _SessionError(grpc.StatusCode.DEADLINE_EXCEEDED,
                                    "deadline passed; cancelled", not_applied=True)
        _raise_if_failed(op)
        return getattr(op.result, kind), op.states

    async def release(self, request: lock_pb2.ReleaseRequest,
                      timeout: float) -> lock_pb2.ReleaseResponse:
        """_Session.release."""
        op_id, op = await self._send("release", request, time.monotonic() + timeout, None)
        if not await _wait(op.done, timeout):
            self._ops.pop(op_id, None)
            raise _SessionError(grpc.StatusCode.DEADLINE_EXCEEDED, "no result before the deadline")
        _raise_if_failed(op)
        return op.result.release

    def forget(self, state: _LeaseState) -> None:
        self._leases.discard(state)

    async def close(self) -> None:
        """_Session.close: ends the stream as a break would."""
        self._set_status("closed")
        leases, self._leases = self._leases, set()
        if self._call is not None:
            self._call.cancel()
        task = self._task
        if task is not None and task is not asyncio.current_task():
            task.cancel()
            await asyncio.gather(task, return_exceptions=True)
        if self._expiry is not None:
            self._expiry.cancel()
        now = time.monotonic()
        for state in leases:
            if self._keep:
                state.suspend_session(break_validity(state, now))
            else:
                state.mark_lost(LockLost("lease of %s ended: the client was closed"
                                         % _describe(state.namespace, state.name),
                                         "CLIENT_CLOSED"), self._defer)

    def _new_op_id(self) -> int:
        op_id = self._next_op
        self._next_op += 1
        return op_id

    async def _send(self, kind: str, request, deadline: float, on_lost) -> Tuple[int, _Op]:
        while self._status in ("idle", "connecting"):
            if self._status == "idle":
                self._set_status("connecting")
                self._task = self._loop.create_task(self._run())
            if not await _wait(self._changed.wait(), deadline - time.monotonic()):
                raise _SessionError(grpc.StatusCode.UNAVAILABLE,
                                    "session stream not connected", not_applied=True)
        if self._status == "failed":
            raise self._error
        if self._status != "open":
            raise _SessionError(grpc.StatusCode.CANCELLED, "client closed", not_applied=True)
        op_id = self._new_op_id()
        op = _Op(kind, request, on_lost)
        self._ops[op_id] = op
        self._requests.put_nowait(op_message(kind, op_id, request))
        return op_id, op

    def _abandon(self, op_id: int, op: _Op) -> bool:
        if self._ops.get(op_id) is op:
            op.abandoned = True
            return True
        return False

    def _cancel(self, op_id: int, op: _Op) -> None:
        if op_id in self._ops and self._status == "open":
            self._requests.put_nowait(lock_pb2.SessionRequest(
                cancel=lock_pb2.SessionCancel(op_id=op_id)))

    def _set_status(self, status: str) -> None:
        self._status = status
        changed, self._changed = self._changed, asyncio.Event()
        changed.set()

    def _defer(self, run) -> None:
        self._loop.call_soon(run)

    # -- the reader task

    async def _run(self) -> None:
        backoff = self._core.initial_backoff
        while self._status != "closed":
            requests: asyncio.Queue = asyncio.Queue()
            requests.put_nowait(open_request(self._core, self._ttl, self._keep, self._leases))
            self._requests = requests
            opened = False
            error: Optional[grpc.RpcError] = None
            try:
                self._call = self._core.stub.Session(_drain(requests))
                async for resp in self._call:
                    if resp.HasField("opened"):
                        self._on_opened(resp.opened)
                        opened = True
                        backoff = self._core.initial_backoff
                    elif resp.HasField("result"):
                        self._on_result(resp.result)
                    elif resp.HasField("lost"):
                        self._on_lost(resp.lost)
            except grpc.RpcError as e:
                error = e
            except asyncio.CancelledError:
                if self._status != "closed":
                    raise
                error = _SessionError(grpc.StatusCode.CANCELLED, "client closed")
            except Exception as e:  # never let the reader die silently
                _log.exception("lockd: session reader failed")
                error = _SessionError(grpc.StatusCode.INTERNAL, str(e))
            requests.put_nowait(None)
            if not self._on_end(error, opened):
                return
            backoff = await self._pause(backoff)
            if backoff is None:
                return

    def _on_opened(self, opened: lock_pb2.SessionOpened) -> None:
        resumed = resumed_keys(opened)
        self.granted_ttl = _seconds(opened.lease_ttl)
        for s in list(self._leases):
            if (s.namespace, s.name, s.fencing_token) in resumed:
                s.resume_session()
            else:
                self._leases.discard(s)
                s.mark_lost(LockLost(
                    "lease of %s lost: not held any more when the session reconnected"
                    % _describe(s.namespace, s.name), "LOCK_NOT_HELD"), self._defer)
        if self._status == "connecting":
            self._set_status("open")

    def _on_result(self, result: lock_pb2.SessionResult) -> None:
        op = self._ops.pop(result.op_id, None)
        if op is None:
            return
        granted = granted_locks(op.kind, op.request, result)
        if op.abandoned:
            if granted and self._status == "open":
                for msg in undo_messages(op.request, [r.fencing_token for _, r in granted],
                                         self._new_op_id):
                    self._requests.put_nowait(msg)
            return
        op.result = result
        for spec, resp in granted:
            state = session_lease(self._core, self, spec, resp, self.granted_ttl, op.on_lost)
            self._leases.add(state)
            op.states.append(state)
        op.complete()

    def _on_lost(self, lost: lock_pb2.LockLost) -> None:
        key = lost_key(lost)
        gone = [s for s in self._leases if (s.namespace, s.name, s.fencing_token) == key]
        self._leases.difference_update(gone)
        for s in gone:
            s.mark_lost(LockLost("lease of %s lost: lockd reported %s"
                                 % (_describe(s.namespace, s.name), lost.reason or "NOT_HELD"),
                                 lost.reason or "NOT_HELD"), self._defer)

    def _on_end(self, error: Optional[grpc.RpcError], opened: bool) -> bool:
        """_Session._on_end: fails the operations in flight; True to reconnect."""
        why = "session stream ended: %s" % (error.details() if error is not None else "OK")
        code = error.code() if error is not None else grpc.StatusCode.OK
        now = time.monotonic()
        self._call = self._requests = None
        ops, self._ops = self._ops, {}
        leases = list(self._leases)
        reconnect = False
        if self._status == "closed":
            pass
        elif not opened and code in _FATAL_AT_OPEN:
            self._error = _SessionError(code, why, not_applied=True)
            self._leases = set()
            self._set_status("failed")
        elif leases:
            self._set_status("connecting")
            reconnect = True
        else:
            self._set_status("idle")
        if not reconnect:
            self._task = None
        if not self._keep and self._status != "closed":
            self._leases = set()
        for op in ops.values():
            op.broken = why
            op.complete()
        for s in leases:
            if self._keep and reconnect:
                s.suspend_session(break_validity(s, now))
            elif self._status != "closed":
                s.mark_lost(LockLost("lease of %s lost: %s" % (_describe(s.namespace, s.name),
                                                               why), "SESSION_ENDED"), self._defer)
        if reconnect:
            _log.debug("lockd: %s; reconnecting", why)
            if self._keep:
                self._expire_suspended()
        return reconnect

    def _expire_suspended(self) -> None:
        """Marks suspended leases whose validity ended lost, and runs again
        (loop.call_later) when the next one ends."""
        self._expiry = None
        now = time.monotonic()
        pending = []
        for s in list(self._leases):
            if s.check_expiry(now, self._defer):
                self.forget(s)
            elif s.active and s.valid_until < float("inf"):
                pending.append(s.valid_until)
        if pending and self._status != "closed":
            self._expiry = self._loop.call_later(max(0.0, min(pending) - now),
                                                 self._expire_suspended)

    async def _pause(self, backoff: float) -> Optional[float]:
        await asyncio.sleep(self._core.jittered(backoff))
        self._expire_suspended()
        if self._status == "closed":
            return None
        if not self._leases and not self._ops:
            self._task = None
            self._set_status("idle")
            return None
        return self._core.next_backoff(backoff)


def _raise_if_failed(op: _Op) -> None:
    error = op_error(op.result, op.broken)
    if error is not None:
        raise error


async def _wait(awaitable, timeout: float) -> bool:
    """Waits up to ``timeout`` for ``awaitable`` (a future is not cancelled
    by the timeout); False on timeout."""
    if asyncio.isfuture(awaitable):
        awaitable = asyncio.shield(awaitable)
    try:
        await asyncio.wait_for(awaitable, max(timeout, 0.0))
        return True
    except asyncio.TimeoutError:
        return False


async def _drain(requests: asyncio.Queue) -> AsyncIterator[lock_pb2.SessionRequest]:
    """The stream's request iterator: the queued requests until None."""
    while True:
        item = await requests.get()
        if item is None:
            return
        yield item
