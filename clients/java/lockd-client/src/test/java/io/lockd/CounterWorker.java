package io.lockd;

import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;

/**
 * A process of {@link CrossProcessTest}: {@code threads} threads each add 1 to the counter in
 * {@code file} {@code iterations} times under lockd lock {@code name}. The file holds "value
 * largest-token"; a write with a smaller token than the largest seen fails (fencing), and two
 * writers at once would lose an update (read, pause, write). Exit status 0 when every increment
 * was done under a valid token.
 */
public final class CounterWorker {
  private CounterWorker() {}

  public static void main(String[] args) throws Exception {
    String target = args[0];
    String name = args[1];
    Path file = Path.of(args[2]);
    int threads = Integer.parseInt(args[3]);
    int iterations = Integer.parseInt(args[4]);
    try (LockdClient client = LockdClient.builder().target(target).build()) {
      List<Thread> all = new ArrayList<>();
      List<Throwable> failures = new java.util.concurrent.CopyOnWriteArrayList<>();
      for (int t = 0; t < threads; t++) {
        Thread th = new Thread(() -> {
          LockdLock lock = client.getLock(name);
          for (int i = 0; i < iterations; i++) {
            lock.lock();
            try {
              increment(file, lock.getFencingToken());
            } catch (Throwable e) {
              failures.add(e);
            } finally {
              lock.unlock();
            }
          }
        });
        all.add(th);
        th.start();
      }
      for (Thread th : all) {
        th.join();
      }
      if (!failures.isEmpty()) {
        failures.get(0).printStackTrace();
        System.exit(1);
      }
    }
  }

  static void increment(Path file, long token) throws Exception {
    String[] parts = Files.readString(file, StandardCharsets.US_ASCII).trim().split(" ");
    long value = Long.parseLong(parts[0]);
    long largest = Long.parseLong(parts[1]);
    if (token < largest) {
      throw new IllegalStateException("stale fencing token " + token + " < " + largest);
    }
    Thread.sleep(2);
    Files.writeString(file, (value + 1) + " " + token, StandardCharsets.US_ASCII);
  }
}
