package io.lockd.testing;

import io.lockd.LockdClient;
import java.io.IOException;
import java.nio.file.Path;
import java.util.concurrent.TimeUnit;
import java.util.function.BooleanSupplier;

/** One lockd (memory backend) and two clients of it, as most suites need. */
public final class LockdFixture implements AutoCloseable {
  public final LockdProcess lockd;
  public final LockdClient one;
  public final LockdClient two;

  private LockdFixture(LockdProcess lockd) {
    this.lockd = lockd;
    this.one = LockdClient.builder().target(lockd.address()).build();
    this.two = LockdClient.builder().target(lockd.address()).build();
  }

  public static LockdFixture start(Path dir) throws IOException, InterruptedException {
    return new LockdFixture(new LockdProcess(dir).start());
  }

  @Override
  public void close() {
    one.close();
    two.close();
    lockd.close();
  }

  /** Polls {@code cond} every 20 ms for up to 15 s; whether it became true. */
  public static boolean waitFor(BooleanSupplier cond) throws InterruptedException {
    long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(15);
    while (System.nanoTime() < deadline) {
      if (cond.getAsBoolean()) {
        return true;
      }
      Thread.sleep(20);
    }
    return false;
  }
}
