"""Tests of batches on the Session stream, as in
docs/api.md "Batches on a Session": ops queued while a write is in flight
leave as one SessionBatch, a lone op leaves alone, response batches are
routed item by item. The rule itself (lockd._session.next_write) is tested
without a server; the rest against the real lockd binary (memory backend,
one per test, started by test_client.LockdTestBase), observed through the
session's WireCounts.
"""

import asyncio
import collections
import threading
import unittest

import lockd
from lockd._proto.lockd.v1 import lock_pb2
from lockd._session import MAX_BATCH_BYTES, MAX_BATCH_OPS, WireCounts, next_write
from test_aio import AioTestBase
from test_client import LockdTestBase


def release_op(op_id: int, name: str = "x") -> lock_pb2.SessionRequest:
    return lock_pb2.SessionRequest(release=lock_pb2.SessionRelease(
        op_id=op_id, request=lock_pb2.ReleaseRequest(name=name)))


def op_ids(msg: lock_pb2.SessionRequest):
    if msg.WhichOneof("kind") == "batch":
        return [op.release.op_id for op in msg.batch.ops]
    return [msg.release.op_id]


class NextWriteTest(unittest.TestCase):
    def test_a_lone_op_goes_alone_not_as_a_batch(self):
        counts = WireCounts()
        msg = next_write(collections.deque([release_op(7)]), counts)
        self.assertEqual(msg.WhichOneof("kind"), "release")
        self.assertEqual((counts.messages, counts.batches), (1, 0))

    def test_queued_ops_go_as_one_batch_in_order(self):
        counts, queued = WireCounts(), collections.deque(release_op(i) for i in range(1, 6))
        msg = next_write(queued, counts)
        self.assertEqual(msg.WhichOneof("kind"), "batch")
        self.assertEqual(op_ids(msg), [1, 2, 3, 4, 5])
        self.assertFalse(queued)
        self.assertEqual((counts.messages, counts.batches, counts.batched_ops), (1, 1, 5))

    def test_a_batch_holds_at_most_the_servers_limit_of_ops(self):
        counts = WireCounts()
        queued = collections.deque(release_op(i) for i in range(1, 2 * MAX_BATCH_OPS + 2))
        writes = [op_ids(next_write(queued, counts)) for _ in range(3)]
        self.assertEqual([len(w) for w in writes], [MAX_BATCH_OPS, MAX_BATCH_OPS, 1])
        self.assertEqual(sum(writes, []), list(range(1, 2 * MAX_BATCH_OPS + 2)))
        self.assertEqual((counts.messages, counts.batches), (3, 2))

    def test_a_batch_stops_before_its_bytes_pass_the_bound(self):
        big = MAX_BATCH_BYTES // 3  # three fit only without their headers
        queued = collections.deque(release_op(i, "n" * big) for i in range(1, 5))
        counts = WireCounts()
        writes = [op_ids(next_write(queued, counts)) for _ in range(2)]
        self.assertEqual(writes, [[1, 2], [3, 4]])
        for _ in range(2):
            queued.append(release_op(9, "n" * (MAX_BATCH_BYTES + 1)))  # alone larger than it
        self.assertEqual(op_ids(next_write(queued, counts)), [9])
        self.assertEqual(len(queued), 1)


class SyncBatchingTest(LockdTestBase):
    THREADS, PAIRS = 24, 40

    def test_a_lone_op_is_sent_alone(self):
        c = self.client()
        for _ in range(5):
            c.acquire("alone", ttl=30).release()
        counts = c._session.counts
        # open, then each acquire and release in a message of its own
        self.assertEqual((counts.messages, counts.batches), (11, 0))
        self.assertEqual(counts.response_batches, 0)  # lockd batches only for a batching client

    def test_threads_sharing_a_client_batch_their_ops_and_get_their_own_results(self):
        c, other = self.client(), self.client()
        # Half the threads want a lock `other` holds: their results (not
        # acquired, that holder) must not reach the threads whose locks are free.
        busy = {"busy-%d" % i: other.acquire("busy-%d" % i, ttl=30)
                for i in range(self.THREADS // 2)}
        c.acquire("warm-up", ttl=30).release()  # the session is open
        errors = []

        def run(name: str) -> None:
            try:
                for _ in range(self.PAIRS):
                    if name in busy:
                        with self.assertRaises(lockd.LockNotAcquired) as cm:
                            c.acquire(name, ttl=30)
                        self.assertEqual((cm.exception.holder.name, cm.exception.holder.owner),
                                         (name, other.owner))
                    else:
                        lease = c.acquire(name, ttl=30)
                        self.assertEqual(lease.hold_count, 1)
                        # Released by its fencing token: another lock's
                        # token would be LockLost (LOCK_NOT_HELD).
                        lease.release()
            except BaseException as e:  # reported by the main thread
                errors.append((name, e))

        names = list(busy) + ["free-%d" % i for i in range(self.THREADS - len(busy))]
        threads = [threading.Thread(target=run, args=(n,)) for n in names]
        for t in threads:
            t.start()
        for t in threads:
            t.join(60)
        self.assertEqual(errors, [])
        counts = c._session.counts
        ops = 2 + self.PAIRS * (len(busy) + 2 * (self.THREADS - len(busy)))
        self.assertGreater(counts.batches, 0, "no batch was sent under load")
        self.assertEqual(counts.messages - counts.batches + counts.batched_ops, 1 + ops)
        self.assertGreater(counts.response_batches, 0, "lockd sent no response batch")
        self.assertGreater(counts.response_items, counts.response_batches)
        for name in names:
            self.assertEqual(self.held_by(other, name, other.owner), name in busy, name)


class AioBatchingTest(AioTestBase):
    async def test_a_lone_op_is_sent_alone(self):
        c = self.client()
        for _ in range(5):
            await (await c.acquire("alone", ttl=30)).release()
        counts = c._session.counts
        self.assertEqual((counts.messages, counts.batches), (11, 0))
        self.assertEqual(counts.response_batches, 0)

    async def test_acquires_started_together_leave_as_one_batch(self):
        c, observer = self.client(), self.client()
        await (await c.acquire("warm-up", ttl=30)).release()  # the session is open
        names = ["lock-%d" % i for i in range(200)]
        leases = await asyncio.gather(*(c.acquire(n, ttl=30) for n in names))
        counts = c._session.counts
        # open, warm-up acquire and release, then the 200 in one write
        self.assertEqual((counts.messages, counts.batches, counts.batched_ops), (4, 1, 200))
        # 200 results for one batch: lockd answers most of them in batches
        self.assertGreater(counts.response_batches, 0)
        self.assertGreater(counts.response_items, counts.response_batches)
        held = {info.name: info.fencing_token async for info in observer.list("lock-")}
        self.assertEqual({lease.name: lease.fencing_token for lease in leases}, held)
        self.assertEqual([lease.name for lease in leases], names)
        await asyncio.gather(*(lease.release() for lease in leases))
        self.assertEqual(counts.batches, 2)
        self.assertEqual([info.name async for info in observer.list("lock-")], [])


if __name__ == "__main__":
    unittest.main()
