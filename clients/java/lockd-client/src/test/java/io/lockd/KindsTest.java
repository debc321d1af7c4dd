package io.lockd;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.grpc.Status;
import io.lockd.testing.LockdFixture;
import io.lockd.v1.LockInfo;
import io.lockd.v1.LockMode;
import java.nio.file.Path;
import java.time.Duration;
import java.util.List;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/** Read-write locks, semaphores and acquireAll against a real lockd (memory backend). */
class KindsTest {
  @TempDir static Path dir;
  static LockdFixture fixture;
  static LockdClient a;
  static LockdClient b;

  @BeforeAll
  static void start() throws Exception {
    fixture = LockdFixture.start(dir);
    a = fixture.one;
    b = fixture.two;
  }

  @AfterAll
  static void stop() {
    fixture.close();
  }

  @Test
  void readersShareAndAWriterExcludesThem() throws Exception {
    LockdReadWriteLock ra = a.getReadWriteLock("rw");
    LockdReadWriteLock rb = b.getReadWriteLock("rw");
    ra.readLock().lock();
    assertTrue(rb.readLock().tryLock(1, TimeUnit.SECONDS));
    LockInfo info = a.describe("rw");
    assertEquals(LockMode.LOCK_MODE_SHARED, info.getMode());
    assertEquals(2, info.getHoldersCount());
    assertFalse(rb.writeLock().tryLock(200, TimeUnit.MILLISECONDS));
    // A second reader thread of the same client shares too.
    CompletableFuture<Boolean> sameClient = CompletableFuture.supplyAsync(() -> {
      boolean got = ra.readLock().tryLock();
      if (got) {
        ra.readLock().unlock();
      }
      return got;
    });
    assertTrue(sameClient.get(5, TimeUnit.SECONDS));
    ra.readLock().unlock();
    rb.readLock().unlock();
    assertTrue(rb.writeLock().tryLock(1, TimeUnit.SECONDS));
    long writeToken = rb.writeLock().getFencingToken();
    assertFalse(ra.readLock().tryLock(200, TimeUnit.MILLISECONDS));
    assertEquals(LockMode.LOCK_MODE_EXCLUSIVE, a.describe("rw").getMode());
    rb.writeLock().unlock();
    assertTrue(ra.readLock().tryLock(1, TimeUnit.SECONDS));
    assertTrue(ra.readLock().getFencingToken() > writeToken);
    ra.readLock().unlock();
    assertFalse(a.describe("rw").getHeld());
    assertThrows(IllegalMonitorStateException.class, () -> ra.writeLock().unlock());
  }

  @Test
  void semaphoreGrantsUpToItsLimitAcrossClients() throws Exception {
    LockdSemaphore sa = a.getSemaphore("sem", 3);
    LockdSemaphore sb = b.getSemaphore("sem", 3);
    Lease two = sa.acquire(2);
    assertNotNull(two);
    Lease one = sb.tryAcquire(1, 1, TimeUnit.SECONDS);
    assertNotNull(one);
    long t0 = System.nanoTime();
    assertNull(sb.tryAcquire(1, 300, TimeUnit.MILLISECONDS));
    assertTrue(System.nanoTime() - t0 >= TimeUnit.MILLISECONDS.toNanos(280));
    assertEquals(3, a.describe("sem").getLimit());
    sa.release(); // the calling thread's newest acquire: the 2 permits
    Lease again = sb.tryAcquire(2, 1, TimeUnit.SECONDS);
    assertNotNull(again);
    again.close();
    one.close();
    assertFalse(a.describe("sem").getHeld());
    assertThrows(IllegalMonitorStateException.class, sa::release);
    // The name is a semaphore of limit 3 while held: a lock acquire of it is refused at once.
    Lease held = sa.acquire(1);
    LockdException e = assertThrows(LockdException.class, () -> b.getLock("sem").tryLock());
    assertEquals(Status.Code.FAILED_PRECONDITION, e.code());
    assertEquals("LOCK_KIND_MISMATCH", e.reason());
    assertEquals("semaphore", e.metadata().get("kind"));
    held.close();
  }

  @Test
  void acquireAllTakesEveryLockOrNone() throws Exception {
    List<LockSpec> specs = List.of(LockSpec.exclusive("all-x"), LockSpec.shared("all-s"),
        LockSpec.semaphore("all-p", 2, 1));
    try (LeaseSet set = a.acquireAll(specs, Duration.ofSeconds(2))) {
      assertNotNull(set);
      assertEquals(3, set.leases().size());
      assertTrue(set.isValid());
      assertEquals(a.clientId(), a.describe("all-x").getOwner());
      // b cannot take all-x, so b takes none of them, all-s included.
      assertNull(b.acquireAll(List.of(LockSpec.exclusive("all-free"),
          LockSpec.exclusive("all-x")), Duration.ofMillis(200)));
      assertFalse(a.describe("all-free").getHeld());
    }
    assertFalse(a.describe("all-x").getHeld());
    assertFalse(a.describe("all-s").getHeld());
    assertFalse(a.describe("all-p").getHeld());
  }
}
