package io.lockd.spring;

import io.lockd.LockdClient;
import io.lockd.LockdLock;
import java.time.Duration;
import java.util.Map;
import java.util.Objects;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.locks.Condition;
import org.springframework.integration.support.locks.DistributedLock;
import org.springframework.integration.support.locks.ExpirableLockRegistry;
import org.springframework.integration.support.locks.RenewableLockRegistry;

/**
 * Spring Integration's {@code LockRegistry} on lockd: a drop-in for {@code RedisLockRegistry},
 * {@code ZookeeperLockRegistry} or {@code JdbcLockRegistry}, e.g. under a
 * {@code LockRegistryLeaderInitiator} or an aggregator.
 *
 * <p>{@link #obtain(Object)} returns, for a key ({@code String}, or any object by its
 * {@code toString()}), the same {@link DistributedLock} until it is expired by
 * {@link #expireUnusedOlderThan(long)}: an exclusive lockd lock of that name, reentrant per
 * thread, held by one thread of one process at a time (a {@link LockdLock}). Leases are renewed
 * by lockd over the client's session (or by the client's watchdog), so {@link #renewLock} only
 * checks that the current thread still holds a valid lease. The lock's {@code ttl} arguments
 * set the lease of that acquire. A lock whose lease was lost answers {@code tryLock} false and
 * its {@code unlock} throws {@code io.lockd.LockLostException}, which is how a leader learns
 * that it is no longer one.
 *
 * <p>The registry does not own the client: close the client yourself. Thread-safe.
 */
public final class LockdLockRegistry
    implements ExpirableLockRegistry<DistributedLock>, RenewableLockRegistry<DistributedLock> {
  private final LockdClient client;
  private final String prefix;
  private final Map<String, Entry> locks = new ConcurrentHashMap<>();

  /** Locks named as their keys. */
  public LockdLockRegistry(LockdClient client) {
    this(client, "");
  }

  /** Locks named {@code prefix + key} (e.g. the application's name and a slash). */
  public LockdLockRegistry(LockdClient client, String prefix) {
    this.client = Objects.requireNonNull(client, "client");
    this.prefix = Objects.requireNonNull(prefix, "prefix");
  }

  @Override
  public DistributedLock obtain(Object lockKey) {
    String name = prefix + Objects.requireNonNull(lockKey, "lockKey");
    Entry e = locks.computeIfAbsent(name, n -> new Entry(client, n));
    e.lastUsed = System.currentTimeMillis();
    return e;
  }

  /** Forgets locks not held that were last obtained or used more than {@code age} ms ago. */
  @Override
  public void expireUnusedOlderThan(long age) {
    long now = System.currentTimeMillis();
    locks.values().removeIf(e -> !e.inUse() && now - e.lastUsed > age);
  }

  /**
   * Checks that the current thread holds {@code lockKey}'s lock with a valid lease (lockd keeps
   * it renewed).
   *
   * @throws IllegalStateException not held by the current thread, or its lease was lost
   */
  @Override
  public void renewLock(Object lockKey) {
    Entry e = locks.get(prefix + lockKey);
    if (e == null || !e.lock.isHeldByCurrentThread() || !e.lock.isLeaseValid()) {
      throw new IllegalStateException(
          "lock '" + prefix + lockKey + "' is not held by the current thread with a valid lease");
    }
  }

  /** As {@link #renewLock(Object)}: lockd renews the lease it granted. */
  @Override
  public void renewLock(Object lockKey, Duration ttl) {
    renewLock(lockKey);
  }

  /** A registry lock: a LockdLock, and the same lock with a given lease for the ttl calls. */
  private static final class Entry implements DistributedLock {
    final LockdClient client;
    final String name;
    final LockdLock lock;
    volatile long lastUsed;

    Entry(LockdClient client, String name) {
      this.client = client;
      this.name = name;
      this.lock = client.getLock(name);
    }

    boolean inUse() {
      return lock.isLocked();
    }

    @Override
    public void lock() {
      lastUsed = System.currentTimeMillis();
      lock.lock();
    }

    @Override
    public void lock(Duration ttl) {
      lastUsed = System.currentTimeMillis();
      client.getLock(name, ttl).lock();
    }

    @Override
    public void lockInterruptibly() throws InterruptedException {
      lastUsed = System.currentTimeMillis();
      lock.lockInterruptibly();
    }

    @Override
    public boolean tryLock() {
      lastUsed = System.currentTimeMillis();
      return lock.tryLock();
    }

    @Override
    public boolean tryLock(long time, TimeUnit unit) throws InterruptedException {
      lastUsed = System.currentTimeMillis();
      return lock.tryLock(time, unit);
    }

    @Override
    public boolean tryLock(Duration waitTime, Duration ttl) throws InterruptedException {
      lastUsed = System.currentTimeMillis();
      return client.getLock(name, ttl).tryLock(waitTime.toNanos(), TimeUnit.NANOSECONDS);
    }

    @Override
    public void unlock() {
      lock.unlock();
    }

    @Override
    public Condition newCondition() {
      return lock.newCondition();
    }

    @Override
    public String toString() {
      return "LockdLockRegistry lock '" + name + "'";
    }
  }
}
