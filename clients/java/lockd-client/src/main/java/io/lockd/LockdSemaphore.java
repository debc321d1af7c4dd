package io.lockd;

import java.time.Duration;
import java.util.ArrayDeque;
import java.util.Deque;
import java.util.List;
import java.util.Map;
import java.util.UUID;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.TimeUnit;

/**
 * A lockd semaphore: the name with {@code limit} permits, shared by every client that uses it
 * with the same limit; owners whose permits add up to at most the limit hold it at once, and a
 * waiting acquire is granted FIFO (docs/api.md "Shared locks, semaphores and all-or-nothing
 * acquires"). Each acquire is one hold of its own owner ({@code <clientId>/permit-<random>}), so
 * one thread may hold several; such holds take the unary path and the client's watchdog renews
 * them. An acquire returns its {@link Lease} (close it to give the permits back); {@link
 * #release()} gives back the calling thread's newest acquire. Thread-safe.
 */
public final class LockdSemaphore {
  private final LockdClient client;
  private final String name;
  private final String namespace;
  private final int limit;
  private final Map<Long, Deque<Lease>> held = new ConcurrentHashMap<>();

  LockdSemaphore(LockdClient client, String name, String namespace, int limit) {
    if (limit < 1 || limit > 10_000) {
      throw new IllegalArgumentException("limit: must be between 1 and 10000 (got " + limit + ")");
    }
    this.client = client;
    this.name = name;
    this.namespace = namespace;
    this.limit = limit;
  }

  public int limit() {
    return limit;
  }

  /**
   * Takes {@code permits} (1-limit), waiting as long as it takes.
   *
   * @throws LockdException FAILED_PRECONDITION LOCK_KIND_MISMATCH when the name is held as a
   *     lock or with another limit (at once)
   */
  public Lease acquire(int permits) throws InterruptedException {
    while (true) {
      Lease l = tryAcquire(permits, 60, TimeUnit.SECONDS);
      if (l != null) {
        return l;
      }
    }
  }

  /** Takes {@code permits} if lockd grants them within {@code time}; null otherwise. */
  public Lease tryAcquire(int permits, long time, TimeUnit unit) throws InterruptedException {
    LockSpec spec = LockSpec.semaphore(name, limit, permits).in(namespace);
    String owner = client.clientId() + "/permit-" + UUID.randomUUID();
    List<Lease> leases = client.acquire(client.newCall(List.of(spec), false, owner,
        Duration.ZERO, Duration.ofNanos(Math.max(0, unit.toNanos(time))), true, true));
    if (leases.isEmpty()) {
      return null;
    }
    held.computeIfAbsent(tid(), k -> new ArrayDeque<>()).addLast(leases.get(0));
    return leases.get(0);
  }

  /**
   * Gives back the permits of the calling thread's newest acquire that is not released yet.
   *
   * @throws IllegalMonitorStateException the thread holds none
   */
  public void release() {
    Deque<Lease> mine = held.get(tid());
    while (mine != null && !mine.isEmpty()) {
      Lease l = mine.pollLast();
      if (!l.isReleased()) {
        l.release();
        return;
      }
    }
    throw new IllegalMonitorStateException(
        "semaphore " + Errors.describe(namespace, name) + ": the current thread holds no permits");
  }

  private static long tid() {
    return Thread.currentThread().getId();
  }
}
