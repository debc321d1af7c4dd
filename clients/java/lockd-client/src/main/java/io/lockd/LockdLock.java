package io.lockd;

import java.time.Duration;
import java.util.List;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CompletionException;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.locks.Condition;
import java.util.concurrent.locks.Lock;
import java.util.function.Consumer;

/**
 * An exclusive lockd lock as a {@link Lock}, with Redisson's user model: the owner is this
 * client's id plus the thread, so the lock is held by one thread of one client at a time and is
 * reentrant for that thread ({@link #getHoldCount()}); lockd sees one hold per client (taken by
 * the outermost lock, released by the last unlock). From {@link LockdClient#getLock}.
 *
 * <p>{@link #unlock()} by a thread that does not hold it throws
 * {@link IllegalMonitorStateException}. Once a hold's lease is lost the thread no longer holds
 * the lock, whatever its hold count: its next unlock() throws {@link LockLostException} (the
 * work done under it was not protected), its next tryLock() answers false, its next lock()
 * takes the lock afresh; either way the lost holds are dropped. {@link #newCondition()} is not
 * supported. The async calls act for the thread that calls them (as Redisson's do). Errors
 * from lockd are {@link LockdException}s.
 *
 * <p>Thread-safe; any number of LockdLock objects of one name share its state.
 */
public final class LockdLock implements Lock {
  private static final Duration WAIT_CHUNK = Duration.ofSeconds(60);

  private final LockdClient client;
  private final LockSpec spec;
  private final LocalGate gate;
  private final Duration leaseTtl; // zero: the client's
  private final List<Consumer<LockLostException>> lostListeners = new CopyOnWriteArrayList<>();

  LockdLock(LockdClient client, LockSpec spec, Duration leaseTtl) {
    this.client = client;
    this.spec = spec;
    this.leaseTtl = leaseTtl;
    this.gate = client.gate(spec);
  }

  public String getName() {
    return spec.name();
  }

  /** Blocks until held; interrupts are kept for the caller, not obeyed. */
  @Override
  public void lock() {
    try {
      acquireFor(tid(), Long.MAX_VALUE, false);
    } catch (InterruptedException e) {
      throw new AssertionError(e);
    }
  }

  @Override
  public void lockInterruptibly() throws InterruptedException {
    if (Thread.interrupted()) {
      throw new InterruptedException();
    }
    acquireFor(tid(), Long.MAX_VALUE, true);
  }

  /** One try: held by no other thread here, and lockd grants it at once. */
  @Override
  public boolean tryLock() {
    try {
      return acquireFor(tid(), 0, false);
    } catch (InterruptedException e) {
      throw new AssertionError(e);
    }
  }

  @Override
  public boolean tryLock(long time, TimeUnit unit) throws InterruptedException {
    if (Thread.interrupted()) {
      throw new InterruptedException();
    }
    return acquireFor(tid(), Math.max(0, unit.toNanos(time)), true);
  }

  @Override
  public void unlock() {
    unlockFor(tid());
  }

  /** Not supported: lockd has no conditions. */
  @Override
  public Condition newCondition() {
    throw new UnsupportedOperationException("lockd locks have no conditions");
  }

  /** {@link #lock()}, returning a guard whose {@code close()} unlocks. */
  public Guard acquire() {
    lock();
    return new Guard();
  }

  /** {@link #tryLock(long, TimeUnit)}: a guard, or null when not acquired in time. */
  public Guard tryAcquire(long time, TimeUnit unit) throws InterruptedException {
    return tryLock(time, unit) ? new Guard() : null;
  }

  /** Whether some thread of this client holds the lock (what this client knows, no call). */
  public boolean isLocked() {
    return gate.isHeld();
  }

  public boolean isHeldByCurrentThread() {
    return gate.holdCount(tid()) > 0;
  }

  /** The current thread's holds (0 when it does not hold the lock). */
  public int getHoldCount() {
    return gate.holdCount(tid());
  }

  /**
   * The fencing token of the current thread's hold: pass it with every write to the protected
   * resource.
   *
   * @throws IllegalMonitorStateException the current thread does not hold the lock
   */
  public long getFencingToken() {
    return currentLease().fencingToken();
  }

  /** Whether the current thread's hold is still valid (see {@link Lease#isValid()}). */
  public boolean isLeaseValid() {
    return gate.holdCount(tid()) > 0 && currentLease().isValid();
  }

  /**
   * Calls {@code listener} (on a client thread) when a hold taken through this object is lost:
   * lockd pushed {@code lost}, or the client could not keep or resume it in time.
   */
  public void addLostListener(Consumer<LockLostException> listener) {
    lostListeners.add(listener);
  }

  /** {@link #lock()} for the calling thread, done on a client thread. */
  public CompletableFuture<Void> lockAsync() {
    long tid = tid();
    return CompletableFuture.runAsync(() -> call(() -> acquireFor(tid, Long.MAX_VALUE, false)),
        client.asyncExecutor());
  }

  /** {@link #tryLock()} for the calling thread, done on a client thread. */
  public CompletableFuture<Boolean> tryLockAsync() {
    return tryLockAsync(0, TimeUnit.NANOSECONDS);
  }

  /** {@link #tryLock(long, TimeUnit)} for the calling thread, done on a client thread. */
  public CompletableFuture<Boolean> tryLockAsync(long time, TimeUnit unit) {
    long tid = tid();
    long nanos = Math.max(0, unit.toNanos(time));
    return CompletableFuture.supplyAsync(() -> call(() -> acquireFor(tid, nanos, false)),
        client.asyncExecutor());
  }

  /** {@link #unlock()} for the calling thread, done on a client thread. */
  public CompletableFuture<Void> unlockAsync() {
    long tid = tid();
    return CompletableFuture.runAsync(() -> unlockFor(tid), client.asyncExecutor());
  }

  /** A held lock; {@code close()} unlocks it (on the thread that locked it). */
  public final class Guard implements AutoCloseable {
    private Guard() {}

    public long fencingToken() {
      return getFencingToken();
    }

    @Override
    public void close() {
      unlock();
    }
  }

  // ------------------------------------------------------------------ internal

  /**
   * Takes the lock for thread {@code tid}; {@code nanos} Long.MAX_VALUE: no time bound. A thread
   * whose hold was lost does not hold the lock any more: its holds are dropped, a try answers
   * false (so that a caller that tries again while it believes it holds the lock learns the
   * loss), and lock() takes the lock afresh.
   */
  private boolean acquireFor(long tid, long nanos, boolean interruptible)
      throws InterruptedException {
    boolean forever = nanos == Long.MAX_VALUE;
    long deadline = System.nanoTime() + (forever ? 0 : nanos);
    int n;
    while (true) {
      n = forever ? gate.enter(tid, Long.MAX_VALUE, interruptible)
          : nanos == 0 ? gate.tryEnter(tid) : gate.enter(tid, deadline, interruptible);
      if (n <= 1) {
        break;
      }
      Lease current = gate.lease();
      if (current != null && current.isValid()) {
        return true;
      }
      gate.drop(tid);
      if (!forever) {
        return false;
      }
    }
    if (n == 0) {
      return false;
    }
    boolean held = false;
    try {
      while (true) {
        long left = forever ? WAIT_CHUNK.toNanos()
            : Math.max(0, Math.min(deadline - System.nanoTime(), WAIT_CHUNK.toNanos()));
        List<Lease> leases = client.acquire(client.newCall(List.of(spec), false,
            client.clientId(), leaseTtl, Duration.ofNanos(left), true, interruptible));
        if (!leases.isEmpty()) {
          Lease l = leases.get(0);
          gate.setLease(l);
          l.onLost(e -> lostListeners.forEach(listener -> listener.accept(e)));
          held = true;
          return true;
        }
        if (!forever && System.nanoTime() - deadline >= 0) {
          return false;
        }
      }
    } finally {
      if (!held) {
        gate.exit(tid);
      }
    }
  }

  private void unlockFor(long tid) {
    int count = gate.holdCount(tid);
    if (count == 0) {
      throw new IllegalMonitorStateException(
          "lock " + Errors.describe(spec.namespace(), spec.name()) + " is not held by thread "
              + tid + " of client " + client.clientId());
    }
    Lease l = gate.lease();
    if (l != null && l.isLost()) {
      gate.drop(tid);
      throw l.lostCause();
    }
    if (count > 1) {
      gate.exit(tid);
      return;
    }
    try {
      l.release();
    } finally {
      gate.exit(tid);
    }
  }

  private Lease currentLease() {
    Lease l = gate.holdCount(tid()) > 0 ? gate.lease() : null;
    if (l == null) {
      throw new IllegalMonitorStateException(
          "lock " + Errors.describe(spec.namespace(), spec.name())
              + " is not held by the current thread");
    }
    return l;
  }

  private interface Body<T> {
    T run() throws InterruptedException;
  }

  private static <T> T call(Body<T> body) {
    try {
      return body.run();
    } catch (InterruptedException e) {
      throw new CompletionException(e);
    }
  }

  private static long tid() {
    return Thread.currentThread().getId();
  }
}
