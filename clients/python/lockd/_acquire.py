"""One Client.acquire() call, whichever path it takes (lockd.client chooses
the session or the unary RPCs): its request and deadlines, the attempts
with retries and the undo of attempts whose outcome is unknown, and the
errors it raises. Private to the lockd package. A call takes one lock of
any kind (an AcquireRequest with mode, limit and permits) or, for
acquire_all(), several at once (an AcquireAllRequest); an attempt of the
latter is undone on every one of its locks.

Rules (lockd.client, "No hold left behind"): an attempt that ends with an
unknown outcome (errors._OUTCOME_UNKNOWN) or is interrupted may have added
a hold. Before a retry (after UNAVAILABLE) it is undone; a confirmed undo
gives the next attempt a new request_id, an unconfirmed one keeps it (the
server answers a repeat with the first result). Before the call fails, the
last such attempt is undone; if that undo goes unanswered the error's
``unconfirmed_acquire_request_id`` names it.

Not thread-safe: one call belongs to the thread of its acquire() (or the
task of its lockd.aio acquire()).
"""

import asyncio
import time
import uuid
from typing import TYPE_CHECKING, Awaitable, Callable, List, Optional, Sequence, TypeVar, Union

import grpc

from lockd._cancel import Cancellation
from lockd._core import ClientCore
from lockd._plan import ATTEMPT, SLEEP, UNDO, arun, run
from lockd._proto.lockd.v1 import lock_pb2
from lockd._values import _lock_info_from_proto, _set_duration
from lockd.errors import (
    _OUTCOME_UNKNOWN,
    LockdError,
    LockNotAcquired,
    Unavailable,
    _describe,
    _translate_on,
)

if TYPE_CHECKING:
    from lockd._aio_core import AsyncCore

T = TypeVar("T")



class AcquireCall:
    """See the module docstring. Times in seconds (time.monotonic() clock)."""

    def __init__(self, core: Union[ClientCore, "AsyncCore"], locks: List[lock_pb2.LockSpec],
                 owner: str, ttl: Optional[float], wait: float, timeout: Optional[float],
                 all_locks: bool = False):
        """``locks``: namespaces resolved; one, unless ``all_locks`` (an
        AcquireAll of every one)."""
        self._core = core
        self.locks, self.all, self.owner = locks, all_locks, owner
        self.namespace, self.name = locks[0].namespace, locks[0].name
        self.what = (_describe(self.namespace, self.name) if not all_locks else
                     "locks " + ", ".join(_describe(s.namespace, s.name) for s in locks))
        self._wait = wait
        start = time.monotonic()
        self._wait_end = start + wait
        self._total = timeout if timeout is not None else wait + core.rpc_timeout
        self.deadline = start + self._total
        if all_locks:
            self.request = lock_pb2.AcquireAllRequest(locks=locks, owner=owner,
                                                      request_id=uuid.uuid4().hex)
        else:
            spec = locks[0]
            self.request = lock_pb2.AcquireRequest(
                namespace=spec.namespace, name=spec.name, owner=owner, mode=spec.mode,
                limit=spec.limit, permits=spec.permits, request_id=uuid.uuid4().hex)
        if ttl is not None:
            _set_duration(self.request.lease_ttl, ttl)
        self.send_time = start  # of the latest attempt
        self._backoff = core.initial_backoff
        # An attempt that may have left a hold: its request_id (None: none
        # known) and its grant's fencing tokens, one per lock, if the client
        # saw the grant (a session op's ``granted_tokens``), else ().
        self._unresolved: Optional[str] = None
        self._unresolved_tokens: Sequence[int] = ()

    # Each operation below is a plan (lockd._plan) run by a driver: drive()
    # for the synchronous client, adrive() for lockd.aio. The rules live in
    # the plans only.

    def send(self, attempt: Callable[[float], T], cancel: Optional[Cancellation] = None) -> T:
        """Runs attempt(timeout_seconds), an Acquire of ``request`` (its
        wait_timeout set to what is left of the wait, ``send_time`` to the
        attempt's start), until it gets the server's answer (returned, or
        its definite error raised), fails with an unknown outcome other than
        UNAVAILABLE, or the next backoff pause would end past the deadline:
        the last grpc.RpcError is raised; failure() makes it the call's
        error. Interrupted (KeyboardInterrupt, Cancelled from ``cancel``,
        which also ends a backoff pause): undoes the attempt that may have
        been on its way, then re-raises. Called again (the path changed), it
        goes on with the same request, backoff and undo."""
        return self.drive(self._send_plan(), attempt, cancel)

    async def asend(self, attempt: Callable[[float], Awaitable[T]]) -> T:
        """send() for lockd.aio: ``attempt`` is a coroutine function; the
        task's cancellation is the interruption."""
        return await self.adrive(self._send_plan(), attempt)

    def failure(self, error: grpc.RpcError) -> LockdError:
        """The error to raise for send()'s ``error``, after the undo of an
        attempt that may have left a hold."""
        return self.drive(self._undone_plan(self.failure_error(error)))

    async def afailure(self, error: grpc.RpcError) -> LockdError:
        return await self.adrive(self._undone_plan(self.failure_error(error)))

    def check_granted(self, resp) -> List[lock_pb2.AcquireResponse]:
        """The grant of each lock, in ``locks`` order, from ``resp`` (an
        AcquireResponse, or an AcquireAllResponse for acquire_all). Raises
        LockNotAcquired (naming the holder lockd reported: ``current``, or
        ``blocked_on`` for acquire_all), after the undo of an attempt that
        may have left a hold, unless ``resp`` granted every lock."""
        if resp.acquired:
            return list(resp.locks) if self.all else [resp]
        raise self.drive(self._undone_plan(self._not_granted(resp)))

    async def acheck_granted(self, resp) -> List[lock_pb2.AcquireResponse]:
        if resp.acquired:
            return list(resp.locks) if self.all else [resp]
        raise await self.adrive(self._undone_plan(self._not_granted(resp)))

    # -- the drivers: the I/O of this call's plans (lockd._plan)

    def drive(self, plan, attempt: Optional[Callable[[float], T]] = None,
              cancel: Optional[Cancellation] = None):
        """Runs ``plan`` with blocking I/O: attempt(timeout), the core's
        undo, time.sleep (ended by ``cancel``)."""
        sleep = cancel.sleep if cancel is not None else time.sleep
        io = {ATTEMPT: attempt, UNDO: lambda args: self._core.undo_confirmed(*args),
              SLEEP: sleep}
        return run(plan, lambda action, arg: io[action](arg))

    async def adrive(self, plan, attempt: Optional[Callable[[float], Awaitable[T]]] = None):
        """drive() with asyncio I/O (the core is lockd._aio_core.AsyncCore)."""
        io = {ATTEMPT: attempt, UNDO: lambda args: self._core.undo_confirmed(*args),
              SLEEP: asyncio.sleep}
        return await arun(plan, lambda action, arg: io[action](arg))

    # -- the plans

    def _send_plan(self):
        try:
            return (yield from self._retry_with_undo())
        except grpc.RpcError:
            raise
        except BaseException:
            if self._unresolved is not None:
                yield from self._undo(self._unresolved,
                                      time.monotonic() + self._core.undo_timeout(), None,
                                      self._unresolved_tokens)
            raise

    def failure_error(self, error: grpc.RpcError) -> LockdError:
        """failure()'s error, before the undo."""
        if error.code() == grpc.StatusCode.DEADLINE_EXCEEDED:
            if self.deadline > self._wait_end:
                return Unavailable(
                    "lockd acquire of %s: no reply within %gs (%s)"
                    % (self.what, self._total, error.details()),
                    grpc.StatusCode.DEADLINE_EXCEEDED)
            return LockNotAcquired("lockd acquire of %s: not acquired within %gs"
                                   % (self.what, self._total))
        return _translate_on("acquire", self.what, error)

    def _not_granted(self, resp) -> LockNotAcquired:
        field = "blocked_on" if self.all else "current"
        holder = _lock_info_from_proto(getattr(resp, field)) if resp.HasField(field) else None
        who = ""
        if holder is not None and holder.held:
            which = _describe(holder.namespace, holder.name) + " " if self.all else ""
            who = '; %sheld by owner "%s" (fencing token %d)' % (which, holder.owner,
                                                                 holder.fencing_token)
        return LockNotAcquired("lockd acquire of %s: not acquired %s%s" % (
            self.what, "within %gs" % self._wait if self._wait > 0 else "(no wait)", who),
            holder)

    def _undo(self, request_id: str, deadline: float, errors: Optional[List[LockdError]],
              tokens: Sequence[int] = ()):
        """The undo of attempt ``request_id`` on every lock of the call
        (the core's undo_confirmed each; ``tokens``: the grant's, per lock,
        when known). True if every undo was confirmed."""
        confirmed = True
        for i, spec in enumerate(self.locks):
            token = tokens[i] if i < len(tokens) else 0
            if not (yield UNDO, (spec.namespace, spec.name, self.owner, request_id, deadline,
                                  errors, token)):
                confirmed = False
        return confirmed

    def _retry_with_undo(self):
        req, core = self.request, self._core
        while True:
            now = time.monotonic()
            if self._wait_end > now:
                _set_duration(req.wait_timeout, self._wait_end - now)
            else:
                req.ClearField("wait_timeout")
            self.send_time = now
            try:
                return (yield ATTEMPT, max(self.deadline - now, 0.0))
            except grpc.RpcError as e:
                if e.code() not in _OUTCOME_UNKNOWN:
                    raise
                applied = not getattr(e, "not_applied", False)  # a session op may know
                if applied:
                    self._unresolved = req.request_id
                    self._unresolved_tokens = getattr(e, "granted_tokens", ())
                if e.code() != grpc.StatusCode.UNAVAILABLE:
                    raise
                resume = time.monotonic() + core.jittered(self._backoff)
                if resume >= self.deadline:
                    raise
                if applied and (yield from self._undo(
                        self._unresolved,
                        min(time.monotonic() + core.undo_timeout(), self.deadline), None)):
                    self._unresolved, self._unresolved_tokens = None, ()
                    req.request_id = uuid.uuid4().hex
                if time.monotonic() >= self.deadline:
                    raise
                yield SLEEP, max(0.0, resume - time.monotonic())
                self._backoff = core.next_backoff(self._backoff)
            except BaseException:
                # Interrupted: it may have been sent.
                self._unresolved, self._unresolved_tokens = req.request_id, ()
                raise

    def _undone_plan(self, err: LockdError):
        """Undoes the attempt that may have left a hold (if any) before
        ``err`` is raised; if the undo goes unanswered, says so in ``err``."""
        request_id = self._unresolved
        if request_id is None:
            return err
        errors: List[LockdError] = []
        if (yield from self._undo(request_id, time.monotonic() + self._core.undo_timeout(),
                                  errors, self._unresolved_tokens)):
            return err
        err.args = ('%s; the undo of this acquire (owner "%s", acquire request id %s) was not '
                    'confirmed: %s; a hold it may have left ends with its lease unless undone'
                    % (err, self.owner, request_id, errors[0]),)
        err.unconfirmed_acquire_request_id = request_id
        return err
