package io.lockd.testing;

import java.io.IOException;
import java.io.InputStream;
import java.net.Socket;
import java.nio.charset.StandardCharsets;
import java.nio.file.Path;
import java.util.concurrent.TimeUnit;

/** redis-server on a free loopback port, no persistence, its files in {@code dir}. */
public final class RedisProcess implements AutoCloseable {
  private final int port;
  private final Process process;

  public RedisProcess(Path dir) throws IOException, InterruptedException {
    port = LockdProcess.freePort();
    String binary = System.getenv().getOrDefault("REDIS_SERVER", "redis-server");
    process = new ProcessBuilder(binary, "--port", String.valueOf(port), "--bind", "127.0.0.1",
        "--save", "", "--appendonly", "no", "--dir", dir.toString())
        .redirectErrorStream(true)
        .redirectOutput(dir.resolve("redis.log").toFile()).start();
    long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(20);
    while (!answers()) {
      if (System.nanoTime() > deadline || !process.isAlive()) {
        close();
        throw new IllegalStateException("redis-server did not start");
      }
      Thread.sleep(20);
    }
  }

  public int port() {
    return port;
  }

  private boolean answers() {
    try (Socket s = new Socket("127.0.0.1", port)) {
      s.getOutputStream().write("PING\r\n".getBytes(StandardCharsets.US_ASCII));
      InputStream in = s.getInputStream();
      byte[] buf = new byte[5];
      return in.read(buf) > 0 && new String(buf, StandardCharsets.US_ASCII).startsWith("+PONG");
    } catch (IOException e) {
      return false;
    }
  }

  @Override
  public void close() {
    process.destroyForcibly();
    try {
      process.waitFor();
    } catch (InterruptedException e) {
      Thread.currentThread().interrupt();
    }
  }
}
