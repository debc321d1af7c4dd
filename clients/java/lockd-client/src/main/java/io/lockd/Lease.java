package io.lockd;

import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.function.Consumer;

/**
 * One hold of one owner on one name, as lockd granted it: its fencing token, its lease and
 * whether the client may still trust it. Held over the client's session (the server renews it
 * while the stream is up) or by the unary path (the client's watchdog renews it every ttl/3).
 * {@link #close()} releases it, so a Lease is a try-with-resources guard.
 *
 * <p>Lost is sticky: once lost, {@link #isValid()} stays false, each listener is called once (on
 * a client thread, never with a lock of this library held), and {@link #release()} throws
 * {@link LockLostException}.
 *
 * <p>Thread-safe: state behind the object's monitor.
 */
public final class Lease implements AutoCloseable {
  final LockdClient client;
  final String namespace;
  final String name;
  final String owner;
  final LockSpec spec;
  final long fencingToken;
  final Duration ttl;
  final boolean session; // held over the session stream

  private long validUntilNanos; // Long.MAX_VALUE: renewed by a session that is up
  private LockLostException lost;
  private boolean released;
  private final List<Consumer<LockLostException>> listeners = new ArrayList<>();
  java.util.concurrent.Future<?> renewal; // the watchdog's next renewal; guarded by this

  Lease(
      LockdClient client,
      LockSpec spec,
      String namespace,
      String owner,
      long fencingToken,
      Duration ttl,
      boolean session,
      long validUntilNanos) {
    this.client = client;
    this.spec = spec;
    this.namespace = namespace;
    this.name = spec.name();
    this.owner = owner;
    this.fencingToken = fencingToken;
    this.ttl = ttl;
    this.session = session;
    this.validUntilNanos = validUntilNanos;
  }

  public String namespace() {
    return namespace;
  }

  public String name() {
    return name;
  }

  public String owner() {
    return owner;
  }

  /** Pass it with every write to the protected resource, which rejects smaller tokens. */
  public long fencingToken() {
    return fencingToken;
  }

  /** The lease the server granted. */
  public Duration ttl() {
    return ttl;
  }

  /** The lock as it was asked (mode, limit, permits). */
  public LockSpec spec() {
    return spec;
  }

  /**
   * Not lost, not released, and its validity not run out: check it just before an action the
   * lock protects, and pass {@link #fencingToken()} along for what timing cannot catch.
   */
  public boolean isValid() {
    checkValidity();
    synchronized (this) {
      return lost == null && !released && System.nanoTime() - validUntilNanos < 0;
    }
  }

  /** True once lost (sticky). */
  public boolean isLost() {
    checkValidity();
    synchronized (this) {
      return lost != null;
    }
  }

  /** Why the lease was lost, or null. */
  public synchronized LockLostException lostCause() {
    return lost;
  }

  /**
   * Calls {@code listener} once when the lease is lost (at once, on this thread, if it already
   * is). Not called after {@link #release()}.
   */
  public void onLost(Consumer<LockLostException> listener) {
    LockLostException already;
    synchronized (this) {
      already = lost;
      if (already == null) {
        listeners.add(listener);
      }
    }
    if (already != null) {
      listener.accept(already);
    }
  }

  /**
   * Gives up this hold (retried on UNAVAILABLE with one request_id, within the client's rpc
   * timeout). Afterwards the lease is inactive whatever the outcome.
   *
   * @throws LockLostException the lease had been lost, or the hold was gone when the release
   *     reached lockd: the work done under it was not protected
   * @throws IllegalStateException already released
   * @throws LockdException UNAVAILABLE or DEADLINE_EXCEEDED: no answer in time; the hold ends
   *     with its lease
   */
  public void release() {
    LockLostException wasLost;
    synchronized (this) {
      if (released) {
        throw new IllegalStateException("lease of " + Errors.describe(namespace, name)
            + " already released");
      }
      released = true;
      wasLost = lost;
    }
    if (wasLost != null) {
      client.forget(this);
      throw wasLost;
    }
    client.release(this);
  }

  /**
   * Resets the lease to {@code ttl} from now (lockd's clock), for a hold acquired with
   * autoRenew false; a session hold needs none (lockd renews it) and is left as it is.
   *
   * @throws LockLostException lockd no longer had the hold (now marked lost)
   * @throws LockdException INVALID_ARGUMENT (ttl outside lockd's bounds), UNAVAILABLE,
   *     DEADLINE_EXCEEDED: the lease is unchanged
   */
  public void renew(Duration ttl) {
    synchronized (this) {
      if (lost != null) {
        throw lost;
      }
      if (released) {
        throw new IllegalStateException("lease of " + Errors.describe(namespace, name)
            + " already released");
      }
    }
    if (!session) {
      client.renewOnce(this, ttl);
    }
  }

  /** {@link #release()}. */
  @Override
  public void close() {
    release();
  }

  synchronized boolean isReleased() {
    return released;
  }

  synchronized long validUntilNanos() {
    return validUntilNanos;
  }

  synchronized void setValidUntil(long nanos) {
    if (lost == null) {
      validUntilNanos = nanos;
    }
  }

  /** Marks the lease lost; calls the listeners unless it was lost or released already. */
  void markLost(String reason, String why) {
    List<Consumer<LockLostException>> toCall;
    LockLostException e;
    synchronized (this) {
      if (lost != null) {
        return;
      }
      e = new LockLostException(
          "lease of " + Errors.describe(namespace, name) + " (fencing token " + fencingToken
              + ") lost: " + why, reason);
      lost = e;
      toCall = released ? List.of() : new ArrayList<>(listeners);
      listeners.clear();
    }
    client.forget(this);
    for (Consumer<LockLostException> l : toCall) {
      client.runCallback(() -> l.accept(e));
    }
  }

  private void checkValidity() {
    boolean expired;
    synchronized (this) {
      expired = lost == null && !released && System.nanoTime() - validUntilNanos >= 0;
    }
    if (expired) {
      markLost("VALIDITY_EXPIRED", "its validity ran out before the client could confirm it");
    }
  }

  @Override
  public String toString() {
    return "Lease[" + Errors.describe(namespace, name) + ", token " + fencingToken + "]";
  }
}
