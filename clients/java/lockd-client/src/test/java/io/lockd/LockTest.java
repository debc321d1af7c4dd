package io.lockd;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNotEquals;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.lockd.testing.LockdFixture;
import io.lockd.v1.LockInfo;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicReference;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/** LockdLock's java.util.concurrent.locks contract against a real lockd (memory backend). */
class LockTest {
  @TempDir static Path dir;
  static LockdFixture fixture;
  static LockdClient client;
  static LockdClient other;

  @BeforeAll
  static void start() throws Exception {
    fixture = LockdFixture.start(dir);
    client = fixture.one;
    other = fixture.two;
  }

  @AfterAll
  static void stop() {
    fixture.close();
  }

  @Test
  void threadsOfOneClientExcludeEachOtherAndTheFencedCounterLosesNothing() throws Exception {
    LockdLock lock = client.getLock("threads-counter");
    FencedCounter counter = new FencedCounter();
    List<Thread> threads = new ArrayList<>();
    List<Throwable> failures = new java.util.concurrent.CopyOnWriteArrayList<>();
    for (int t = 0; t < 4; t++) {
      LockdClient c = t % 2 == 0 ? client : other;
      Thread th = new Thread(() -> {
        LockdLock l = c.getLock("threads-counter");
        for (int i = 0; i < 25; i++) {
          l.lock();
          try {
            counter.increment(l.getFencingToken());
          } catch (Throwable e) {
            failures.add(e);
          } finally {
            l.unlock();
          }
        }
      });
      threads.add(th);
      th.start();
    }
    for (Thread th : threads) {
      th.join();
    }
    assertEquals(List.of(), failures);
    assertEquals(100, counter.value());
    assertFalse(client.describe("threads-counter").getHeld());
    assertFalse(lock.isHeldByCurrentThread());
  }

  @Test
  void reentrantPerThreadWithOneHoldOnLockdAndOneToken() throws Exception {
    LockdLock lock = client.getLock("reentrant");
    lock.lock();
    long token = lock.getFencingToken();
    lock.lock();
    assertTrue(lock.tryLock());
    assertEquals(3, lock.getHoldCount());
    assertEquals(token, lock.getFencingToken());
    LockInfo info = client.describe("reentrant");
    assertEquals(client.clientId(), info.getOwner());
    assertEquals(1, info.getHoldCount());
    // Another thread of the same client does not get it.
    AtomicReference<Boolean> otherThread = new AtomicReference<>();
    Thread t = new Thread(() -> otherThread.set(lock.tryLock()));
    t.start();
    t.join();
    assertFalse(otherThread.get());
    lock.unlock();
    lock.unlock();
    assertTrue(client.describe("reentrant").getHeld());
    lock.unlock();
    assertFalse(client.describe("reentrant").getHeld());
    assertEquals(0, lock.getHoldCount());
  }

  @Test
  void unlockByANonHolderThrowsIllegalMonitorState() throws Exception {
    LockdLock lock = client.getLock("non-holder");
    assertThrows(IllegalMonitorStateException.class, lock::unlock);
    lock.lock();
    AtomicReference<Throwable> thrown = new AtomicReference<>();
    Thread t = new Thread(() -> {
      try {
        lock.unlock();
      } catch (Throwable e) {
        thrown.set(e);
      }
    });
    t.start();
    t.join();
    assertTrue(thrown.get() instanceof IllegalMonitorStateException, String.valueOf(thrown.get()));
    assertTrue(client.describe("non-holder").getHeld());
    lock.unlock();
    assertThrows(IllegalMonitorStateException.class, lock::getFencingToken);
    assertThrows(UnsupportedOperationException.class, lock::newCondition);
  }

  @Test
  void tryLockWaitsItsTimeThenFailsAndGetsTheLockWhenFreed() throws Exception {
    LockdLock mine = client.getLock("try-timing");
    LockdLock theirs = other.getLock("try-timing");
    theirs.lock();
    long t0 = System.nanoTime();
    assertFalse(mine.tryLock(400, TimeUnit.MILLISECONDS));
    long waited = TimeUnit.NANOSECONDS.toMillis(System.nanoTime() - t0);
    assertTrue(waited >= 380 && waited < 3000, "waited " + waited + " ms");
    assertFalse(mine.tryLock());
    long firstToken = theirs.getFencingToken();
    theirs.unlock();
    CountDownLatch held = new CountDownLatch(1);
    Thread releaser = new Thread(() -> {
      theirs.lock();
      held.countDown();
      sleep(300);
      theirs.unlock();
    });
    releaser.start();
    held.await();
    t0 = System.nanoTime();
    assertTrue(mine.tryLock(5, TimeUnit.SECONDS));
    waited = TimeUnit.NANOSECONDS.toMillis(System.nanoTime() - t0);
    assertTrue(waited >= 150 && waited < 3000, "waited " + waited + " ms");
    assertTrue(mine.getFencingToken() > firstToken);
    mine.unlock();
    releaser.join();
  }

  @Test
  void lockInterruptiblyEndsOnInterruptAndLeavesNoHold() throws Exception {
    LockdLock theirs = other.getLock("interrupt");
    theirs.lock();
    AtomicReference<Throwable> thrown = new AtomicReference<>();
    Thread waiter = new Thread(() -> {
      try {
        client.getLock("interrupt").lockInterruptibly();
      } catch (Throwable e) {
        thrown.set(e);
      }
    });
    waiter.start();
    sleep(300);
    waiter.interrupt();
    waiter.join(5000);
    assertFalse(waiter.isAlive());
    assertTrue(thrown.get() instanceof InterruptedException, String.valueOf(thrown.get()));
    theirs.unlock();
    // The interrupted waiter's acquire left nothing: the lock is free, another client gets it.
    LockInfo info = client.describe("interrupt");
    assertFalse(info.getHeld(), info.toString());
    assertEquals(0, info.getWaiters());
    LockdLock again = other.getLock("interrupt");
    assertTrue(again.tryLock());
    again.unlock();
  }

  @Test
  void asyncCallsActForTheCallingThread() throws Exception {
    LockdLock lock = client.getLock("async");
    lock.lockAsync().get(5, TimeUnit.SECONDS);
    assertTrue(lock.isHeldByCurrentThread());
    assertTrue(lock.tryLockAsync().get(5, TimeUnit.SECONDS));
    assertEquals(2, lock.getHoldCount());
    assertFalse(other.getLock("async").tryLockAsync(100, TimeUnit.MILLISECONDS).get());
    lock.unlockAsync().get(5, TimeUnit.SECONDS);
    lock.unlockAsync().get(5, TimeUnit.SECONDS);
    assertFalse(client.describe("async").getHeld());
  }

  @Test
  void guardUnlocksAtTheEndOfTheBlockAndCarriesTheToken() throws Exception {
    LockdLock lock = client.getLock("guard");
    long token;
    try (LockdLock.Guard g = lock.acquire()) {
      token = g.fencingToken();
      assertEquals(client.clientId(), client.describe("guard").getOwner());
      assertTrue(lock.isLeaseValid());
    }
    assertFalse(client.describe("guard").getHeld());
    try (LockdLock.Guard g = lock.tryAcquire(1, TimeUnit.SECONDS)) {
      assertNotEquals(token, g.fencingToken());
    }
    other.getLock("guard").lock();
    assertNull(lock.tryAcquire(50, TimeUnit.MILLISECONDS));
    other.getLock("guard").unlock();
  }

  @Test
  void lostListenerFiresOnForceReleaseAndUnlockReportsTheLoss() throws Exception {
    LockdLock lock = client.getLock("force");
    CountDownLatch lost = new CountDownLatch(1);
    AtomicReference<LockLostException> why = new AtomicReference<>();
    lock.addLostListener(e -> {
      why.set(e);
      lost.countDown();
    });
    lock.lock();
    other.forceRelease("force", "test", 0);
    assertTrue(lost.await(10, TimeUnit.SECONDS));
    assertEquals("FORCE_RELEASED", why.get().reason());
    assertFalse(lock.isLeaseValid());
    assertThrows(LockLostException.class, lock::unlock);
    assertFalse(lock.isHeldByCurrentThread());
  }

  static void sleep(long ms) {
    try {
      Thread.sleep(ms);
    } catch (InterruptedException e) {
      Thread.currentThread().interrupt();
    }
  }
}
