package io.lockd;

import static org.junit.jupiter.api.Assertions.assertEquals;

import io.lockd.testing.LockdProcess;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/** Mutual exclusion between two JVM processes: a fenced counter in a file loses nothing. */
class CrossProcessTest {
  @TempDir Path dir;

  @Test
  void twoJvmsIncrementAFencedCounterWithoutLosingAnUpdate() throws Exception {
    try (LockdProcess lockd = new LockdProcess(dir).start()) {
      Path counter = dir.resolve("counter");
      Files.writeString(counter, "0 0", StandardCharsets.US_ASCII);
      String java = Path.of(System.getProperty("java.home"), "bin", "java").toString();
      List<Process> workers = new ArrayList<>();
      for (int p = 0; p < 2; p++) {
        workers.add(new ProcessBuilder(java, "-cp", System.getProperty("java.class.path"),
            CounterWorker.class.getName(), lockd.address(), "jvm-counter", counter.toString(),
            "2", "15")
            .redirectErrorStream(true)
            .redirectOutput(dir.resolve("worker-" + p + ".log").toFile()).start());
      }
      for (int p = 0; p < workers.size(); p++) {
        Process w = workers.get(p);
        if (!w.waitFor(120, TimeUnit.SECONDS)) {
          w.destroyForcibly();
        }
        assertEquals(0, w.exitValue(),
            Files.readString(dir.resolve("worker-" + p + ".log")));
      }
      assertEquals("60", Files.readString(counter).split(" ")[0]);
    }
  }

}
