package io.lockd.shedlock;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.lockd.LockdClient;
import io.lockd.testing.LockdFixture;
import java.nio.file.Path;
import java.time.Duration;
import java.time.Instant;
import java.util.Optional;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;
import net.javacrumbs.shedlock.core.DefaultLockingTaskExecutor;
import net.javacrumbs.shedlock.core.LockConfiguration;
import net.javacrumbs.shedlock.core.SimpleLock;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/** LockdLockProvider's ShedLock contract against a real lockd (lease.min 100 ms). */
class LockdLockProviderTest {
  @TempDir static Path dir;
  static LockdFixture fixture;
  static LockdClient one;
  static LockdClient two;

  @BeforeAll
  static void start() throws Exception {
    fixture = LockdFixture.start(dir);
    one = fixture.one;
    two = fixture.two;
  }

  @AfterAll
  static void stop() {
    fixture.close();
  }

  static LockConfiguration config(String name, Duration atMost, Duration atLeast) {
    return new LockConfiguration(Instant.now(), name, atMost, atLeast);
  }

  @Test
  void oneHolderAtATimeEvenOnTheSameNode() {
    LockdLockProvider p1 = new LockdLockProvider(one, "shedlock/");
    LockdLockProvider p2 = new LockdLockProvider(two, "shedlock/");
    Optional<SimpleLock> held = p1.lock(config("report", Duration.ofSeconds(30), Duration.ZERO));
    assertTrue(held.isPresent());
    assertFalse(p1.lock(config("report", Duration.ofSeconds(30), Duration.ZERO)).isPresent());
    assertFalse(p2.lock(config("report", Duration.ofSeconds(30), Duration.ZERO)).isPresent());
    held.get().unlock();
    Optional<SimpleLock> next = p2.lock(config("report", Duration.ofSeconds(30), Duration.ZERO));
    assertTrue(next.isPresent());
    next.get().unlock();
    assertFalse(one.describe("shedlock/report").getHeld());
  }

  @Test
  void lockAtLeastForKeepsItAfterUnlockAndLockAtMostForEndsIt() throws Exception {
    LockdLockProvider p = new LockdLockProvider(one);
    Optional<SimpleLock> held = p.lock(config("at-least", Duration.ofSeconds(30),
        Duration.ofMillis(1200)));
    assertTrue(held.isPresent());
    held.get().unlock();
    assertFalse(p.lock(config("at-least", Duration.ofSeconds(30), Duration.ZERO)).isPresent());
    TimeUnit.MILLISECONDS.sleep(1400);
    Optional<SimpleLock> later = p.lock(config("at-least", Duration.ofSeconds(30),
        Duration.ZERO));
    assertTrue(later.isPresent());
    later.get().unlock();

    // Never unlocked (a node that died): free once lockAtMostFor has passed.
    assertTrue(p.lock(config("at-most", Duration.ofMillis(800), Duration.ZERO)).isPresent());
    assertFalse(p.lock(config("at-most", Duration.ofMillis(800), Duration.ZERO)).isPresent());
    TimeUnit.MILLISECONDS.sleep(1000);
    Optional<SimpleLock> after = p.lock(config("at-most", Duration.ofSeconds(5), Duration.ZERO));
    assertTrue(after.isPresent());
    after.get().unlock();
  }

  @Test
  void extendRenewsTheLeaseAndTheExecutorRunsATaskOnce() throws Exception {
    LockdLockProvider p = new LockdLockProvider(one);
    SimpleLock held = p.lock(config("extend", Duration.ofMillis(800), Duration.ZERO)).get();
    SimpleLock extended = held.extend(Duration.ofSeconds(5), Duration.ZERO).get();
    TimeUnit.MILLISECONDS.sleep(1000);
    assertFalse(p.lock(config("extend", Duration.ofSeconds(5), Duration.ZERO)).isPresent());
    extended.unlock();

    // ShedLock's executor on another node skips the task while this one holds it.
    AtomicInteger runs = new AtomicInteger();
    DefaultLockingTaskExecutor executor =
        new DefaultLockingTaskExecutor(new LockdLockProvider(two));
    SimpleLock running = p.lock(config("task", Duration.ofSeconds(30), Duration.ZERO)).get();
    executor.executeWithLock((Runnable) runs::incrementAndGet,
        config("task", Duration.ofSeconds(30), Duration.ZERO));
    assertEquals(0, runs.get());
    running.unlock();
    executor.executeWithLock((Runnable) runs::incrementAndGet,
        config("task", Duration.ofSeconds(30), Duration.ZERO));
    assertEquals(1, runs.get());
    assertFalse(one.describe("task").getHeld());
  }
}
