"""What a lockd.aio.Client shares with its sessions, its renewal task and
its leases: lockd._core's settings and rules (CoreSettings) with calls on a
grpc.aio stub. The twin of lockd._core.ClientCore; the requests, backoff and
bounds are CoreSettings', the errors lockd.errors'. Private.

Not thread-safe: used from its Client's event loop only.
"""

import asyncio
from typing import Awaitable, Callable, List, Optional, Tuple, TypeVar

import grpc

from lockd._core import CoreSettings
from lockd._plan import ATTEMPT, arun
from lockd.errors import LockdError, _translate

T = TypeVar("T")


class AsyncCore(CoreSettings):
    """CoreSettings with grpc.aio calls. Times in seconds (time.monotonic())."""

    async def call_with_retry(self, deadline: float,
                              attempt: Callable[[float], Awaitable[T]]) -> T:
        """ClientCore.call_with_retry with a coroutine ``attempt``."""
        return await arun(self.retry_plan(deadline),
                          lambda action, arg: (attempt(arg) if action == ATTEMPT
                                               else asyncio.sleep(arg)))

    async def release_hold(self, ns: str, name: str, owner: str, fencing_token: int,
                           deadline: float, session=None) -> Tuple[bool, int]:
        """ClientCore.release_hold (``session``: a lockd._aio_session.AioSession)."""
        req = self.release_request(ns, name, owner, fencing_token)

        async def attempt(t: float):
            if session is not None and not session.failed:
                return await session.release(req, t)
            return await self.stub.Release(req, timeout=t)

        try:
            resp = await self.call_with_retry(deadline, attempt)
        except grpc.RpcError as e:
            raise _translate("release", ns, name, e) from None
        return resp.released, resp.hold_count

    async def undo_acquire(self, ns: str, name: str, owner: str, request_id: str,
                           deadline: float, fencing_token: int = 0) -> Tuple[bool, int]:
        """ClientCore.undo_acquire."""
        req = self.undo_request(ns, name, owner, request_id, fencing_token)
        try:
            resp = await self.call_with_retry(deadline,
                                              lambda t: self.stub.Release(req, timeout=t))
        except grpc.RpcError as e:
            raise _translate("undo of the acquire", ns, name, e) from None
        return resp.released, resp.hold_count

    async def undo_confirmed(self, ns: str, name: str, owner: str, request_id: str,
                             deadline: float, errors: Optional[List[LockdError]] = None,
                             fencing_token: int = 0) -> bool:
        """ClientCore.undo_confirmed."""
        try:
            await self.undo_acquire(ns, name, owner, request_id, deadline, fencing_token)
            return True
        except LockdError as e:
            return self.undo_answered(e, errors)
