package io.lockd;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.lockd.testing.LockdProcess;
import io.lockd.testing.RedisProcess;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicReference;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/** The session stream when lockd dies: lost listeners, and resume on another replica. */
class SessionResilienceTest {
  @TempDir Path dir;

  @Test
  void lostListenerFiresWhenLockdIsKilledAndNotBackInTime() throws Exception {
    LockdProcess lockd = new LockdProcess(dir).start();
    // lease 20 s: after the break the hold stays valid 20*2/3 - drift - K(12 s) = 1.1 s.
    try (LockdClient client = LockdClient.builder().target(lockd.address())
        .leaseTtl(Duration.ofSeconds(20)).build()) {
      LockdLock lock = client.getLock("killed");
      CountDownLatch lost = new CountDownLatch(1);
      AtomicReference<LockLostException> why = new AtomicReference<>();
      lock.addLostListener(e -> {
        why.set(e);
        lost.countDown();
      });
      lock.lock();
      assertTrue(lock.isLeaseValid());
      long killed = System.nanoTime();
      lockd.kill();
      assertTrue(lost.await(10, TimeUnit.SECONDS), "no lost notification");
      long after = TimeUnit.NANOSECONDS.toMillis(System.nanoTime() - killed);
      assertTrue(after >= 900, "lost after " + after + " ms, before its validity ran out");
      assertEquals("VALIDITY_EXPIRED", why.get().reason());
      assertFalse(lock.isLeaseValid());
      assertThrowsLost(lock);
    } finally {
      lockd.close();
    }
  }

  @Test
  void holdIsLostWhenARestartedLockdNoLongerHasIt() throws Exception {
    LockdProcess lockd = new LockdProcess(dir).start();
    try (LockdClient client = LockdClient.builder().target(lockd.address()).build()) {
      LockdLock lock = client.getLock("restarted");
      CountDownLatch lost = new CountDownLatch(1);
      AtomicReference<String> reason = new AtomicReference<>();
      lock.addLostListener(e -> {
        reason.set(e.reason());
        lost.countDown();
      });
      lock.lock();
      lockd.kill();
      lockd.start(); // memory backend: the hold is gone
      assertTrue(lost.await(15, TimeUnit.SECONDS), "no lost notification");
      assertEquals("NOT_RESUMED", reason.get());
      assertThrowsLost(lock);
      // The client goes on: the lock can be taken again, with a new session.
      assertTrue(lock.tryLock(5, TimeUnit.SECONDS));
      lock.unlock();
    } finally {
      lockd.close();
    }
  }

  @Test
  void sessionResumesOnTheOtherReplicaAndTheFencedCounterLosesNothing() throws Exception {
    try (RedisProcess redis = new RedisProcess(dir);
        LockdProcess victim = LockdProcess.onRedis(dir, redis.port()).start();
        LockdProcess survivor = LockdProcess.onRedis(dir, redis.port()).start()) {
      String target = victim.address() + "," + survivor.address();
      try (LockdClient a = LockdClient.builder().target(target).build();
          LockdClient b = LockdClient.builder().target(survivor.address()).build()) {
        LockdLock held = a.getLock("resumed");
        List<String> lostReasons = new ArrayList<>();
        held.addLostListener(e -> lostReasons.add(e.reason()));
        held.lock();
        long token = held.getFencingToken();
        victim.kill();
        victim.kill();
        // Whichever replica held a's stream, the hold is a's on the other one afterwards.
        Thread.sleep(3000);
        assertTrue(held.isLeaseValid(), "lost: " + lostReasons);
        assertEquals(a.clientId(), b.describe("resumed").getOwner());
        assertFalse(b.getLock("resumed").tryLock());
        assertEquals(token, held.getFencingToken());
        held.unlock();
        assertFalse(b.describe("resumed").getHeld());
        assertEquals(List.of(), lostReasons);

        // Two clients (one on the survivor only) share a fenced counter.
        FencedCounter counter = new FencedCounter();
        List<Thread> threads = new ArrayList<>();
        for (LockdClient c : List.of(a, b, a, b)) {
          Thread t = new Thread(() -> {
            LockdLock l = c.getLock("redis-counter");
            for (int i = 0; i < 20; i++) {
              l.lock();
              try {
                counter.increment(l.getFencingToken());
              } catch (InterruptedException e) {
                throw new IllegalStateException(e);
              } finally {
                l.unlock();
              }
            }
          });
          threads.add(t);
          t.start();
        }
        for (Thread t : threads) {
          t.join();
        }
        assertEquals(80, counter.value());
      }
    }
  }

  private static void assertThrowsLost(LockdLock lock) {
    try {
      lock.unlock();
    } catch (LockLostException expected) {
      assertFalse(lock.isHeldByCurrentThread());
      return;
    }
    throw new AssertionError("unlock of a lost lock did not throw LockLostException");
  }
}
