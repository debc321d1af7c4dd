package io.lockd;

import com.google.protobuf.Struct;
import com.google.protobuf.util.JsonFormat;
import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;

/** The shared test vectors of every lockd client (clients/testdata), read as Structs. */
final class Vectors {
  private Vectors() {}

  static Path path(String file) {
    return Path.of(System.getProperty("lockd.testdata", "../../testdata"), file);
  }

  static Struct read(String file) throws IOException {
    Struct.Builder b = Struct.newBuilder();
    JsonFormat.parser().merge(Files.readString(path(file)), b);
    return b.build();
  }
}
