package io.lockd.testing;

import java.io.IOException;
import java.io.InputStream;
import java.io.OutputStream;
import java.net.InetAddress;
import java.net.ServerSocket;
import java.net.Socket;
import java.util.ArrayList;
import java.util.List;

/**
 * A TCP proxy on a loopback port in front of lockd. {@link #holdReplies(boolean)} true keeps
 * lockd's bytes back (a reply lockd wrote, and so counts as delivered, that the client never
 * hears); {@link #cut()} closes every connection, dropping what was held back. Two threads per
 * connection copy the bytes. Thread-safe.
 */
public final class StallProxy implements AutoCloseable {
  private final ServerSocket listener;
  private final int upstreamPort;
  private final List<Socket> sockets = new ArrayList<>();
  private boolean hold;

  public StallProxy(int upstreamPort) throws IOException {
    this.upstreamPort = upstreamPort;
    this.listener = new ServerSocket(0, 64, InetAddress.getLoopbackAddress());
    Thread t = new Thread(this::accept, "stall-proxy");
    t.setDaemon(true);
    t.start();
  }

  public String address() {
    return "127.0.0.1:" + listener.getLocalPort();
  }

  public synchronized void holdReplies(boolean h) {
    hold = h;
    notifyAll();
  }

  /** Closes every connection (new ones are accepted afterwards). */
  public synchronized void cut() {
    for (Socket s : sockets) {
      try {
        s.close();
      } catch (IOException e) {
        // closed already
      }
    }
    sockets.clear();
  }

  @Override
  public void close() throws IOException {
    listener.close();
    cut();
  }

  private void accept() {
    while (!listener.isClosed()) {
      try {
        Socket client = listener.accept();
        Socket upstream = new Socket("127.0.0.1", upstreamPort);
        synchronized (this) {
          sockets.add(client);
          sockets.add(upstream);
        }
        pump(client, upstream, false);
        pump(upstream, client, true);
      } catch (IOException e) {
        // listener closed, or lockd down: the client sees the connection fail
      }
    }
  }

  private void pump(Socket from, Socket to, boolean replies) {
    Thread t = new Thread(() -> {
      byte[] buf = new byte[65536];
      try (InputStream in = from.getInputStream(); OutputStream out = to.getOutputStream()) {
        int n;
        while ((n = in.read(buf)) > 0) {
          if (replies) {
            waitWhileHeld(from);
          }
          out.write(buf, 0, n);
          out.flush();
        }
      } catch (IOException | InterruptedException e) {
        // cut
      } finally {
        try {
          from.close();
          to.close();
        } catch (IOException e) {
          // closed already
        }
      }
    }, "stall-proxy-pump");
    t.setDaemon(true);
    t.start();
  }

  private synchronized void waitWhileHeld(Socket from) throws InterruptedException, IOException {
    while (hold) {
      if (from.isClosed()) {
        throw new IOException("cut");
      }
      wait(50);
    }
    if (from.isClosed()) {
      throw new IOException("cut");
    }
  }
}
