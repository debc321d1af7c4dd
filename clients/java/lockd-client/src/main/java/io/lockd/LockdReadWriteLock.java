package io.lockd;

import java.time.Duration;
import java.util.ArrayDeque;
import java.util.Deque;
import java.util.List;
import java.util.Map;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.locks.Condition;
import java.util.concurrent.locks.Lock;
import java.util.concurrent.locks.ReadWriteLock;
import java.util.concurrent.locks.ReentrantReadWriteLock;

/**
 * A lockd read-write lock (docs/api.md "Shared locks, semaphores and all-or-nothing acquires")
 * as a {@link ReadWriteLock}: readers hold the name SHARED, the writer EXCLUSIVE; FIFO across
 * modes on lockd, so writers never starve. Within this client a {@link ReentrantReadWriteLock}
 * orders the threads first (reentrant per thread; a writer may take the read lock, a reader may
 * not upgrade), then each lock call takes one hold on lockd for the client's owner (lockd counts
 * them). Each unlock must come from the thread that locked. Thread-safe.
 */
public final class LockdReadWriteLock implements ReadWriteLock {
  private final LockdClient client;
  private final String name;
  private final String namespace;
  private final ReentrantReadWriteLock local = new ReentrantReadWriteLock(true);
  private final Side read;
  private final Side write;

  LockdReadWriteLock(LockdClient client, String name, String namespace) {
    this.client = client;
    this.name = name;
    this.namespace = namespace;
    this.read = new Side(LockSpec.shared(name).in(namespace), local.readLock());
    this.write = new Side(LockSpec.exclusive(name).in(namespace), local.writeLock());
  }

  @Override
  public Side readLock() {
    return read;
  }

  @Override
  public Side writeLock() {
    return write;
  }

  /** One side of the lock; its holds on lockd, per thread, newest last. */
  public final class Side implements Lock {
    private final LockSpec spec;
    private final Lock localSide;
    private final Map<Long, Deque<Lease>> held = new ConcurrentHashMap<>();

    private Side(LockSpec spec, Lock localSide) {
      this.spec = spec;
      this.localSide = localSide;
    }

    @Override
    public void lock() {
      localSide.lock();
      try {
        take(Long.MAX_VALUE, false);
      } catch (InterruptedException e) {
        throw new AssertionError(e);
      }
    }

    @Override
    public void lockInterruptibly() throws InterruptedException {
      localSide.lockInterruptibly();
      take(Long.MAX_VALUE, true);
    }

    @Override
    public boolean tryLock() {
      if (!localSide.tryLock()) {
        return false;
      }
      try {
        return take(0, false);
      } catch (InterruptedException e) {
        throw new AssertionError(e);
      }
    }

    @Override
    public boolean tryLock(long time, TimeUnit unit) throws InterruptedException {
      long deadline = System.nanoTime() + unit.toNanos(time);
      if (!localSide.tryLock(time, unit)) {
        return false;
      }
      return take(Math.max(0, deadline - System.nanoTime()), true);
    }

    /**
     * Gives up the current thread's newest hold.
     *
     * @throws IllegalMonitorStateException not held by the current thread
     * @throws LockLostException the hold had been lost
     */
    @Override
    public void unlock() {
      Deque<Lease> mine = held.get(tid());
      Lease l = mine == null ? null : mine.pollLast();
      if (l == null) {
        throw new IllegalMonitorStateException(
            "lock " + Errors.describe(namespace, name) + " is not held by the current thread");
      }
      try {
        l.release();
      } finally {
        localSide.unlock();
      }
    }

    @Override
    public Condition newCondition() {
      throw new UnsupportedOperationException("lockd locks have no conditions");
    }

    /** The fencing token of the current thread's newest hold. */
    public long getFencingToken() {
      Deque<Lease> mine = held.get(tid());
      Lease l = mine == null ? null : mine.peekLast();
      if (l == null) {
        throw new IllegalMonitorStateException(
            "lock " + Errors.describe(namespace, name) + " is not held by the current thread");
      }
      return l.fencingToken();
    }

    /** The current thread's holds of this side. */
    public int getHoldCount() {
      Deque<Lease> mine = held.get(tid());
      return mine == null ? 0 : mine.size();
    }

    /** Takes one lockd hold; REQUIRES the local side held (given up again on failure). */
    private boolean take(long nanos, boolean interruptible) throws InterruptedException {
      boolean ok = false;
      try {
        boolean forever = nanos == Long.MAX_VALUE;
        long deadline = System.nanoTime() + (forever ? 0 : nanos);
        while (true) {
          long left = forever ? Duration.ofSeconds(60).toNanos()
              : Math.max(0, deadline - System.nanoTime());
          List<Lease> leases = client.acquire(client.newCall(List.of(spec), false,
              client.clientId(), Duration.ZERO, Duration.ofNanos(left), true, interruptible));
          if (!leases.isEmpty()) {
            held.computeIfAbsent(tid(), k -> new ArrayDeque<>()).addLast(leases.get(0));
            ok = true;
            return true;
          }
          if (!forever) {
            return false;
          }
        }
      } finally {
        if (!ok) {
          localSide.unlock();
        }
      }
    }
  }

  private static long tid() {
    return Thread.currentThread().getId();
  }
}
