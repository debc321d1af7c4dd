package io.lockd;

import java.util.List;

/**
 * The holds of one {@link LockdClient#acquireAll}, one {@link Lease} per lock in the order
 * asked; each is renewed, lost and released on its own. {@link #close()} releases them all (a
 * try-with-resources guard). Thread-safe as {@link Lease}.
 */
public final class LeaseSet implements AutoCloseable {
  private final List<Lease> leases;

  LeaseSet(List<Lease> leases) {
    this.leases = List.copyOf(leases);
  }

  public List<Lease> leases() {
    return leases;
  }

  public Lease get(int i) {
    return leases.get(i);
  }

  /** Every lease valid. */
  public boolean isValid() {
    return leases.stream().allMatch(Lease::isValid);
  }

  /**
   * Releases every lease that is not released yet, all of them even after a failure; throws
   * the first failure.
   */
  @Override
  public void close() {
    RuntimeException first = null;
    for (Lease l : leases) {
      if (l.isReleased()) {
        continue;
      }
      try {
        l.release();
      } catch (RuntimeException e) {
        if (first == null) {
          first = e;
        }
      }
    }
    if (first != null) {
      throw first;
    }
  }
}
