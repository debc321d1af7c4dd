#!/usr/bin/python3
"""Generates the lockd Python package's private gRPC stubs.

Writes lockd/_proto/{lockd/v1,google/rpc}/*_pb2*.py under --out with
grpc_tools.protoc, then points their imports at lockd._proto so that the
stubs never collide with another `lockd.v1` or `google.rpc` on sys.path.
The one place stubs are made: run by the CMake build
(clients/python/CMakeLists.txt) and imported by setup.py when a wheel is
built. Never checked in.
"""

import argparse
import os
import re
import sys

PROTOS = ["lockd/v1/lock.proto", "google/rpc/status.proto", "google/rpc/error_details.proto"]
PACKAGES = ["", "lockd", "lockd/v1", "google", "google/rpc"]
IMPORT_RE = re.compile(r"^from (lockd\.v1|google\.rpc) import ", re.MULTILINE)


def generate(proto_root: str, out: str) -> None:
    """Writes <out>/lockd/_proto/ from the PROTOS under proto_root.

    Raises RuntimeError if protoc fails (its message is on stderr).
    """
    import grpc_tools  # only needed here: keeps PROTOS importable without it
    from grpc_tools import protoc

    # The well-known types (google/protobuf/duration.proto, ...) that
    # grpcio-tools ships; `python -m grpc_tools.protoc` adds them itself,
    # protoc.main() does not.
    well_known = os.path.join(os.path.dirname(grpc_tools.__file__), "_proto")

    dest = os.path.join(out, "lockd", "_proto")
    for pkg in PACKAGES:
        os.makedirs(os.path.join(dest, pkg), exist_ok=True)
    rc = protoc.main([
        "grpc_tools.protoc",
        "--proto_path=" + proto_root,
        "--proto_path=" + well_known,
        "--python_out=" + dest,
        "--grpc_python_out=" + dest,
        *[os.path.join(proto_root, p) for p in PROTOS],
    ])
    if rc != 0:
        raise RuntimeError("gen_stubs: protoc failed with status %d" % rc)
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


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--proto-root", required=True, help="directory holding lockd/ and google/rpc/")
    parser.add_argument("--out", required=True, help="directory that receives lockd/_proto/")
    args = parser.parse_args()
    try:
        generate(args.proto_root, args.out)
    except RuntimeError as e:
        print(e, file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
