package io.lockd.spring;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertSame;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.lockd.LockdClient;
import io.lockd.testing.LockdFixture;
import java.nio.file.Path;
import java.time.Duration;
import java.util.List;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.concurrent.locks.Lock;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;
import org.springframework.integration.leader.Context;
import org.springframework.integration.leader.DefaultCandidate;
import org.springframework.integration.support.leader.LockRegistryLeaderInitiator;

/** LockdLockRegistry under Spring Integration's own users, against a real lockd. */
class LockdLockRegistryTest {
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

  @Test
  void obtainReturnsOneReentrantLockPerKeyExclusiveAcrossRegistries() throws Exception {
    LockdLockRegistry r1 = new LockdLockRegistry(one, "app/");
    LockdLockRegistry r2 = new LockdLockRegistry(two, "app/");
    Lock l1 = r1.obtain("orders");
    assertSame(l1, r1.obtain("orders"));
    assertTrue(l1.tryLock(1, TimeUnit.SECONDS));
    assertTrue(l1.tryLock());
    r1.renewLock("orders");
    assertFalse(r2.obtain("orders").tryLock(200, TimeUnit.MILLISECONDS));
    assertEquals(one.clientId(), one.describe("app/orders").getOwner());
    l1.unlock();
    l1.unlock();
    assertThrows(IllegalStateException.class, () -> r1.renewLock("orders"));
    assertThrows(IllegalMonitorStateException.class, l1::unlock);
    AtomicInteger ran = new AtomicInteger();
    r2.executeLocked("orders", Duration.ofSeconds(2), () -> {
      ran.incrementAndGet();
      assertEquals(two.clientId(), two.describe("app/orders").getOwner());
    });
    assertEquals(1, ran.get());
    assertFalse(one.describe("app/orders").getHeld());
    // Expiry forgets unused locks only.
    Lock held = r1.obtain("kept");
    held.lock();
    r1.expireUnusedOlderThan(-1);
    assertSame(held, r1.obtain("kept"));
    held.unlock();
    r1.expireUnusedOlderThan(-1);
    assertFalse(held == r1.obtain("kept"));
  }

  /** A candidate that records its leadership. */
  static final class Recorder extends DefaultCandidate {
    final List<String> events = new CopyOnWriteArrayList<>();
    volatile boolean leader;

    Recorder(String id) {
      super(id, "cluster-leader");
    }

    @Override
    public void onGranted(Context ctx) {
      leader = true;
      events.add("granted");
    }

    @Override
    public void onRevoked(Context ctx) {
      leader = false;
      events.add("revoked");
    }
  }

  @Test
  void leaderInitiatorElectsOneLeaderAndHandsOverWhenItsLeaseIsLost() throws Exception {
    Recorder a = new Recorder("a");
    Recorder b = new Recorder("b");
    LockRegistryLeaderInitiator ia =
        new LockRegistryLeaderInitiator(new LockdLockRegistry(one, "leader/"), a);
    LockRegistryLeaderInitiator ib =
        new LockRegistryLeaderInitiator(new LockdLockRegistry(two, "leader/"), b);
    for (LockRegistryLeaderInitiator i : List.of(ia, ib)) {
      i.setHeartBeatMillis(200);
      i.setBusyWaitMillis(50);
    }
    ia.start();
    try {
      assertTrue(LockdFixture.waitFor(() -> a.leader));
      ib.start();
      Thread.sleep(800);
      assertTrue(a.leader);
      assertFalse(b.leader, "two leaders");
      assertTrue(ia.getContext().isLeader());
      // An operator frees the lock: a's lease is lost, a is revoked, b takes over.
      long token = one.describe("leader/cluster-leader").getFencingToken();
      one.forceRelease("leader/cluster-leader", "test", token);
      assertTrue(LockdFixture.waitFor(() -> b.leader && !a.leader), "a: " + a.events + ", b: " + b.events);
      assertEquals(two.clientId(), two.describe("leader/cluster-leader").getOwner());
      // b stops: its lock is released and a leads again.
      ib.stop();
      assertTrue(LockdFixture.waitFor(() -> a.leader), "a: " + a.events);
      assertFalse(b.leader);
      assertEquals(List.of("granted", "revoked", "granted"), a.events);
    } finally {
      ia.stop();
      ib.stop();
    }
    assertTrue(LockdFixture.waitFor(() -> !one.describe("leader/cluster-leader").getHeld()));
  }

}
