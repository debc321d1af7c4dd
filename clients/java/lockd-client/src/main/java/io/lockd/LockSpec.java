package io.lockd;

import java.util.Objects;

/**
 * One lock to take (docs/api.md "Shared locks, semaphores and all-or-nothing acquires"): a name
 * held EXCLUSIVE (a mutex, a writer) or SHARED (a reader), or a semaphore of {@code limit}
 * permits of which the acquire takes {@code permits}. Immutable.
 *
 * @param namespace empty: the client's namespace
 * @param name 1-512 bytes of UTF-8 without control characters
 * @param mode EXCLUSIVE or SHARED; EXCLUSIVE for a semaphore
 * @param limit non-zero: a semaphore of this many permits (1-10,000)
 * @param permits with a limit: the permits to take (1-limit)
 */
public record LockSpec(String namespace, String name, Mode mode, int limit, int permits) {
  /** How a lock is held. */
  public enum Mode {
    EXCLUSIVE,
    SHARED
  }

  public LockSpec {
    Objects.requireNonNull(namespace, "namespace");
    Objects.requireNonNull(name, "name");
    Objects.requireNonNull(mode, "mode");
    if (name.isEmpty()) {
      throw new IllegalArgumentException("name: must not be empty");
    }
    if (limit < 0 || limit > 10_000) {
      throw new IllegalArgumentException("limit: must be between 0 and 10000 (got " + limit + ")");
    }
    if (limit == 0 && permits != 0) {
      throw new IllegalArgumentException("permits: only with a limit (got " + permits + ")");
    }
    if (limit > 0 && (permits < 1 || permits > limit)) {
      throw new IllegalArgumentException(
          "permits: must be between 1 and limit " + limit + " (got " + permits + ")");
    }
    if (limit > 0 && mode != Mode.EXCLUSIVE) {
      throw new IllegalArgumentException("mode: a semaphore is not SHARED");
    }
  }

  public static LockSpec exclusive(String name) {
    return new LockSpec("", name, Mode.EXCLUSIVE, 0, 0);
  }

  public static LockSpec shared(String name) {
    return new LockSpec("", name, Mode.SHARED, 0, 0);
  }

  public static LockSpec semaphore(String name, int limit, int permits) {
    return new LockSpec("", name, Mode.EXCLUSIVE, limit, permits);
  }

  /** This lock in {@code namespace}. */
  public LockSpec in(String namespace) {
    return new LockSpec(namespace, name, mode, limit, permits);
  }
}
