"""The Session stream of one lockd.Client (docs/api.md "Sessions"): locks
bound to one bidirectional stream, renewed by the server while it is open.
Private to the lockd package; lockd.client routes acquire()/release() here.

One _Session per Client, asking one lease ttl (lockd._paths says which),
working through the Client's lockd._core.ClientCore (stub, owner,
namespace, backoff, hang bound K). Its one daemon thread opens the stream,
reads every response (completing operations by op_id, marking leases lost
on ``lost``) and, when the stream breaks, reconnects with capped jittered
backoff and resumes the live leases (``open.resume``); those the server
does not return in ``opened.resumed`` become lost. Requests are written
through an outbox that the stream's request iterator drains (see Batches,
below). The thread exits when the stream breaks while no lease is live (the
next operation starts it again) and after close(), which cancels the stream
(a break for lockd, so keep_on_disconnect decides what becomes of the
holds).

While the stream is open a lease's validity is unbounded (lockd renews it and
says when it is lost); from a break until resumed it ends at
``break_noticed - K + ttl*2/3 - drift`` (break_validity). K =
keepalive_time + keepalive_timeout is how long the Client's channel may take
to notice a hung lockd (stopped, or partitioned without a reset): HTTP/2
keepalive pings break the stream within K, so lockd was last known alive no
earlier than K before the break was noticed, and it renews every ttl/3, so
the hold lasts at least ttl*2/3 from then. Hence a lease goes over a session
only when ttl*2/3 - drift > K (session_safe; the Client sends shorter ones
over the unary path; both formulas are in lockd._validity): otherwise a
hang could outlast the lease before the client notices. A timer marks
suspended leases lost when their validity ends, even while the thread is
stuck reconnecting to a hung lockd. on_lost callbacks run on a thread of
their own, never on the reader thread (a callback may use the session).

Operation errors are raised as _SessionError, a grpc.RpcError carrying the
result's google.rpc.Status as ``grpc-status-details-bin`` trailing metadata,
so lockd.errors._translate and the unary retry/undo rules apply unchanged.
``not_applied`` is True when the server certainly did not apply the
operation (never sent, or cancelled and answered CANCELLED);
``granted_tokens`` is set on an acquire granted after its caller's deadline
(the grant's fencing token of each lock, for the caller's undo).

An acquire op is an AcquireRequest (``acquire``) or an AcquireAllRequest
(``acquire_all``, several locks all or nothing); a grant of the latter
becomes one lease per lock, each resumed and lost on its own.

Batches (docs/api.md "Batches on a Session"). All the Client's threads share
the one stream. A caller puts its op's message (acquire, acquire_all,
release, cancel) into the stream's outbox, in op_id order, and never writes
itself. gRPC's own thread pulls the stream's request iterator
(_Outbox.messages) and asks for the next message only once it has written
the previous one, so "a write is in flight" means: the iterator has yielded
and has not been asked again. When asked, the iterator takes everything
queued (next_write): a lone op goes alone, as a plain SessionRequest; two or
more go as ONE SessionBatch in the order queued (at most MAX_BATCH_OPS ops
and, unless one op alone is larger, MAX_BATCH_BYTES; the rest in the writes
after). So an op queued while nothing is in flight is written at once and
alone, and only ops that queued up behind a write share one; nothing waits
on a timer. ``open`` is the iterator's first message, always alone. Once
the client has sent a batch, lockd may answer with response batches: the
reader handles each item as if it had come alone. ``counts`` (WireCounts)
tallies what went each way.
"""

import collections
import logging
import math
import threading
import time
from typing import Callable, Dict, List, Optional, Set, Tuple

import grpc

from lockd._cancel import Cancellation
from lockd._core import ClientCore
from lockd._proto.lockd.v1 import lock_pb2
from lockd._validity import session_break_valid_until
from lockd._values import _mode_from_proto, _seconds, _set_duration
from lockd._watchdog import _LeaseState
from lockd.errors import LockLost, _describe

_log = logging.getLogger("lockd")

# Codes that end a session for good when the open is refused (a reconnect
# would be refused again); every other break is retried.
_FATAL_AT_OPEN = frozenset({
    grpc.StatusCode.INVALID_ARGUMENT, grpc.StatusCode.UNAUTHENTICATED,
    grpc.StatusCode.PERMISSION_DENIED, grpc.StatusCode.UNIMPLEMENTED,
})


def break_validity(state: _LeaseState, noticed: float) -> float:
    """Until when a session lease stays valid after its stream broke (or was
    closed) at ``noticed`` (lockd._validity.session_break_valid_until)."""
    return session_break_valid_until(noticed, state.core.hang_bound, state.ttl, state.drift)


class _SessionError(grpc.RpcError):
    """An operation's error, shaped like a unary call's grpc.RpcError."""

    def __init__(self, code: grpc.StatusCode, details: str, status_bin: bytes = b"",
                 not_applied: bool = False):
        super().__init__(details)
        self._code, self._details, self.not_applied = code, details, not_applied
        self._trailing = (("grpc-status-details-bin", status_bin),) if status_bin else ()

    def code(self) -> grpc.StatusCode:
        return self._code

    def details(self) -> str:
        return self._details

    def trailing_metadata(self):
        return self._trailing


_CODES = {c.value[0]: c for c in grpc.StatusCode}
_CANCELLED = grpc.StatusCode.CANCELLED.value[0]


class _Op:
    """One acquire or release in flight: completed once by the reader thread."""

    def __init__(self, kind: str, request, on_lost):
        self.kind, self.request, self.on_lost = kind, request, on_lost
        self.done = threading.Event()
        self.result: Optional[lock_pb2.SessionResult] = None
        self.states: List[_LeaseState] = []  # a grant's leases, one per lock
        self.broken: Optional[str] = None  # why the stream broke before the result
        # Its caller gave up waiting: a grant that still arrives is undone by
        # the reader (_on_result), since the caller's own undo may have
        # reached lockd before the grant.
        self.abandoned = False

    def complete(self) -> None:
        self.done.set()


class SessionEvents:
    """What a session does with its operations and on the stream's events,
    written once for the thread (_Session) and the asyncio task
    (lockd._aio_session.AioSession). A subclass has the fields _core,
    _keep, _status, _error, _requests (the open stream's outbox), counts,
    _call, _next_op, _ops, _leases and granted_ttl, an _abandon(op_id, op),
    and the hooks: _locked() (the context guarding the fields),
    _set_status_locked(status) (wakes whoever waits for a change),
    _defer(run) (runs an on_lost callback outside the reader),
    _reader_ends_locked() (the reader stops for good), _later(delay, run)."""

    def forget(self, state: _LeaseState) -> None:
        with self._locked():
            self._leases.discard(state)

    def _new_op_id(self) -> int:
        op_id = self._next_op
        self._next_op += 1
        return op_id

    # -- the caller's side of an operation

    def _queue_locked(self, op) -> Tuple[int, object]:
        """Sends ``op`` on the open stream: (its op_id, op). Raises the
        session's error if it failed, CANCELLED (not_applied) if closed."""
        if self._status == "failed":
            raise self._error
        if self._status != "open":
            raise _SessionError(grpc.StatusCode.CANCELLED, "client closed", not_applied=True)
        op_id = self._new_op_id()
        self._ops[op_id] = op
        self._requests.put(op_message(op.kind, op_id, op.request))
        return op_id, op

    def _cancel(self, op_id: int, op) -> None:
        with self._locked():
            if op_id in self._ops and self._status == "open":  # not completed yet
                self._requests.put(lock_pb2.SessionRequest(
                    cancel=lock_pb2.SessionCancel(op_id=op_id)))

    def _interrupted(self, op_id: int, op) -> None:
        """The caller of an acquire was interrupted (or cancelled) while it
        waited: cancel it in lockd; a grant that comes later is given back
        (_on_result), one that came already is the caller's to undo."""
        self._cancel(op_id, op)
        self._abandon(op_id, op)
        for state in op.states:
            self.forget(state)

    def _past_deadline(self, op, answered: bool) -> None:
        """An acquire's deadline passed and it was cancelled; ``answered``:
        its result (or the stream's end) came within the undo bound. Raises
        the DEADLINE_EXCEEDED to retry or fail with: not_applied when lockd
        answered CANCELLED, with the grant's tokens when it was granted
        after all (the caller undoes it). Returns for any other result."""
        if not answered:
            raise _SessionError(grpc.StatusCode.DEADLINE_EXCEEDED,
                                "no result before the deadline (cancel unanswered)")
        if op.states:
            for state in op.states:
                self.forget(state)
            err = _SessionError(grpc.StatusCode.DEADLINE_EXCEEDED, "granted after the deadline")
            err.granted_tokens = [state.fencing_token for state in op.states]
            raise err
        if op.result is not None and op.result.status.code == _CANCELLED:
            raise _SessionError(grpc.StatusCode.DEADLINE_EXCEEDED,
                                "deadline passed; cancelled", not_applied=True)

    @staticmethod
    def _outcome(kind: str, op):
        """The response of a completed operation, or its error raised."""
        error = op_error(op.result, op.broken)
        if error is not None:
            raise error
        body = getattr(op.result, kind)
        return (body, op.states) if kind != "release" else body

    def release_async(self, state: _LeaseState) -> None:
        """Best effort, for a collected Lease: one release, result ignored."""
        self.forget(state)
        req = lock_pb2.ReleaseRequest(namespace=state.namespace, name=state.name,
                                      owner=state.owner, fencing_token=state.fencing_token)
        with self._locked():
            if self._status == "open":
                self._requests.put(lock_pb2.SessionRequest(
                    release=lock_pb2.SessionRelease(op_id=self._new_op_id(), request=req)))

    # -- the reader's side

    def _on_response(self, resp: lock_pb2.SessionResponse) -> bool:
        """Handles one message from lockd; True if it was ``opened``."""
        kind = resp.WhichOneof("kind")
        if kind == "result":
            self._on_result(resp.result)
        elif kind == "batch":
            self.counts.response_batches += 1
            self.counts.response_items += len(resp.batch.items)
            for item in resp.batch.items:  # each as if it had come alone
                self._on_response(item)
        elif kind == "lost":
            self._on_lost(resp.lost)
        elif kind == "opened":
            self._on_opened(resp.opened)
            return True
        return False

    def _on_opened(self, opened: lock_pb2.SessionOpened) -> None:
        resumed = resumed_keys(opened)
        lost = []
        with self._locked():
            self.granted_ttl = _seconds(opened.lease_ttl)
            for s in list(self._leases):
                if (s.namespace, s.name, s.fencing_token) in resumed:
                    s.resume_session()
                else:
                    self._leases.discard(s)
                    lost.append(s)
            if self._status == "connecting":
                self._set_status_locked("open")
        for s in lost:
            s.mark_lost(LockLost(
                "lease of %s lost: not held any more when the session reconnected"
                % _describe(s.namespace, s.name), "LOCK_NOT_HELD"), self._defer)

    def _on_result(self, result: lock_pb2.SessionResult) -> None:
        with self._locked():
            op = self._ops.pop(result.op_id, None)
            if op is None:
                return  # a release_async, or a release whose caller gave up
            granted = granted_locks(op.kind, op.request, result)
            if op.abandoned:
                # Given back here: the caller's own undo may have reached
                # lockd before the grant.
                if granted and self._status == "open":
                    for msg in undo_messages(op.request, [r.fencing_token for _, r in granted],
                                             self._new_op_id):
                        self._requests.put(msg)
                return
            op.result = result
            for spec, resp in granted:
                state = session_lease(self._core, self, spec, resp, self.granted_ttl, op.on_lost)
                self._leases.add(state)
                op.states.append(state)
        op.complete()

    def _on_lost(self, lost: lock_pb2.LockLost) -> None:
        key = lost_key(lost)
        with self._locked():
            gone = [s for s in self._leases if (s.namespace, s.name, s.fencing_token) == key]
            self._leases.difference_update(gone)
        for s in gone:
            s.mark_lost(LockLost("lease of %s lost: lockd reported %s"
                                 % (_describe(s.namespace, s.name), lost.reason or "NOT_HELD"),
                                 lost.reason or "NOT_HELD"), self._defer)

    def _on_end(self, error: Optional[grpc.RpcError], opened: bool) -> bool:
        """The stream ended. Fails the operations in flight; returns True to
        reconnect."""
        why = "session stream ended: %s" % (error.details() if error is not None else "OK")
        code = error.code() if error is not None else grpc.StatusCode.OK
        now = time.monotonic()
        with self._locked():
            self._call = None
            self._requests = None
            ops, self._ops = self._ops, {}
            leases = list(self._leases)
            closed = self._status == "closed"
            reconnect = False
            if closed:
                pass
            elif not opened and code in _FATAL_AT_OPEN:
                self._error = _SessionError(code, why, not_applied=True)
                self._leases = set()
                self._set_status_locked("failed")
            elif leases:
                self._set_status_locked("connecting")
                reconnect = True
            else:
                self._set_status_locked("idle")  # nothing to resume: the next operation reconnects
            if not reconnect:
                self._reader_ends_locked()
            if not self._keep and not closed:
                self._leases = set()
        for op in ops.values():
            op.broken = why
            op.complete()
        for s in leases:
            if self._keep and reconnect:
                s.suspend_session(break_validity(s, now))
            elif not closed:  # else close() marks them
                s.mark_lost(LockLost("lease of %s lost: %s" % (_describe(s.namespace, s.name),
                                                               why), "SESSION_ENDED"), self._defer)
        if reconnect:
            _log.debug("lockd: %s; reconnecting", why)
            if self._keep:
                self._expire_suspended()
        return reconnect

    def _expire_suspended(self) -> None:
        """Marks the suspended leases whose validity has ended lost, and runs
        again (_later) when the next one ends: the reader may be stuck
        meanwhile in a reconnect to a hung lockd (gRPC's connect timeout is
        20 s), so its pause alone would notice too late."""
        now = time.monotonic()
        with self._locked():
            leases = list(self._leases)
            closed = self._status == "closed"
        pending = []
        for s in leases:
            if s.check_expiry(now, self._defer):
                self.forget(s)
            elif s.active and s.valid_until < math.inf:
                pending.append(s.valid_until)
        if pending and not closed:
            self._later(max(0.0, min(pending) - now), self._expire_suspended)

    def _closed_leases(self, leases) -> None:
        """What close() does to the leases it took: they end as a break
        would (keep_on_disconnect: valid until break_validity; else lost,
        CLIENT_CLOSED)."""
        now = time.monotonic()
        for state in leases:
            if self._keep:
                state.suspend_session(break_validity(state, now))
            else:
                state.mark_lost(LockLost("lease of %s ended: the client was closed"
                                         % _describe(state.namespace, state.name),
                                         "CLIENT_CLOSED"), self._defer)


class _Session(SessionEvents):
    """Thread-safe: every field below _mu is guarded by it."""

    def __init__(self, core: ClientCore, ttl: Optional[float], keep_on_disconnect: bool):
        self._core = core
        self.ttl = ttl  # the lease it asks (None: lockd's default); fixed
        self._keep = keep_on_disconnect
        self._mu = threading.Condition()
        # "idle" (no thread), "connecting", "open", "failed", "closed".
        self._status = "idle"
        self._error: Optional[_SessionError] = None  # why "failed"
        self._thread: Optional[threading.Thread] = None
        self._requests: Optional[_Outbox] = None  # the open stream's writes
        self.counts = WireCounts()  # written by the request iterator and the reader
        self._call = None
        self._next_op = 1
        self._ops: Dict[int, _Op] = {}
        self._leases: Set[_LeaseState] = set()
        self.granted_ttl: Optional[float] = None

    # -- used by lockd.client

    @property
    def failed(self) -> bool:
        with self._mu:
            return self._status in ("failed", "closed")

    def acquire(self, request, timeout: float, undo_bound: float, on_lost,
                cancel: Optional[Cancellation] = None) -> Tuple[object, List[_LeaseState]]:
        """Sends ``request`` (an AcquireRequest, or an AcquireAllRequest) and
        waits up to ``timeout`` for its result. Past it (or when
        interrupted) sends cancel; then waits up to ``undo_bound`` for the
        result: CANCELLED means no hold (not_applied). Returns the response
        (AcquireResponse or AcquireAllResponse) and, when acquired, the lease
        state of each lock (already tracked). ``cancel`` cancelled: raises
        lockd.Cancelled as an interruption would."""
        kind = "acquire_all" if isinstance(request, lock_pb2.AcquireAllRequest) else "acquire"
        op_id, op = self._send(kind, request, time.monotonic() + timeout, on_lost, cancel)
        # A cancel wakes the wait below; op.result and op.broken still None
        # then tell it from a completion.
        stop_waking = cancel.on_cancel(op.done.set) if cancel is not None else None
        try:
            finished = op.done.wait(max(timeout, 0.0))
            if cancel is not None and op.result is None and op.broken is None:
                cancel.check()
        except BaseException:
            self._interrupted(op_id, op)
            raise
        finally:
            if stop_waking is not None:
                stop_waking()
        if not finished:
            self._cancel(op_id, op)
            self._past_deadline(op, op.done.wait(undo_bound) or not self._abandon(op_id, op))
        return self._outcome(kind, op)

    def release(self, request: lock_pb2.ReleaseRequest, timeout: float) -> lock_pb2.ReleaseResponse:
        """One release over the stream; errors as _SessionError (UNAVAILABLE
        when the stream broke: retry with the same request_id)."""
        op_id, op = self._send("release", request, time.monotonic() + timeout, None)
        if not op.done.wait(max(timeout, 0.0)):
            with self._mu:
                self._ops.pop(op_id, None)
            raise _SessionError(grpc.StatusCode.DEADLINE_EXCEEDED, "no result before the deadline")
        return self._outcome("release", op)

    def close(self, timeout: float) -> None:
        """Ends the stream as a break would (cancelled, no half-close), so
        that holds, detached ones included, end as the session's
        keep_on_disconnect says: with their lease (leases stay valid until
        break_validity) or at once (leases lost, CLIENT_CLOSED). Waits up to
        ``timeout`` for the thread to end."""
        with self._mu:
            self._status = "closed"
            call, thread = self._call, self._thread
            leases, self._leases = self._leases, set()
            self._mu.notify_all()
        if call is not None:
            call.cancel()
        if thread is not None and thread is not threading.current_thread():
            thread.join(timeout)
        self._closed_leases(leases)

    # -- operations

    def _send(self, kind: str, request, deadline: float, on_lost,
              cancel: Optional[Cancellation] = None) -> Tuple[int, _Op]:
        """Waits for the stream to be open (until ``deadline``), then queues
        the operation. Raises _SessionError(not_applied) when it cannot,
        lockd.Cancelled when ``cancel`` is cancelled first."""
        stop_waking = cancel.on_cancel(self._wake) if cancel is not None else None
        try:
            return self._send_when_open(kind, request, deadline, on_lost, cancel)
        finally:
            if stop_waking is not None:
                stop_waking()

    def _wake(self) -> None:
        with self._mu:
            self._mu.notify_all()

    def _send_when_open(self, kind: str, request, deadline: float, on_lost,
                        cancel: Optional[Cancellation]) -> Tuple[int, _Op]:
        with self._mu:
            while self._status in ("idle", "connecting"):
                if cancel is not None:
                    cancel.check()
                if self._status == "idle":
                    self._start_locked()
                left = deadline - time.monotonic()
                if left <= 0:
                    raise _SessionError(grpc.StatusCode.UNAVAILABLE,
                                        "session stream not connected", not_applied=True)
                self._mu.wait(left)
            return self._queue_locked(_Op(kind, request, on_lost))

    def _abandon(self, op_id: int, op: _Op) -> bool:
        """The caller stops waiting for ``op``. Returns False if its result
        (or the stream's end) came first: handle it as usual. Else a grant
        that still comes is given back by _on_result."""
        with self._mu:
            if self._ops.get(op_id) is op:
                op.abandoned = True
                return True
        op.done.wait()  # being completed right now, outside _mu
        return False

    # -- SessionEvents' hooks

    def _locked(self):
        return self._mu

    def _set_status_locked(self, status: str) -> None:
        self._status = status
        self._mu.notify_all()

    def _defer(self, run: Callable[[], None]) -> None:
        _in_thread(run)

    def _reader_ends_locked(self) -> None:
        if self._thread is threading.current_thread():
            self._thread = None

    def _later(self, delay: float, run: Callable[[], None]) -> None:
        timer = threading.Timer(delay, run)
        timer.daemon = True
        timer.start()

    # -- the thread

    def _start_locked(self) -> None:
        self._status = "connecting"
        self._thread = threading.Thread(target=self._run, name="lockd-session", daemon=True)
        self._thread.start()

    def _open_request(self) -> lock_pb2.SessionRequest:
        return open_request(self._core, self.ttl, self._keep, self._leases)

    def _run(self) -> None:
        backoff = self._core.initial_backoff
        while True:
            with self._mu:
                if self._status == "closed":
                    return
                requests = _Outbox(self._open_request(), self.counts)
                self._requests = requests
            opened = False
            error: Optional[grpc.RpcError] = None
            try:
                call = self._core.stub.Session(requests.messages())
                with self._mu:
                    self._call = call
                    if self._status == "closed":  # close() ran before the call existed
                        call.cancel()
                for resp in call:
                    if self._on_response(resp):
                        opened = True
                        backoff = self._core.initial_backoff
            except grpc.RpcError as e:
                error = e
            except Exception as e:  # never let the reader die silently
                _log.exception("lockd: session reader failed")
                error = _SessionError(grpc.StatusCode.INTERNAL, str(e))
            requests.end()  # ends the request iterator (gRPC's thread)
            if not self._on_end(error, opened):
                return
            backoff = self._pause(backoff)
            if backoff is None:
                return

    def _pause(self, backoff: float) -> Optional[float]:
        """Sleeps a jittered ``backoff`` (waking early for a lease whose
        validity ends, which it marks lost). Returns the next backoff, or None
        when the session was closed or no lease is left to resume."""
        resume_at = time.monotonic() + self._core.jittered(backoff)
        while True:
            now = time.monotonic()
            with self._mu:
                leases = list(self._leases)
            for s in leases:
                if s.check_expiry(now, _in_thread):
                    self.forget(s)
            with self._mu:
                if self._status == "closed":
                    return None
                if not self._leases and not self._ops and now >= resume_at:
                    self._status = "idle"
                    self._thread = None
                    self._mu.notify_all()
                    return None
                if now >= resume_at:
                    return self._core.next_backoff(backoff)
                wake = min([resume_at] + [s.valid_until for s in self._leases])
                self._mu.wait(max(0.0, wake - now))


# -- what a session does, without I/O: shared with lockd._aio_session

# The server's bound on a SessionBatch (more is a protocol error).
MAX_BATCH_OPS = 1000
# A batch stops growing before its ops pass this many bytes, well inside
# gRPC's default 4 MiB receive limit of lockd.
MAX_BATCH_BYTES = 1 << 20


class WireCounts:
    """What one session sent and received, over all its streams: messages
    written (``open`` included), of them SessionBatches and the ops they
    carried; response batches read and their items. Each field has one
    writer (the request iterator, or the reader); for tests and tuning."""

    def __init__(self):
        self.messages = self.batches = self.batched_ops = 0
        self.response_batches = self.response_items = 0

    def wrote(self, msg: lock_pb2.SessionRequest) -> None:
        """Counts ``msg``, about to be written."""
        self.messages += 1
        if msg.WhichOneof("kind") == "batch":
            self.batches += 1
            self.batched_ops += len(msg.batch.ops)


def next_write(queued: collections.deque, counts: WireCounts) -> lock_pb2.SessionRequest:
    """Takes the next message to write off the head of ``queued`` (op
    messages, not empty): the head alone when nothing is queued behind it,
    else ONE SessionBatch of the ops from the head, in order, at most
    MAX_BATCH_OPS and, unless the head alone is larger, MAX_BATCH_BYTES."""
    if len(queued) == 1:
        msg = queued.popleft()
        counts.wrote(msg)
        return msg
    ops = [queued.popleft()]
    size = ops[0].ByteSize()
    while queued and len(ops) < MAX_BATCH_OPS:
        size += queued[0].ByteSize()
        if size > MAX_BATCH_BYTES:
            break
        ops.append(queued.popleft())
    msg = ops[0] if len(ops) == 1 else lock_pb2.SessionRequest(
        batch=lock_pb2.SessionBatch(ops=ops))
    counts.wrote(msg)
    return msg


def open_request(core, ttl: Optional[float], keep: bool, leases) -> lock_pb2.SessionRequest:
    """The stream's first message: open for core's owner and namespace,
    resuming every live lease of ``leases`` (once per hold)."""
    open_ = lock_pb2.SessionOpen(owner=core.owner, namespace=core.namespace,
                                 keep_on_disconnect=keep)
    if ttl is not None:
        _set_duration(open_.lease_ttl, ttl)
    seen = set()
    for s in leases:
        key = (s.namespace, s.name, s.fencing_token)
        if key not in seen and s.active and s.lost_error is None:
            seen.add(key)
            open_.resume.add(namespace=s.namespace, name=s.name, fencing_token=s.fencing_token)
    return lock_pb2.SessionRequest(open=open_)


def op_message(kind: str, op_id: int, request) -> lock_pb2.SessionRequest:
    """The message of an operation: ``kind`` "acquire", "acquire_all" or
    "release"."""
    if kind == "acquire":
        return lock_pb2.SessionRequest(
            acquire=lock_pb2.SessionAcquire(op_id=op_id, request=request))
    if kind == "acquire_all":
        return lock_pb2.SessionRequest(
            acquire_all=lock_pb2.SessionAcquireAll(op_id=op_id, request=request))
    return lock_pb2.SessionRequest(release=lock_pb2.SessionRelease(op_id=op_id, request=request))


def undo_messages(acquire, tokens: List[int],
                  new_op_id: Callable[[], int]) -> List[lock_pb2.SessionRequest]:
    """The releases that give back the holds of an abandoned acquire (or
    acquire_all), granted with ``tokens`` (one per lock)."""
    return [lock_pb2.SessionRequest(release=lock_pb2.SessionRelease(
        op_id=new_op_id(), request=lock_pb2.ReleaseRequest(
            namespace=spec.namespace, name=spec.name, owner=acquire.owner,
            acquire_request_id=acquire.request_id, fencing_token=token)))
        for spec, token in zip(_specs(acquire), tokens)]


def resumed_keys(opened: lock_pb2.SessionOpened) -> Set[Tuple[str, str, int]]:
    return {(i.namespace or "default", i.name, i.fencing_token) for i in opened.resumed}


def lost_key(lost: lock_pb2.LockLost) -> Tuple[str, str, int]:
    return (lost.namespace or "default", lost.name, lost.fencing_token)


def granted_locks(kind: str, request, result: lock_pb2.SessionResult) -> List[Tuple]:
    """(spec, response) of each lock an acquire op's ``result`` granted;
    [] for a release, an error or a refusal."""
    if kind not in ("acquire", "acquire_all") or result.status.code != 0:
        return []
    body = getattr(result, kind)
    if not body.acquired:
        return []
    responses = list(body.locks) if kind == "acquire_all" else [body]
    return list(zip(_specs(request), responses))


def session_lease(core, session, spec, resp, granted_ttl: Optional[float],
                  on_lost) -> _LeaseState:
    """The lease state of one lock granted over ``session``: valid while
    the stream is open."""
    ttl = _seconds(resp.lease_ttl) or granted_ttl
    state = _LeaseState(core, spec.namespace, spec.name, core.owner, resp.fencing_token,
                        resp.hold_count, ttl, True, math.inf, on_lost,
                        _mode_from_proto(spec.mode), spec.limit, spec.permits)
    state.session = session
    return state


def op_error(result: Optional[lock_pb2.SessionResult],
             broken: Optional[str]) -> Optional[_SessionError]:
    """The error of a completed operation (None: it succeeded)."""
    if broken is not None:
        return _SessionError(grpc.StatusCode.UNAVAILABLE, broken)
    status = result.status
    if status.code != 0:
        return _SessionError(_CODES.get(status.code, grpc.StatusCode.UNKNOWN),
                             status.message, status.SerializeToString())
    return None


def _specs(request) -> List:
    """The locks of an acquire request: its LockSpecs (AcquireAllRequest),
    or the AcquireRequest itself (it has the same fields)."""
    return list(request.locks) if isinstance(request, lock_pb2.AcquireAllRequest) else [request]


def _in_thread(run: Callable[[], None]) -> None:
    """Runs an on_lost callback on a thread of its own: on the reader thread
    a callback waiting for the session (an acquire) would wait forever."""
    threading.Thread(target=run, name="lockd-on-lost", daemon=True).start()


class _Outbox:
    """The writes of one stream: put() by any thread, messages() pulled by
    gRPC's thread (see "Batches" in the module docstring). Thread-safe:
    its fields are guarded by _cv."""

    def __init__(self, open_msg: lock_pb2.SessionRequest, counts: WireCounts):
        self._open, self._counts = open_msg, counts
        self._cv = threading.Condition(threading.Lock())
        self._queued: collections.deque = collections.deque()
        self._ended = False

    def put(self, msg: lock_pb2.SessionRequest) -> None:
        with self._cv:
            if not self._ended:
                self._queued.append(msg)
                self._cv.notify()

    def end(self) -> None:
        """The stream ended: messages() returns; what is queued is dropped."""
        with self._cv:
            self._ended = True
            self._cv.notify()

    def messages(self):
        """The stream's request iterator: ``open``, then what is queued,
        batched by next_write each time gRPC asks, until end()."""
        self._counts.wrote(self._open)
        yield self._open
        while True:
            with self._cv:
                while not self._queued and not self._ended:
                    self._cv.wait()
                if self._ended:
                    return
                msg = next_write(self._queued, self._counts)
            yield msg
