"""lockd.aio: the asyncio twin of lockd.Client, on grpc.aio.

    import lockd.aio

    async with lockd.aio.Client("127.0.0.1:7411") as client:
        async with client.lock("orders/42", ttl=10, wait=5) as lease:
            await charge(order, fencing_token=lease.fencing_token)

The same semantics as the synchronous client (read lockd.client's
docstring): the same choice of path (lockd._paths: the Client's one session
by default; unary for auto_renew=False, another owner=, a ttl that is not
session-safe or not the session's lease), the same lease-validity bound
(lockd._validity), safe retries and the undo of an acquire whose outcome is
unknown (lockd._acquire, the same plan), sessions that lockd renews, resumed
after a reconnect, leases lost when lockd says so or when their validity
runs out, the same errors (lockd.errors) and values. Locks are reentrant per
owner (the Client's, or ``owner=``): tasks sharing a Client share its holds,
as threads sharing a synchronous Client do; give each task its own Client
(or owner) for mutual exclusion between tasks.

What differs:

* Every call is a coroutine; ``async with`` replaces ``with``; list() is an
  async iterator.
* Cancellation is asyncio's: cancel the task (or let asyncio.wait_for /
  asyncio.timeout do it) and a waiting acquire is cancelled in lockd and
  undone before CancelledError propagates, so nothing of it stays held
  (unless that undo goes unanswered, as for any acquire).
* Unary leases are renewed every ttl/3 by one task per lease (instead of the
  watchdog thread); the session's reader is a task too. on_lost callbacks
  are plain functions run by the event loop (loop.call_soon for session
  leases); they must not block.
* A Lease collected while active is released in the background (best
  effort) on the Client's event loop, as lockd.Client does.

Not thread-safe: a Client, its leases and its tasks belong to the event loop
that created the Client (the first call needs a running loop).
"""

import asyncio
import os
import time
import weakref
from typing import (
    AsyncIterator,
    Callable,
    List,
    Optional,
    Sequence,
    Tuple,
    Union,
)

import grpc

from lockd._acquire import AcquireCall
from lockd._aio_core import AsyncCore
from lockd._aio_session import AioSession
from lockd._auth import aio_bearer_interceptors
from lockd._auth import bearer_token as resolve_token
from lockd._handles import LeaseSetView, LeaseView, check_acquire_args, proto_specs, semaphore_spec
from lockd._paths import choose_session
from lockd._proto.lockd.v1 import lock_pb2, lock_pb2_grpc
from lockd._target import keepalive_window, open_channel
from lockd._validity import unary_valid_until
from lockd._values import SHARED, LockInfo, LockSpec, _lock_info_from_proto, _mode_from_proto
from lockd._values import _new_owner, _seconds
from lockd._watchdog import _LeaseState
from lockd.client import DEFAULT_SERVER
from lockd.errors import LockdError, LockLost, Unavailable, _describe, _translate

__all__ = ["Client", "Lease", "LeaseSet", "Semaphore"]


class Lease(LeaseView):
    """One hold of one owner on (namespace, name): lockd.Lease's attributes
    (name, namespace, owner, fencing_token, hold_count, ttl, mode, limit,
    permits, lost, lost_error, valid_until, active), with coroutines
    release() and renew(). ``async with`` releases on exit (raising
    LockLost if the lease was lost, unless the block raised)."""

    def __init__(self, state: _LeaseState, client: "Client"):
        self._state = state
        abandon = (state.session.release_async if state.session is not None
                   else client._abandon)
        self._finalizer = weakref.finalize(self, abandon, state)
        self._finalizer.atexit = False

    async def renew(self) -> None:
        """lockd.Lease.renew()."""
        await _renew(self._state, self._renew_deadline())

    async def release(self, timeout: Optional[float] = None) -> None:
        """lockd.Lease.release()."""
        s = self._state
        self._stop_renewing()
        s.start_release()
        timeout = s.core.rpc_timeout if timeout is None else timeout
        try:
            await s.core.release_hold(s.namespace, s.name, s.owner, s.fencing_token,
                                      time.monotonic() + timeout, s.session)
        except LockLost as e:
            raise s.release_refused(e) from None

    def detach(self) -> None:
        """lockd.Lease.detach(): stops renewing and tracking, no release."""
        self._stop_renewing()
        self._state.end(time.monotonic())
        if self._state.session is not None:
            self._state.session.forget(self._state)

    def _stop_renewing(self) -> None:
        self._finalizer.detach()
        renewer = self._state.renewer
        if renewer is not None and renewer is not asyncio.current_task():
            renewer.cancel()

    async def __aenter__(self) -> "Lease":
        return self

    async def __aexit__(self, exc_type, exc, tb) -> bool:
        if not self._state.active:
            return False
        if exc_type is not None:
            try:
                await self.release(self._state.core.release_timeout)
            except LockdError:
                pass  # don't mask the block's own exception
            return False
        await self.release(self._state.core.release_timeout)
        return False


class LeaseSet(LeaseSetView):
    """The leases of one acquire_all(), in the order given (lockd.LeaseSet)."""

    async def release(self, timeout: Optional[float] = None) -> None:
        """Releases every active lease; raises the first error after trying all."""
        await self._each(lambda lease: lease.release(timeout))

    async def _each(self, op) -> None:
        first: Optional[LockdError] = None
        for lease in self.leases:
            if not lease.active:
                continue
            try:
                await op(lease)
            except LockdError as e:
                first = first or e
        if first is not None:
            raise first

    async def __aenter__(self) -> "LeaseSet":
        return self

    async def __aexit__(self, exc_type, exc, tb) -> bool:
        await self._each(lambda lease: lease.__aexit__(exc_type, exc, tb))
        return False


class Semaphore:
    """lockd.Semaphore's handle, with coroutines."""

    def __init__(self, client: "Client", name: str, limit: int, namespace: Optional[str]):
        self.client, self.name, self.limit, self.namespace = client, name, limit, namespace

    async def acquire(self, permits: int = 1, **kwargs) -> Lease:
        """lockd.Semaphore.acquire()."""
        spec = semaphore_spec(self.name, self.limit, permits, self.namespace)
        return (await self.client._acquire([spec], False, namespace=self.namespace,
                                           **kwargs))[0]

    async def try_acquire(self, permits: int = 1, **kwargs) -> Lease:
        kwargs["wait"] = 0
        return await self.acquire(permits, **kwargs)

    def hold(self, permits: int = 1, **kwargs) -> "_LockContext":
        """``async with sem.hold(2, wait=5) as lease:``."""
        return _LockContext(lambda: self.acquire(permits, **kwargs))


class _LockContext:
    """What Client.lock() and its kin return: acquires on enter, releases on exit."""

    def __init__(self, acquire):
        self._acquire = acquire
        self._held: Optional[Union[Lease, LeaseSet]] = None

    async def __aenter__(self):
        self._held = await self._acquire()
        return self._held

    async def __aexit__(self, exc_type, exc, tb) -> bool:
        held, self._held = self._held, None
        return await held.__aexit__(exc_type, exc, tb)


class Client:
    """A connection to lockd for asyncio code. The arguments are
    lockd.Client's (target, owner, namespace, credentials, server_name,
    bearer_token, bearer_token_file, rpc_timeout, release_timeout,
    initial_backoff, max_backoff, clock_drift_factor, min_clock_drift,
    use_sessions, keep_on_disconnect, keepalive_time, keepalive_timeout),
    except ``channel``: a grpc.aio.Channel (bearer_token is not applied to a
    given channel: give it the interceptors). Use ``async with`` or await
    close()."""

    def __init__(self, target: Optional[str] = None, *,
                 channel: Optional[grpc.aio.Channel] = None,
                 credentials: Optional[grpc.ChannelCredentials] = None,
                 server_name: Optional[str] = None, bearer_token: Optional[str] = None,
                 bearer_token_file: Optional[str] = None, use_sessions: bool = True,
                 keep_on_disconnect: bool = True, keepalive_time: float = 2.0,
                 keepalive_timeout: float = 2.0, owner: Optional[str] = None,
                 namespace: str = "", **timing: float):
        """``timing``: rpc_timeout, release_timeout, initial_backoff,
        max_backoff, clock_drift_factor, min_clock_drift (lockd.Client's
        defaults)."""
        hang_bound = keepalive_window(keepalive_time, keepalive_timeout)
        self.target = target or os.environ.get("LOCKD_SERVER") or DEFAULT_SERVER
        self._own_channel = channel is None
        if channel is None:
            token = resolve_token(bearer_token, bearer_token_file)
            channel = open_channel(grpc.aio, self.target, credentials, server_name,
                                   keepalive_time, keepalive_timeout,
                                   interceptors=aio_bearer_interceptors(token) if token else None)
        self._channel = channel
        self._core = AsyncCore(lock_pb2_grpc.LockServiceStub(channel),
                               owner=owner or _new_owner(), namespace=namespace,
                               hang_bound=hang_bound, **timing)
        self._use_sessions = use_sessions
        self._keep_on_disconnect = keep_on_disconnect
        self._session: Optional[AioSession] = None  # lockd._paths: one per Client
        self._renewers: set = set()  # the renewal tasks, and releases of collected leases
        self._loop: Optional[asyncio.AbstractEventLoop] = None  # known once a task started

    owner = property(lambda self: self._core.owner,
                     lambda self, owner: setattr(self._core, "owner", owner))
    namespace = property(lambda self: self._core.namespace,
                         lambda self, ns: setattr(self._core, "namespace", ns))

    async def close(self) -> None:
        """lockd.Client.close(): ends the session and the renewals, closes
        the channel (if this Client made it); holds are not released."""
        session, self._session = self._session, None
        self._use_sessions = False
        if session is not None:
            await session.close()
        renewers, self._renewers = list(self._renewers), set()
        for task in renewers:
            task.cancel()
        await asyncio.gather(*renewers, return_exceptions=True)
        if self._own_channel:
            await self._channel.close()

    async def __aenter__(self) -> "Client":
        return self

    async def __aexit__(self, *exc) -> bool:
        await self.close()
        return False

    # -- locks

    def lock(self, name: str, **kwargs) -> _LockContext:
        """``async with client.lock(name, ttl=10, wait=5) as lease:``."""
        return _LockContext(lambda: self.acquire(name, **kwargs))

    async def acquire(self, name: str, *, ttl: Optional[float] = None, wait: float = 0,
                      timeout: Optional[float] = None, namespace: Optional[str] = None,
                      owner: Optional[str] = None, auto_renew: bool = True,
                      on_lost: Optional[Callable[[LockLost], None]] = None) -> Lease:
        """lockd.Client.acquire(); cancelling the task cancels the call."""
        return (await self._acquire([LockSpec(name, namespace)], False, ttl=ttl, wait=wait,
                                    timeout=timeout, namespace=namespace, owner=owner,
                                    auto_renew=auto_renew, on_lost=on_lost))[0]

    async def try_acquire(self, name: str, **kwargs) -> Lease:
        kwargs["wait"] = 0
        return await self.acquire(name, **kwargs)

    async def acquire_shared(self, name: str, **kwargs) -> Lease:
        """lockd.Client.acquire_shared()."""
        return (await self._acquire([LockSpec(name, kwargs.get("namespace"), SHARED)], False,
                                    **kwargs))[0]

    def shared_lock(self, name: str, **kwargs) -> _LockContext:
        return _LockContext(lambda: self.acquire_shared(name, **kwargs))

    async def acquire_all(self, locks: Sequence[Union[str, LockSpec]], **kwargs) -> LeaseSet:
        """lockd.Client.acquire_all()."""
        specs = [LockSpec(x) if isinstance(x, str) else x for x in locks]
        return LeaseSet(await self._acquire(specs, True, **kwargs))

    def lock_all(self, locks: Sequence[Union[str, LockSpec]], **kwargs) -> _LockContext:
        return _LockContext(lambda: self.acquire_all(locks, **kwargs))

    def semaphore(self, name: str, limit: int, *, namespace: Optional[str] = None) -> Semaphore:
        return Semaphore(self, name, limit, namespace)

    async def _acquire(self, specs: List[LockSpec], all_locks: bool, *,
                       ttl: Optional[float] = None, wait: float = 0,
                       timeout: Optional[float] = None, namespace: Optional[str] = None,
                       owner: Optional[str] = None, auto_renew: bool = True,
                       on_lost: Optional[Callable[[LockLost], None]] = None) -> List[Lease]:
        check_acquire_args(ttl, wait, timeout)
        call = AcquireCall(self._core, proto_specs(specs, namespace, self._ns),
                           owner or self.owner, ttl, wait, timeout, all_locks)
        session = self._choose_path(ttl, owner, auto_renew)
        if session is not None:
            try:
                resp, states = await call.asend(
                    lambda t: session.acquire(call.request, t, self._core.undo_timeout(),
                                              on_lost))
            except grpc.RpcError as e:
                if e.code() != grpc.StatusCode.UNIMPLEMENTED:
                    raise (await call.afailure(e)) from None
                self._use_sessions = False  # then the unary path
            else:
                await call.acheck_granted(resp)
                return [Lease(state, self) for state in states]
        return await self._acquire_unary(call, ttl, auto_renew, on_lost)

    def _choose_path(self, ttl: Optional[float], owner: Optional[str],
                     auto_renew: bool) -> Optional[AioSession]:
        """lockd._paths, as lockd.Client._choose_path."""
        self._session, chosen = choose_session(
            self._session, lambda asked: AioSession(self._core, asked, self._keep_on_disconnect),
            ttl=ttl, owner=owner, client_owner=self.owner, auto_renew=auto_renew,
            use_sessions=self._use_sessions, session_safe=self._core.session_safe)
        return chosen

    async def _acquire_unary(self, call: AcquireCall, ttl: Optional[float], auto_renew: bool,
                             on_lost) -> List[Lease]:
        """lockd.Client._acquire_unary: validity from the granting attempt's
        send time, renewed at once if the wait used up a third of it, then
        every ttl/3 by a task per lease; all or nothing for acquire_all."""
        rpc = self._core.stub.AcquireAll if call.all else self._core.stub.Acquire
        try:
            resp = await call.asend(lambda t: rpc(call.request, timeout=t))
        except grpc.RpcError as e:
            raise (await call.afailure(e)) from None
        responses = await call.acheck_granted(resp)
        states = []
        for spec, r in zip(call.locks, responses):
            granted = _seconds(r.lease_ttl) if r.HasField("lease_ttl") else (ttl or 0)
            states.append(_LeaseState(
                self._core, spec.namespace, spec.name, call.owner, r.fencing_token,
                r.hold_count, granted, auto_renew,
                unary_valid_until(call.send_time, granted, self._core.drift(granted)), on_lost,
                _mode_from_proto(spec.mode), spec.limit, spec.permits))
        for i, state in enumerate(states):
            try:
                if state.ttl <= 0:
                    raise LockdError("lockd acquire of %s: the server granted the lock without "
                                     "a lease_ttl" % _describe(state.namespace, state.name),
                                     grpc.StatusCode.INTERNAL)
                await self._renew_late_grant(call, state)
            except LockdError:
                for j, other in enumerate(states):
                    if j != i:
                        await self._give_back(other)
                raise
        for state in states:
            if auto_renew:
                self._renew_every_third(state)
        return [Lease(state, self) for state in states]

    async def _renew_late_grant(self, call: AcquireCall, state: _LeaseState) -> None:
        """lockd.Client._renew_late_grant on ``state``."""
        now = time.monotonic()
        renew_at = call.send_time + state.ttl / 3
        if not ((state.auto_renew and now >= renew_at) or now >= state.valid_until):
            return
        core, ns, name = self._core, state.namespace, state.name
        rsend = time.monotonic()
        try:
            resp = await core.stub.Renew(
                state.renew_request(),
                timeout=max(call.deadline - rsend, min(core.rpc_timeout, state.ttl / 3)))
        except grpc.RpcError as e:
            err = _translate("renew", ns, name, e)
            if isinstance(err, LockLost):
                raise LockLost("lockd acquire of %s: granted, but the lease ended before the "
                               "reply could be used: %s" % (_describe(ns, name), err)) from None
            if time.monotonic() >= state.valid_until:
                await self._give_back(state)
                raise Unavailable("lockd acquire of %s: granted after waiting, but the lease "
                                  "could not be renewed: %s" % (_describe(ns, name), err)) \
                    from None
            return
        if resp.fencing_token != state.fencing_token:
            raise LockLost("lockd acquire of %s: the grant was lost before it could be renewed "
                           "(fencing token %d instead of %d)"
                           % (_describe(ns, name), resp.fencing_token, state.fencing_token),
                           "FENCING_TOKEN_CHANGED")
        granted = _seconds(resp.lease_ttl) if resp.HasField("lease_ttl") else state.ttl
        state.suspend_session(unary_valid_until(rsend, granted, core.drift(granted)))

    def _renew_every_third(self, state: _LeaseState) -> asyncio.Task:
        """The task renewing a unary lease every ttl/3 (sooner after a failed
        renewal) until it ends or is lost (validity ran out: marked lost)."""
        async def run() -> None:
            next_renew = time.monotonic() + state.ttl / 3
            while state.active and state.lost_error is None:
                await asyncio.sleep(max(0.0, min(next_renew, state.valid_until) -
                                        time.monotonic()))
                now = time.monotonic()
                if state.check_expiry(now) or not state.active:
                    return
                if now < next_renew:
                    continue
                send_time = now
                try:
                    await _renew(state, min(now + self._core.rpc_timeout, state.valid_until))
                    next_renew = send_time + state.ttl / 3
                except LockLost:
                    return
                except LockdError:
                    next_renew = time.monotonic() + min(max(state.ttl / 10, 0.05), 1.0)

        self._loop = asyncio.get_running_loop()
        task = state.renewer = self._loop.create_task(run())
        self._renewers.add(task)
        task.add_done_callback(self._renewers.discard)
        return task

    def _abandon(self, state: _LeaseState) -> None:
        """A unary Lease collected while active (from whatever thread the
        collector ran on): its renewals stop and it is released in the
        background, best effort, as lockd.Client does."""
        loop = self._loop
        if loop is not None and not loop.is_closed():
            loop.call_soon_threadsafe(self._release_abandoned, state)

    def _release_abandoned(self, state: _LeaseState) -> None:
        was_active, lost = state.end(time.monotonic())
        if state.renewer is not None:
            state.renewer.cancel()
        if was_active and lost is None:
            task = self._loop.create_task(self._give_back(state))
            self._renewers.add(task)
            task.add_done_callback(self._renewers.discard)

    async def _give_back(self, state: _LeaseState) -> None:
        """Best effort release of a grant that is not handed out."""
        try:
            await self._core.release_hold(state.namespace, state.name, state.owner,
                                          state.fencing_token,
                                          time.monotonic() + self._core.release_timeout)
        except LockdError:
            pass

    # -- by owner, and state

    async def release(self, name: str, owner: str, *, namespace: Optional[str] = None,
                      fencing_token: int = 0) -> Tuple[bool, int]:
        """lockd.Client.release()."""
        return await self._core.release_hold(self._ns(namespace), name, owner, fencing_token,
                                             time.monotonic() + self._core.rpc_timeout)

    async def undo_acquire(self, name: str, owner: str, acquire_request_id: str, *,
                           namespace: Optional[str] = None,
                           fencing_token: int = 0) -> Tuple[bool, int]:
        """lockd.Client.undo_acquire()."""
        if not acquire_request_id:
            raise LockdError("acquire_request_id must not be empty",
                             grpc.StatusCode.INVALID_ARGUMENT)
        return await self._core.undo_acquire(self._ns(namespace), name, owner,
                                             acquire_request_id,
                                             time.monotonic() + self._core.rpc_timeout,
                                             fencing_token)

    async def renew(self, name: str, owner: str, *, ttl: Optional[float] = None,
                    namespace: Optional[str] = None, fencing_token: int = 0) -> Tuple[float, int]:
        """lockd.Client.renew(): (ttl seconds, fencing token)."""
        req = lock_pb2.RenewRequest(namespace=self._ns(namespace), name=name, owner=owner,
                                    fencing_token=fencing_token)
        if ttl is not None:
            req.lease_ttl.FromNanoseconds(int(round(ttl * 1e9)))
        resp = await self._call("renew", req.namespace, name, self._core.stub.Renew, req)
        return _seconds(resp.lease_ttl), resp.fencing_token

    async def force_release(self, name: str, reason: str, *, fencing_token: int = 0,
                            namespace: Optional[str] = None) -> Tuple[bool, LockInfo]:
        """lockd.Client.force_release() (operators only; one attempt)."""
        req = lock_pb2.ForceReleaseRequest(namespace=self._ns(namespace), name=name,
                                           reason=reason, fencing_token=fencing_token)
        try:
            resp = await self._core.stub.ForceRelease(req, timeout=self._core.rpc_timeout)
        except grpc.RpcError as e:
            raise _translate("force-release", req.namespace, name, e) from None
        return resp.released, _lock_info_from_proto(resp.previous)

    async def describe(self, name: str, *, namespace: Optional[str] = None) -> LockInfo:
        """lockd.Client.describe()."""
        ns = self._ns(namespace)
        req = lock_pb2.DescribeRequest(namespace=ns, name=name)
        return _lock_info_from_proto(await self._call("describe", ns, name,
                                                      self._core.stub.Describe, req))

    async def list(self, prefix: str = "", *, namespace: Optional[str] = None,
                   page_size: int = 0) -> AsyncIterator[LockInfo]:
        """lockd.Client.list(), as an async iterator."""
        ns = self._ns(namespace)
        token = ""
        while True:
            req = lock_pb2.ListRequest(namespace=ns, prefix=prefix, page_size=page_size,
                                       page_token=token)
            resp = await self._call("list", ns, prefix + "*", self._core.stub.List, req)
            for info in resp.locks:
                yield _lock_info_from_proto(info)
            if not resp.next_page_token:
                return
            token = resp.next_page_token

    def _ns(self, namespace: Optional[str]) -> str:
        return (self.namespace if namespace is None else namespace) or "default"

    async def _call(self, what: str, ns: str, name: str, rpc, req):
        try:
            return await self._core.call_with_retry(time.monotonic() + self._core.rpc_timeout,
                                                    lambda t: rpc(req, timeout=t))
        except grpc.RpcError as e:
            raise _translate(what, ns, name, e) from None


async def _renew(state: _LeaseState, deadline: float) -> None:
    """_LeaseState.renew() on the grpc.aio stub."""
    send_time = time.monotonic()
    try:
        resp = await state.core.stub.Renew(state.renew_request(),
                                           timeout=max(deadline - send_time, 0.0))
    except grpc.RpcError as e:
        raise state.renew_failed(e) from None
    state.renewed(send_time, resp)

