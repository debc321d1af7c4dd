// The Java worker of cross_language_test.py: TARGET NAME COUNTER_FILE
// ITERATIONS, as worker.cc does it, with LockdLock.acquire(). Run as a
// single-file program: java -cp <lockd-client and its dependencies> Worker.java

import io.lockd.LockdClient;
import io.lockd.LockdLock;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.StandardCopyOption;

public final class Worker {
  public static void main(String[] args) throws Exception {
    Path file = Path.of(args[2]);
    Path tmp = Path.of(args[2] + ".java");
    try (LockdClient client = LockdClient.builder().target(args[0]).build()) {
      LockdLock lock = client.getLock(args[1]);
      for (int i = 0, n = Integer.parseInt(args[3]); i < n; i++) {
        try (LockdLock.Guard held = lock.acquire()) {
          String[] state = Files.readString(file).trim().split("\\s+");
          long count = Long.parseLong(state[0]);
          long seen = Long.parseLong(state[1]);
          if (held.fencingToken() <= seen) {
            System.err.println("fencing violation: token " + held.fencingToken() + " after " + seen);
            System.exit(3);
          }
          Thread.sleep(2);
          Files.writeString(tmp, (count + 1) + " " + held.fencingToken() + "\n");
          Files.move(tmp, file, StandardCopyOption.REPLACE_EXISTING, StandardCopyOption.ATOMIC_MOVE);
        }
      }
    }
  }
}
