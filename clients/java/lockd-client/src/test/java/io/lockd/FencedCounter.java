package io.lockd;

/**
 * A counter that takes a write only with a fencing token at least the largest it has seen, and
 * notices a lost update (two writers at once) by reading, pausing and writing back.
 */
final class FencedCounter {
  private long value;
  private long largestToken;

  long value() {
    synchronized (this) {
      return value;
    }
  }

  void increment(long token) throws InterruptedException {
    long read;
    synchronized (this) {
      if (token < largestToken) {
        throw new IllegalStateException("stale token " + token + " < " + largestToken);
      }
      largestToken = token;
      read = value;
    }
    Thread.sleep(1); // a writer that overlaps this one would now lose an update
    synchronized (this) {
      value = read + 1;
    }
  }
}
