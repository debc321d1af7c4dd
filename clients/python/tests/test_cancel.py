"""Tests of lockd.Cancellation: the synchronous client's waiting acquire
cancelled from another thread, against the real lockd binary (a fresh one
per test, test_client.LockdTestBase). CancelTest runs over sessions,
CancelUnaryTest over the unary RPCs.
"""

import threading
import time
import unittest

import lockd
from test_client import LockdTestBase, wait_until


def _forbidden(*args, **kwargs):
    raise AssertionError("an RPC was sent for a call cancelled before it started")


class CancelTest(LockdTestBase):
    def _waiting(self, b, cancel, call):
        """Runs call() (an acquire of b that waits, given ``cancel``) in a
        thread; returns (thread, result dict with "error" or "lease")."""
        result = {}

        def run():
            try:
                result["lease"] = call()
            except BaseException as e:  # noqa: B036 (reported to the test)
                result["error"] = e

        t = threading.Thread(target=run)
        t.start()
        return t, result

    def test_cancel_from_another_thread_ends_a_waiting_acquire_leaving_nothing(self):
        a, b, observer = self.client(), self.client(owner="cancelled"), self.client()
        held = a.acquire("x", ttl=10)
        b.try_acquire("warm-up", ttl=10).release()  # connected (and the session opened)
        cancel = lockd.Cancellation()
        t, result = self._waiting(b, cancel, lambda: b.acquire("x", ttl=10, wait=30,
                                                               cancel=cancel))
        self.assertTrue(wait_until(lambda: observer.describe("x").waiters == 1, 5))
        start = time.monotonic()
        cancel.cancel()
        t.join(5)
        self.assertFalse(t.is_alive())
        self.assertLess(time.monotonic() - start, 2, "the cancelled acquire did not end promptly")
        self.assertIsInstance(result.get("error"), lockd.Cancelled, result)
        self.assertIsNone(result["error"].unconfirmed_acquire_request_id)
        self.assertTrue(wait_until(lambda: observer.describe("x").waiters == 0, 5),
                        "the cancelled acquire still waits in lockd")
        held.release()
        time.sleep(0.3)  # a grant the cancel missed would show here
        info = observer.describe("x")
        self.assertFalse(info.held, "the cancelled acquire left a hold: %r" % (info,))
        b.try_acquire("x", ttl=10).release()  # the client still works

    def test_cancel_ends_a_waiting_acquire_all(self):
        a, b, observer = self.client(), self.client(), self.client()
        held = a.acquire("acct/2", ttl=10)
        cancel = lockd.Cancellation()
        t, result = self._waiting(b, cancel, lambda: b.acquire_all(
            ["acct/1", "acct/2"], ttl=10, wait=30, cancel=cancel))
        self.assertTrue(wait_until(lambda: observer.describe("acct/2").waiters == 1, 5))
        cancel.cancel()
        t.join(5)
        self.assertIsInstance(result.get("error"), lockd.Cancelled, result)
        held.release()
        time.sleep(0.3)
        for name in ("acct/1", "acct/2"):
            self.assertFalse(observer.describe(name).held, name)

    def test_cancelled_beforehand_sends_nothing(self):
        b = self.client()
        b.try_acquire("warm-up", ttl=10).release()
        cancel = lockd.Cancellation()
        cancel.cancel()
        b._core.stub.Acquire = b._core.stub.AcquireAll = _forbidden
        if b._session is not None:  # None over the unary RPCs
            b._session._send = _forbidden
        with self.assertRaises(lockd.Cancelled):
            b.acquire("x", ttl=10, wait=30, cancel=cancel)
        with self.assertRaises(lockd.Cancelled):
            b.semaphore("s", 2).acquire(1, ttl=10, cancel=cancel)

    def test_cancellation_does_not_touch_a_granted_lease(self):
        b, observer = self.client(), self.client()
        cancel = lockd.Cancellation()
        lease = b.acquire("x", ttl=10, cancel=cancel)
        cancel.cancel()
        time.sleep(0.2)
        self.assertTrue(lease.valid())
        self.assertTrue(self.held_by(observer, "x", b.owner))
        lease.release()


class CancelUnaryTest(CancelTest):
    """CancelTest over the unary RPCs."""
    USE_SESSIONS = False


if __name__ == "__main__":
    unittest.main()
