package io.lockd;

import java.time.Duration;

/**
 * How long the client may trust a lease; each bound is written once, here, and used by every
 * call site (the unary path, renewals, the session stream, the path choice). The same rules as
 * every lockd client; the tests check them against clients/testdata/lease_validity.json.
 *
 * <pre>
 *   drift          = ttl * clockDriftFactor + minClockDrift
 *   hang bound (K) = max(keepaliveTime, 10 s) + keepaliveTimeout   (grpc-java pings at most
 *                                                                    every 10 s)
 *   unary          : valid until send + ttl - drift
 *   session break  : valid until breakNoticed - K + ttl*2/3 - drift
 *   session safe   : ttl*2/3 - drift > K, or ttl zero (not known yet)
 * </pre>
 *
 * Why: a lease cannot have started before the request that granted or renewed it was sent, so
 * the send time bounds the server's lease from below. A session stream to a replica that hangs
 * breaks within K (keepalive pings), and the replica renewed each hold at most ttl/3 before it
 * was last known alive. Times are {@link System#nanoTime()} values. Pure functions; thread-safe.
 */
final class LeaseValidity {
  private LeaseValidity() {}

  /** grpc-java raises a shorter keepalive time to this. */
  static final Duration MIN_KEEPALIVE_TIME = Duration.ofSeconds(10);

  static Duration drift(Duration ttl, double clockDriftFactor, Duration minClockDrift) {
    return Duration.ofNanos(Math.round(ttl.toNanos() * clockDriftFactor)).plus(minClockDrift);
  }

  /** K for a channel whose keepalive is {@code time} and {@code timeout}. */
  static Duration hangBound(Duration keepaliveTime, Duration keepaliveTimeout) {
    Duration interval =
        keepaliveTime.compareTo(MIN_KEEPALIVE_TIME) < 0 ? MIN_KEEPALIVE_TIME : keepaliveTime;
    return interval.plus(keepaliveTimeout);
  }

  /** send + ttl - drift. */
  static long unaryValidUntil(long sendNanos, Duration ttl, Duration drift) {
    return sendNanos + ttl.minus(drift).toNanos();
  }

  /** breakNoticed - hangBound + ttl*2/3 - drift. */
  static long sessionBreakValidUntil(
      long breakNoticedNanos, Duration hangBound, Duration ttl, Duration drift) {
    return breakNoticedNanos - hangBound.toNanos() + twoThirds(ttl) - drift.toNanos();
  }

  /** ttl*2/3 - drift > hangBound, or ttl zero (the server's default, not known yet). */
  static boolean sessionSafe(Duration ttl, Duration drift, Duration hangBound) {
    return ttl.isZero() || twoThirds(ttl) - drift.toNanos() > hangBound.toNanos();
  }

  private static long twoThirds(Duration ttl) {
    return ttl.toNanos() * 2 / 3;
  }
}
