package io.lockd.shedlock;

import io.lockd.Lease;
import io.lockd.LockSpec;
import io.lockd.LockdClient;
import io.lockd.LockdException;
import java.time.Duration;
import java.time.Instant;
import java.util.Objects;
import java.util.Optional;
import java.util.UUID;
import net.javacrumbs.shedlock.core.LockConfiguration;
import net.javacrumbs.shedlock.core.LockProvider;
import net.javacrumbs.shedlock.core.SimpleLock;

/**
 * ShedLock's {@link LockProvider} on lockd: a scheduled task runs on one node at a time.
 *
 * <p>{@link #lock} tries once (ShedLock never waits) to take lockd lock {@code prefix + name}
 * with a lease of {@code lockAtMostFor}, for an owner of its own ({@code <clientId>/shedlock-
 * <random>}, so that a second call on the same node is refused too), never renewed: a node that
 * dies holds the lock at most that long. {@link SimpleLock#unlock()} releases it, or, before
 * {@code lockAtLeastUntil}, shortens its lease to end then (a remainder under lockd's minimum
 * lease releases it at once). {@link SimpleLock#extend} renews it to a new
 * {@code lockAtMostFor}. Holds take the client's unary path.
 *
 * <p>The provider does not own the client. Thread-safe.
 */
public final class LockdLockProvider implements LockProvider {
  private final LockdClient client;
  private final String prefix;

  public LockdLockProvider(LockdClient client) {
    this(client, "");
  }

  /** Locks named {@code prefix + name} (e.g. "shedlock/"). */
  public LockdLockProvider(LockdClient client, String prefix) {
    this.client = Objects.requireNonNull(client, "client");
    this.prefix = Objects.requireNonNull(prefix, "prefix");
  }

  /**
   * @return the lock, or empty when another node (or another call of this one) holds it
   * @throws LockdException lockd refused the call (e.g. INVALID_ARGUMENT for a lockAtMostFor
   *     outside its lease bounds) or was unreachable
   */
  @Override
  public Optional<SimpleLock> lock(LockConfiguration config) {
    String owner = client.clientId() + "/shedlock-" + UUID.randomUUID();
    Lease lease;
    try {
      lease = client.acquire(LockSpec.exclusive(prefix + config.getName()), owner,
          config.getLockAtMostFor(), Duration.ZERO, false);
    } catch (InterruptedException e) {
      Thread.currentThread().interrupt();
      return Optional.empty();
    }
    return lease == null ? Optional.empty()
        : Optional.of(new Held(lease, config.getLockAtLeastUntil()));
  }

  private static final class Held implements SimpleLock {
    private final Lease lease;
    private final Instant atLeastUntil;

    Held(Lease lease, Instant atLeastUntil) {
      this.lease = lease;
      this.atLeastUntil = atLeastUntil;
    }

    @Override
    public void unlock() {
      Duration left = Duration.between(Instant.now(), atLeastUntil);
      if (!left.isNegative() && !left.isZero()) {
        try {
          lease.renew(left);
          return;
        } catch (LockdException e) {
          // Under lockd's minimum lease, or lockd unreachable: release now.
        }
      }
      lease.release();
    }

    @Override
    public Optional<SimpleLock> extend(Duration lockAtMostFor, Duration lockAtLeastFor) {
      try {
        lease.renew(lockAtMostFor);
      } catch (LockdException e) {
        return Optional.empty();
      }
      return Optional.of(new Held(lease, Instant.now().plus(lockAtLeastFor)));
    }
  }
}
