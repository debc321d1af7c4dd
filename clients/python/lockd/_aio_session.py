"""The Session stream of one lockd.aio.Client: lockd._session's behaviour
(read its docstring: one session per Client, lockd renews while the
stream is open, reconnect with capped jittered backoff and resume, lost
leases, validity ``break - K + ttl*2/3 - drift`` while suspended, the undo
of a grant whose caller gave up) on a grpc.aio stream, driven by one task
of the Client's event loop instead of a thread. What a session does without
I/O (messages, grants, errors) is lockd._session's, shared.

Batches follow lockd._session's rule: callers put op messages into the
stream's outbox (_AioOutbox) and never write; grpc.aio's task iterates
_AioOutbox.messages() and awaits each write before it asks for the next
message, so a write is in flight from a yield until the next ask. When
asked, the iterator takes everything queued (lockd._session.next_write): a
lone op alone, as a plain SessionRequest, several as one SessionBatch in
the order queued. Tasks that queue ops while the loop is busy (e.g. many
acquires started together) thus share a batch; nothing waits on a timer.

Not thread-safe: every method runs on the Client's event loop. on_lost
callbacks run through loop.call_soon, never inside the reader.
"""

import asyncio
import collections
import contextlib
import logging
import time
from typing import AsyncIterator, Callable, Dict, List, Optional, Set, Tuple

import grpc

from lockd._aio_core import AsyncCore
from lockd._proto.lockd.v1 import lock_pb2
from lockd._session import SessionEvents, WireCounts, _SessionError, next_write, open_request
from lockd._watchdog import _LeaseState

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


class AioSession(SessionEvents):
    """One Session stream of a lockd.aio.Client (see the module docstring)."""

    def __init__(self, core: AsyncCore, ttl: Optional[float], keep_on_disconnect: bool):
        self._core, self._keep = core, keep_on_disconnect
        self.ttl = ttl  # the lease it asks (None: lockd's default); fixed
        self._loop = asyncio.get_running_loop()
        # "idle" (no task), "connecting", "open", "failed", "closed".
        self._status = "idle"
        self._changed = asyncio.Event()  # set (and replaced) at each change of status
        self._error: Optional[_SessionError] = None
        self._task: Optional[asyncio.Task] = None
        self._requests: Optional[_AioOutbox] = None
        self.counts = WireCounts()
        self._call = None
        self._next_op = 1
        self._ops: Dict[int, _Op] = {}
        self._leases: Set[_LeaseState] = set()
        self._timers: Set[asyncio.TimerHandle] = set()
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
        except BaseException:
            self._interrupted(op_id, op)
            raise
        if not finished:
            self._cancel(op_id, op)
            answered = await _wait(op.done, undo_bound)
            self._past_deadline(op, answered or not self._abandon(op_id, op))
        return self._outcome(kind, op)

    async def release(self, request: lock_pb2.ReleaseRequest,
                      timeout: float) -> lock_pb2.ReleaseResponse:
        """_Session.release."""
        op_id, op = await self._send("release", request, time.monotonic() + timeout, None)
        if not await _wait(op.done, timeout):
            self._ops.pop(op_id, None)
            raise _SessionError(grpc.StatusCode.DEADLINE_EXCEEDED, "no result before the deadline")
        return self._outcome("release", op)

    async def close(self) -> None:
        """_Session.close: ends the stream as a break would."""
        self._set_status_locked("closed")
        leases, self._leases = self._leases, set()
        if self._call is not None:
            self._call.cancel()
        task = self._task
        if task is not None and task is not asyncio.current_task():
            task.cancel()
            await asyncio.gather(task, return_exceptions=True)
        for timer in self._timers:
            timer.cancel()
        self._closed_leases(leases)

    async def _send(self, kind: str, request, deadline: float, on_lost) -> Tuple[int, _Op]:
        while self._status in ("idle", "connecting"):
            if self._status == "idle":
                self._set_status_locked("connecting")
                self._task = self._loop.create_task(self._run())
            if not await _wait(self._changed.wait(), deadline - time.monotonic()):
                raise _SessionError(grpc.StatusCode.UNAVAILABLE,
                                    "session stream not connected", not_applied=True)
        return self._queue_locked(_Op(kind, request, on_lost))

    def _abandon(self, op_id: int, op: _Op) -> bool:
        """_Session._abandon (a result is never half applied here)."""
        if self._ops.get(op_id) is op:
            op.abandoned = True
            return True
        return False

    # -- SessionEvents' hooks (one event loop: nothing to lock)

    def _locked(self):
        return contextlib.nullcontext()

    def _set_status_locked(self, status: str) -> None:
        self._status = status
        changed, self._changed = self._changed, asyncio.Event()
        changed.set()

    def _defer(self, run: Callable[[], None]) -> None:
        self._loop.call_soon(run)

    def _reader_ends_locked(self) -> None:
        self._task = None

    def _later(self, delay: float, run: Callable[[], None]) -> None:
        def fire() -> None:
            self._timers.discard(handle)
            run()

        handle = self._loop.call_later(delay, fire)
        self._timers.add(handle)

    # -- the reader task

    async def _run(self) -> None:
        backoff = self._core.initial_backoff
        while self._status != "closed":
            requests = _AioOutbox(open_request(self._core, self.ttl, self._keep, self._leases),
                                  self.counts)
            self._requests = requests
            opened = False
            error: Optional[grpc.RpcError] = None
            try:
                self._call = self._core.stub.Session(requests.messages())
                async for resp in self._call:
                    if self._on_response(resp):
                        opened = True
                        backoff = self._core.initial_backoff
            except grpc.RpcError as e:
                error = e
            except asyncio.CancelledError:
                if self._status != "closed":
                    raise
                error = _SessionError(grpc.StatusCode.CANCELLED, "client closed")
            except Exception as e:  # never let the reader die silently
                _log.exception("lockd: session reader failed")
                error = _SessionError(grpc.StatusCode.INTERNAL, str(e))
            requests.end()
            if not self._on_end(error, opened):
                return
            await asyncio.sleep(self._core.jittered(backoff))
            self._expire_suspended()
            if self._status == "closed":
                return
            if not self._leases and not self._ops:
                self._task = None
                self._set_status_locked("idle")
                return
            backoff = self._core.next_backoff(backoff)


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


class _AioOutbox:
    """The writes of one stream (see the module docstring); its methods run
    on the Client's event loop."""

    def __init__(self, open_msg: lock_pb2.SessionRequest, counts: WireCounts):
        self._open, self._counts = open_msg, counts
        self._queued: collections.deque = collections.deque()
        self._ready = asyncio.Event()  # set when something is queued, or at end()
        self._ended = False

    def put(self, msg: lock_pb2.SessionRequest) -> None:
        if not self._ended:
            self._queued.append(msg)
            self._ready.set()

    def end(self) -> None:
        """The stream ended: messages() returns; what is queued is dropped."""
        self._ended = True
        self._ready.set()

    async def messages(self) -> AsyncIterator[lock_pb2.SessionRequest]:
        """The stream's request iterator: ``open``, then what is queued,
        batched by next_write each time grpc.aio asks, until end()."""
        self._counts.wrote(self._open)
        yield self._open
        while not self._ended:
            if not self._queued:
                self._ready.clear()
                await self._ready.wait()
                continue
            yield next_write(self._queued, self._counts)
