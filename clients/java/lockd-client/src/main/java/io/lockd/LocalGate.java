package io.lockd;

/**
 * The thread part of a lock's owner: which thread of this client holds a name, and how many
 * times. One per (namespace, name) per client, shared by every lock object of that name, kept
 * for the client's life. A holder is a thread id (a Redisson-style owner: the async calls act
 * for the thread that made them). Not fair: a thread that comes while the gate is free may pass
 * threads that wait (lockd's own queue is FIFO across clients).
 *
 * <p>Thread-safe: the object's monitor guards everything.
 */
final class LocalGate {
  private long holder; // thread id; 0 when free
  private int count;
  private Lease lease; // the server hold while held

  /** Enters for {@code tid} if free or held by it; returns the new hold count or 0. */
  synchronized int tryEnter(long tid) {
    if (holder == 0) {
      holder = tid;
      count = 1;
      return 1;
    }
    if (holder == tid) {
      return ++count;
    }
    return 0;
  }

  /**
   * Waits until {@link #tryEnter} succeeds or {@code deadlineNanos} passes (returns 0).
   *
   * @throws InterruptedException only when {@code interruptible}; an uninterruptible wait keeps
   *     the interrupt for the caller
   */
  synchronized int enter(long tid, long deadlineNanos, boolean interruptible)
      throws InterruptedException {
    boolean interrupted = false;
    try {
      while (true) {
        int n = tryEnter(tid);
        if (n > 0) {
          return n;
        }
        long left = deadlineNanos - System.nanoTime();
        if (left <= 0) {
          return 0;
        }
        try {
          wait(Math.max(1, left / 1_000_000), 0);
        } catch (InterruptedException e) {
          if (interruptible) {
            throw e;
          }
          interrupted = true;
        }
      }
    } finally {
      if (interrupted) {
        Thread.currentThread().interrupt();
      }
    }
  }

  /** Leaves once; returns the hold count left. REQUIRES: held by {@code tid}. */
  synchronized int exit(long tid) {
    if (holder != tid) {
      throw new IllegalMonitorStateException("lock not held by thread " + tid);
    }
    if (--count == 0) {
      holder = 0;
      lease = null;
      notifyAll();
    }
    return count;
  }

  /** Drops every hold of {@code tid} (its lease was lost); no-op when it holds none. */
  synchronized void drop(long tid) {
    if (holder == tid) {
      holder = 0;
      count = 0;
      lease = null;
      notifyAll();
    }
  }

  synchronized int holdCount(long tid) {
    return holder == tid ? count : 0;
  }

  synchronized boolean isHeld() {
    return holder != 0;
  }

  synchronized Lease lease() {
    return lease;
  }

  synchronized void setLease(Lease l) {
    lease = l;
  }
}
