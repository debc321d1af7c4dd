"""Tests of lockd.aio, the asyncio client, against the real lockd binary
(memory backend, a fresh one per test, as test_client.LockdTestBase starts
it). AioTest runs over sessions (the default), AioUnaryTest runs the same
tests again over the unary RPCs (use_sessions=False). Clients notice a hung
lockd within K = 2 s, so that ttl >= 3.1 s goes over a session.
"""

import asyncio
import gc
import os
import re
import signal
import subprocess
import sys
import time
import unittest

import lockd
import lockd.aio
from test_client import LockdTestBase, StallProxy


async def eventually(cond, timeout: float = 10) -> bool:
    """Awaits until cond() (a coroutine function) is true, or the timeout."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if await cond():
            return True
        await asyncio.sleep(0.01)
    return False


class AioTestBase(unittest.IsolatedAsyncioTestCase):
    USE_SESSIONS = True

    # A fresh lockd per test, as for the synchronous client's tests; the
    # clients are closed by asyncTearDown, before tearDown stops lockd.
    setUp = LockdTestBase.setUp
    tearDown = LockdTestBase.tearDown

    async def asyncTearDown(self):
        clients, self.clients = self.clients, []
        for c in clients:
            await c.close()

    def client(self, target=None, **kwargs) -> lockd.aio.Client:
        kwargs.setdefault("rpc_timeout", 3)
        kwargs.setdefault("use_sessions", self.USE_SESSIONS)
        kwargs.setdefault("keepalive_time", 1)
        kwargs.setdefault("keepalive_timeout", 1)
        c = lockd.aio.Client(target or self.lockd.address, **kwargs)
        self.clients.append(c)
        return c

    async def proxied_client(self, **kwargs):
        """(a StallProxy in front of lockd, a client through it, connected
        and with its session for ttl=30 open before any reply is held)."""
        proxy = StallProxy(self.lockd.port)
        self.addCleanup(proxy.close)
        client = self.client(target=proxy.address, **kwargs)
        await client.describe("warm-up")
        await (await client.try_acquire("warm-up", ttl=30)).release()
        return proxy, client

    async def held_by(self, observer, name: str, owner: str) -> bool:
        info = await observer.describe(name)
        return info.held and info.owner == owner


class AioTest(AioTestBase):
    async def test_lock_excludes_tasks_of_other_clients(self):
        inside, overlaps, counter = [0], [0], [0]

        async def worker(client):
            for _ in range(5):
                async with client.lock("counter", ttl=10, wait=20) as lease:
                    self.assertTrue(lease.valid())
                    inside[0] += 1
                    overlaps[0] = max(overlaps[0], inside[0])
                    value = counter[0]
                    await asyncio.sleep(0.005)  # another task would run here
                    counter[0] = value + 1
                    inside[0] -= 1

        await asyncio.gather(*(worker(self.client()) for _ in range(4)))
        self.assertEqual((counter[0], overlaps[0]), (20, 1))
        self.assertFalse((await self.client().describe("counter")).held)

    async def test_same_owner_is_reentrant_and_releases_in_order(self):
        a, observer = self.client(), self.client()
        first = await a.acquire("x", ttl=10)
        again = await a.acquire("x", ttl=10)
        self.assertEqual((again.hold_count, again.fencing_token), (2, first.fencing_token))
        await again.release()
        self.assertTrue(await self.held_by(observer, "x", a.owner))
        await first.release()
        self.assertFalse((await observer.describe("x")).held)

    async def test_acquire_of_a_held_lock_times_out_naming_the_holder(self):
        a, b = self.client(), self.client()
        held = await a.acquire("x", ttl=10)
        with self.assertRaises(lockd.LockNotAcquired) as cm:
            await b.try_acquire("x", ttl=10)
        self.assertEqual(cm.exception.holder.owner, a.owner)
        start = time.monotonic()
        with self.assertRaises(lockd.LockNotAcquired):
            await b.acquire("x", ttl=10, wait=0.5)
        self.assertGreaterEqual(time.monotonic() - start, 0.45)
        self.assertLess(time.monotonic() - start, 3)
        await held.release()
        (await b.try_acquire("x", ttl=10)).detach()  # free now

    async def test_waiter_gets_the_lock_after_release_with_a_greater_token(self):
        a, b = self.client(), self.client()
        held = await a.acquire("x", ttl=10)
        waiter = asyncio.ensure_future(b.acquire("x", ttl=10, wait=20))
        await asyncio.sleep(0.3)
        self.assertFalse(waiter.done())
        await held.release()
        lease = await asyncio.wait_for(waiter, 5)
        self.assertGreater(lease.fencing_token, held.fencing_token)
        await lease.release()

    async def _cancel_waiting_acquire(self, cancel):
        a, b, observer = self.client(), self.client(owner="canceller"), self.client()
        held = await a.acquire("x", ttl=10)
        await b.try_acquire("warm-up", ttl=10)  # connected (and the session opened)
        waiter = asyncio.ensure_future(b.acquire("x", ttl=10, wait=30))
        self.assertTrue(await eventually(
            lambda: _async((observer.describe("x")), lambda i: i.waiters == 1), 5))
        start = time.monotonic()
        await cancel(waiter)
        self.assertLess(time.monotonic() - start, 2, "the cancelled acquire did not end promptly")
        self.assertTrue(await eventually(
            lambda: _async(observer.describe("x"), lambda i: i.waiters == 0), 5),
            "the cancelled acquire still waits in lockd")
        await held.release()
        await asyncio.sleep(0.3)  # a grant the cancel missed would show here
        info = await observer.describe("x")
        self.assertFalse(info.held, "the cancelled acquire left a hold: %r" % (info,))
        lease = await b.try_acquire("x", ttl=10)  # the client still works
        self.assertEqual(lease.hold_count, 1)
        await lease.release()

    async def test_cancelling_the_task_of_a_waiting_acquire_leaves_nothing_behind(self):
        async def cancel(waiter):
            waiter.cancel()
            with self.assertRaises(asyncio.CancelledError):
                await waiter

        await self._cancel_waiting_acquire(cancel)

    async def test_wait_for_timeout_cancels_a_waiting_acquire(self):
        async def cancel(waiter):
            with self.assertRaises(asyncio.TimeoutError):
                await asyncio.wait_for(waiter, 0.2)

        await self._cancel_waiting_acquire(cancel)

    async def test_killed_lockd_makes_the_lease_lost_and_calls_on_lost(self):
        a = self.client()
        fired = []
        lease = await a.acquire("x", ttl=4, on_lost=fired.append)
        self.assertTrue(lease.valid())
        self.lockd.stop()  # SIGKILL
        # Session: valid until the break - K + ttl*2/3 - drift (< 1 s here);
        # unary: until the last renewal's send + ttl - drift (< 4 s).
        self.assertTrue(await eventually(lambda: _async(asyncio.sleep(0), lambda _: fired), 6),
                        "on_lost was not called")
        self.assertEqual(len(fired), 1)
        self.assertIsInstance(fired[0], lockd.LockLost)
        self.assertEqual(fired[0].reason, "VALIDITY_EXPIRED")
        self.assertTrue(lease.lost.is_set())
        self.assertFalse(lease.valid())
        with self.assertRaises(lockd.LockLost):
            await lease.release()

    async def test_hung_lockd_makes_the_lease_lost_in_time(self):
        # SIGSTOP: the connection stays open, nothing answers. Over a session
        # keepalive breaks the stream within K = 2 s and the lease ends at
        # the break - K + ttl*2/3 - drift; unary, at the last renewal's send
        # + ttl - drift. Both before lockd could grant the lock again.
        ttl = 6
        bound = ttl * 2 / 3 + 1 if self.USE_SESSIONS else ttl + 1
        a = self.client()
        fired = []
        lease = await a.acquire("x", ttl=ttl, on_lost=fired.append)
        os.kill(self.lockd.proc.pid, signal.SIGSTOP)
        stopped = time.monotonic()
        try:
            self.assertTrue(await eventually(lambda: _async(asyncio.sleep(0), lambda _: fired),
                                             bound), "on_lost not called in time")
        finally:
            os.kill(self.lockd.proc.pid, signal.SIGCONT)
        self.assertLess(time.monotonic() - stopped, bound)
        self.assertEqual([e.reason for e in fired], ["VALIDITY_EXPIRED"])
        self.assertFalse(lease.valid())

    async def test_restarted_lockd_makes_the_lease_lost(self):
        a = self.client()
        lease = await a.acquire("x", ttl=6)
        self.lockd.stop()
        self.lockd.start()  # memory backend: the hold is gone
        self.assertTrue(await eventually(lambda: _async(asyncio.sleep(0),
                                                        lambda _: lease.lost.is_set()), 8))
        self.assertIn(lease.lost_error.reason, ("LOCK_NOT_HELD", "VALIDITY_EXPIRED"))
        (await a.acquire("x", ttl=6)).detach()  # the client reconnected

    async def test_shared_semaphore_and_all_or_nothing_kinds(self):
        a, b, c = self.client(), self.client(), self.client()
        r1 = await a.acquire_shared("catalog", ttl=10)
        r2 = await b.acquire_shared("catalog", ttl=10)
        self.assertEqual(len((await c.describe("catalog")).holders), 2)
        with self.assertRaises(lockd.LockNotAcquired):
            await c.try_acquire("catalog", ttl=10)  # a writer waits for the readers
        await r1.release()
        await r2.release()

        sems = [x.semaphore("api", limit=2) for x in (a, b, c)]
        p1, p2 = await sems[0].acquire(1, ttl=10), await sems[1].acquire(1, ttl=10)
        with self.assertRaises(lockd.LockNotAcquired):
            await sems[2].try_acquire(1, ttl=10)
        with self.assertRaises(lockd.LockdError) as cm:
            await c.semaphore("api", limit=3).try_acquire(1, ttl=10)
        self.assertEqual(cm.exception.reason, "LOCK_KIND_MISMATCH")
        await p1.release()
        async with sems[2].hold(1, ttl=10) as p3:
            self.assertEqual((p3.permits, p3.limit), (1, 2))
        await p2.release()

        async with a.lock_all(["acct/1", "acct/2"], ttl=10, wait=5) as both:
            self.assertEqual([lease.name for lease in both], ["acct/1", "acct/2"])
            with self.assertRaises(lockd.LockNotAcquired):
                await b.acquire_all(["acct/2", "acct/3"], ttl=10)
            self.assertFalse((await c.describe("acct/3")).held)  # all or nothing
        self.assertFalse((await c.describe("acct/1")).held)

    async def test_acquire_whose_deadline_passes_while_lockd_grants_leaves_no_hold(self):
        # Keepalive acks are held back too: a long K keeps the connection.
        proxy, client = await self.proxied_client(owner="late-reply", release_timeout=3,
                                                  keepalive_time=10, keepalive_timeout=8)
        observer = self.client()
        proxy.hold_replies(True)
        attempt = asyncio.ensure_future(client.acquire("x", ttl=30, timeout=0.5))
        # lockd grants and writes the reply, which the proxy keeps: only the
        # client's undo can give the hold back.
        self.assertTrue(await eventually(lambda: self.held_by(observer, "x", "late-reply")))
        self.assertTrue(await eventually(
            lambda: _async(observer.describe("x"), lambda i: not i.held), 5),
            "the hold of an acquire that timed out was left behind")
        proxy.hold_replies(False)
        with self.assertRaises(lockd.Unavailable) as cm:
            await asyncio.wait_for(attempt, 10)
        self.assertIsNone(cm.exception.unconfirmed_acquire_request_id)
        self.assertFalse((await observer.describe("x")).held)

    async def test_acquire_retried_after_its_reply_was_lost_leaves_hold_count_one(self):
        proxy, client = await self.proxied_client(owner="retried")
        observer = self.client()
        proxy.hold_replies(True)
        attempt = asyncio.ensure_future(client.acquire("x", ttl=30, timeout=20))
        self.assertTrue(await eventually(lambda: self.held_by(observer, "x", "retried")))
        proxy.cut()  # UNAVAILABLE after lockd applied it: undone, then retried
        proxy.hold_replies(False)
        lease = await asyncio.wait_for(attempt, 25)
        info = await observer.describe("x")
        self.assertEqual((info.owner, info.hold_count, info.fencing_token),
                         ("retried", 1, lease.fencing_token))
        await lease.release()
        self.assertFalse((await observer.describe("x")).held, "a second hold was left behind")

    async def test_list_renew_and_force_release_by_owner(self):
        a, operator = self.client(), self.client()
        lease = await a.acquire("jobs/1", ttl=10)
        self.assertEqual(await operator.renew("jobs/1", a.owner, ttl=20),
                         (20, lease.fencing_token))
        self.assertEqual([i.name async for i in operator.list("jobs/")], ["jobs/1"])
        released, previous = await operator.force_release("jobs/1", "test")
        self.assertEqual((released, previous.owner), (True, a.owner))
        self.assertFalse((await operator.describe("jobs/1")).held)
        with self.assertRaises(lockd.LockLost):
            await operator.renew("jobs/1", a.owner)

    async def test_collected_lease_is_released_in_the_background(self):
        a, observer = self.client(), self.client()
        lease = await a.acquire("x", ttl=10)
        del lease
        gc.collect()
        self.assertTrue(await eventually(
            lambda: _async(observer.describe("x"), lambda i: not i.held), 5),
            "a collected lease stayed held")

    async def test_short_ttl_and_other_owner_go_unary_as_in_the_sync_client(self):
        a = self.client()
        short = await a.acquire("short", ttl=3)  # 3*2/3 - drift <= K = 2 s
        other = await a.acquire("other", ttl=10, owner="someone-else")
        self.assertLess(short.valid_until, time.monotonic() + 3)  # send-time validity
        self.assertLess(other.valid_until, time.monotonic() + 10)
        self.assertIsNone(a._session)
        await asyncio.sleep(1.5)  # past ttl/3: renewed by its task
        self.assertTrue(short.valid())
        await short.release()
        await other.release()


class AioOneSessionTest(AioTestBase):
    async def test_one_session_with_one_lease_other_ttls_go_unary(self):
        # As the synchronous client (clients/testdata/acquire_paths.json):
        # the session's lease is the ttl of the acquire that opened it.
        a, observer = self.client(), self.client()
        first = await a.acquire("first", ttl=10)
        session = a._session
        other = await a.acquire("other", ttl=20)
        default = await a.acquire("default")
        self.assertIs(a._session, session)
        self.assertEqual((session.ttl, first.valid_until), (10, float("inf")))
        self.assertEqual(other.ttl, 20)
        self.assertLess(other.valid_until, time.monotonic() + 20)  # unary: send-time validity
        self.assertEqual((default.ttl, default.valid_until), (10, float("inf")))
        for lease in (first, other, default):
            self.assertTrue(await self.held_by(observer, lease.name, a.owner), lease.name)
            await lease.release()
            self.assertFalse((await observer.describe(lease.name)).held, lease.name)


class AioDocumentedExampleTest(AioTestBase):
    async def test_documented_example_runs(self):
        # The `<!-- doc-test: python-aio -->` block of docs/clients/python.md.
        source = os.environ.get("LOCKD_SOURCE_DIR") or os.path.join(
            os.path.dirname(os.path.abspath(__file__)), "..", "..", "..")
        with open(os.path.join(source, "docs", "clients", "python.md")) as f:
            block = re.search(r"<!-- doc-test: python-aio -->\s*\n```python\n(.*?)\n```",
                              f.read(), re.DOTALL).group(1)
        self.assertIn("127.0.0.1:7411", block)
        proc = await asyncio.create_subprocess_exec(
            sys.executable, "-c", block.replace("127.0.0.1:7411", self.lockd.address),
            stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
        out, _ = await asyncio.wait_for(proc.communicate(), 60)
        self.assertEqual(proc.returncode, 0, out.decode(errors="replace"))
        self.assertIn(b"holding orders/42 with fencing token", out)


class AioUnaryTest(AioTest):
    """AioTest over the unary RPCs."""
    USE_SESSIONS = False


async def _async(awaitable, predicate):
    """predicate(await awaitable): for eventually()."""
    return predicate(await awaitable)


if __name__ == "__main__":
    unittest.main()
