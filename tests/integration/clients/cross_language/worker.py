"""The Python worker of cross_language_test.py: TARGET NAME COUNTER_FILE
ITERATIONS, as worker.cc does it, with lockd.Client.lock()."""

import os
import sys
import time

import lockd


def main(target, name, path, iterations):
    with lockd.Client(target) as client:
        for _ in range(int(iterations)):
            with client.lock(name, wait=60) as lease:
                with open(path) as f:
                    count, seen = (int(x) for x in f.read().split())
                if lease.fencing_token <= seen:
                    print("fencing violation: token %d after %d" % (lease.fencing_token, seen),
                          file=sys.stderr)
                    return 3
                time.sleep(0.002)
                with open(path + ".py", "w") as f:
                    f.write("%d %d\n" % (count + 1, lease.fencing_token))
                os.replace(path + ".py", path)
    return 0


if __name__ == "__main__":
    sys.exit(main(*sys.argv[1:]))
