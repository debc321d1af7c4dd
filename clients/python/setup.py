"""Build hooks of the lockd-client package (metadata is in pyproject.toml).

build_py generates the gRPC stubs (gen_stubs.py, the same code the CMake
build runs) into the build tree, so that wheels hold lockd._proto while the
source tree holds no generated code. The .proto files are found in protos/
beside this file (an sdist, which sdist below fills) or in the repository's
protos/ two levels up (a checkout).
"""

import os
import re
import shutil
import sys
import tempfile

from setuptools import setup
from setuptools.command.build_py import build_py
from setuptools.command.sdist import sdist

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import gen_stubs  # noqa: E402  (beside this file, not an installed module)

# Lowest runtimes the client supports: Debian 12's python3-grpcio and
# python3-protobuf. Stubs made by a newer generator refuse older runtimes at
# import (grpcio-tools >= 1.63 writes GRPC_GENERATED_VERSION into *_pb2_grpc.py,
# protobuf >= 5.26 gencode writes its "Protobuf Python Version"), so the
# floors are raised to what the stubs at hand say.
FLOORS = {"grpcio": (1, 51), "protobuf": (4, 21)}
STUB_VERSIONS = [
    ("grpcio", "lockd/_proto/lockd/v1/lock_pb2_grpc.py",
     re.compile(r"^GRPC_GENERATED_VERSION = '(\d+)\.(\d+)", re.MULTILINE)),
    ("protobuf", "lockd/_proto/lockd/v1/lock_pb2.py",
     re.compile(r"^# Protobuf Python Version: (\d+)\.(\d+)", re.MULTILINE)),
]


def requirements():
    """grpcio and protobuf, each at least its floor and the version its
    generated stub names (stubs generated into a scratch directory)."""
    floors = dict(FLOORS)
    with tempfile.TemporaryDirectory() as scratch:
        gen_stubs.generate(proto_root(), scratch)
        for dist, stub, pattern in STUB_VERSIONS:
            with open(os.path.join(scratch, stub)) as f:
                found = pattern.search(f.read())
            if found:
                floors[dist] = max(floors[dist], (int(found.group(1)), int(found.group(2))))
    return ["%s>=%d.%d" % (dist, major, minor) for dist, (major, minor) in floors.items()]


def proto_root():
    for root in (os.path.join(HERE, "protos"), os.path.join(HERE, "..", "..", "protos")):
        if os.path.exists(os.path.join(root, gen_stubs.PROTOS[0])):
            return os.path.normpath(root)
    raise RuntimeError("lockd-client: no protos/%s beside %s or in the repository" %
                       (gen_stubs.PROTOS[0], HERE))


class BuildPyWithStubs(build_py):
    def run(self):
        super().run()
        if not self.dry_run:
            gen_stubs.generate(proto_root(), self.build_lib)


class SdistWithProtos(sdist):
    def make_release_tree(self, base_dir, files):
        super().make_release_tree(base_dir, files)
        for proto in gen_stubs.PROTOS:
            dest = os.path.join(base_dir, "protos", proto)
            os.makedirs(os.path.dirname(dest), exist_ok=True)
            shutil.copyfile(os.path.join(proto_root(), proto), dest)
        # LICENSE is a link to the repository's in a checkout: the sdist
        # gets the text.
        license_copy = os.path.join(base_dir, "LICENSE")
        if os.path.islink(license_copy):
            os.unlink(license_copy)
        shutil.copyfile(os.path.join(HERE, "LICENSE"), license_copy)


setup(install_requires=requirements(),
      cmdclass={"build_py": BuildPyWithStubs, "sdist": SdistWithProtos})
