package io.lockd.testing;

import java.io.IOException;
import java.net.ServerSocket;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.TimeUnit;

/**
 * A real lockd ($LOCKD_BINARY) on a loopback port, logging into a temporary directory. Started
 * with {@code --lease.min=100ms} and the flags given (memory backend unless they say otherwise).
 * Restartable on the same port. Not thread-safe.
 */
public final class LockdProcess implements AutoCloseable {
  private final Path dir;
  private final int port;
  private final List<String> flags;
  private Process process;

  public LockdProcess(Path dir, String... flags) throws IOException {
    this(dir, freePort(), flags);
  }

  public LockdProcess(Path dir, int port, String... flags) {
    this.dir = dir;
    this.port = port;
    this.flags = List.of(flags);
  }

  /** A lockd on a Redis at {@code redisPort}. */
  public static LockdProcess onRedis(Path dir, int redisPort) throws IOException {
    return new LockdProcess(dir, "--backend=redis", "--redis.addresses=127.0.0.1:" + redisPort);
  }

  public static String binary() {
    String b = System.getenv("LOCKD_BINARY");
    if (b == null || b.isEmpty()) {
      throw new IllegalStateException("LOCKD_BINARY must name the lockd binary");
    }
    return b;
  }

  public String address() {
    return "127.0.0.1:" + port;
  }

  public int port() {
    return port;
  }

  public LockdProcess start() throws IOException, InterruptedException {
    Path log = dir.resolve("lockd-" + port + ".log");
    List<String> cmd = new ArrayList<>(List.of(binary(), "--listen=" + address(),
        "--lease.min=100ms"));
    cmd.addAll(flags);
    process = new ProcessBuilder(cmd).redirectErrorStream(true)
        .redirectOutput(ProcessBuilder.Redirect.appendTo(log.toFile())).start();
    long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(30);
    while (System.nanoTime() < deadline) {
      if (!process.isAlive()) {
        throw new IllegalStateException("lockd exited: " + Files.readString(log));
      }
      if (Files.exists(log) && Files.readString(log).contains("lockd serving on")) {
        return this;
      }
      Thread.sleep(20);
    }
    throw new IllegalStateException("lockd did not start: " + Files.readString(log));
  }

  /** SIGKILL. */
  public void kill() throws InterruptedException {
    if (process != null && process.isAlive()) {
      process.destroyForcibly();
      process.waitFor();
    }
  }

  @Override
  public void close() {
    try {
      kill();
    } catch (InterruptedException e) {
      Thread.currentThread().interrupt();
    }
  }

  public static int freePort() throws IOException {
    try (ServerSocket s = new ServerSocket(0)) {
      return s.getLocalPort();
    }
  }
}
