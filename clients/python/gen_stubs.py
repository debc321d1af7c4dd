#!/usr/bin/python3
"""Generates the lockd Python package's private gRPC stubs.

Writes lockd/_proto/{lockd/v1,google/rpc}/*_pb2*.py under --out with
grpc_tools.protoc, then points their imports at lockd._proto so that the
stubs never collide with another `lockd.v1` or `google.rpc` on sys.path.
Run by the build (clients/python/CMakeLists.txt); never checked in.
"""

import argparse
import os
import re
import sys

from grpc_tools import protoc

PROTOS = ["lockd/v1/lock.proto", "google/rpc/status.proto", "google/rpc/error_details.proto"]
PACKAGES = ["", "lockd", "lockd/v1", "google", "google/rpc"]
IMPORT_RE = re.compile(r"^from (lockd\.v1|google\.rpc) import ", re.MULTILINE)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--proto-root", required=True, help="directory holding lockd/ and google/rpc/")
    parser.add_argument("--out", required=True, help="directory that receives lockd/_proto/")
    args = parser.parse_args()

    dest = os.path.join(args.out, "lockd", "_proto")
    for pkg in PACKAGES:
        os.makedirs(os.path.join(dest, pkg), exist_ok=True)
    rc = protoc.main([
        "grpc_tools.protoc",
        "--proto_path=" + args.proto_root,
        "--python_out=" + dest,
        "--grpc_python_out=" + dest,
        *[os.path.join(args.proto_root, p) for p in PROTOS],
    ])
    if rc != 0:
        print("gen_stubs.py: protoc failed with status %d" % rc, file=sys.stderr)
        return 1
    for pkg in PACKAGES:
        d = os.path.join(dest, pkg)
        init = os.path.join(d, "__init__.py")
        if not os.path.exists(init):
            with open(init, "w") as f:
                f.write("# Generated package marker.\n")
        for name in os.listdir(d):
            if not name.endswith(".py") or name == "__init__.py":
                continue
            path = os.path.join(d, name)
            with open(path) as f:
                text = f.read()
            fixed = IMPORT_RE.sub(lambda m: "from lockd._proto.%s import " % m.group(1), text)
            if fixed != text:
                with open(path, "w") as f:
                    f.write(fixed)
    return 0


if __name__ == "__main__":
    sys.exit(main())
