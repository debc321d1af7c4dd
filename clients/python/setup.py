"""Build hooks of the lockd-client package (metadata is in pyproject.toml).

build_py generates the gRPC stubs (gen_stubs.py, the same code the CMake
build runs) into the build tree, so that wheels hold lockd._proto while the
source tree holds no generated code. The .proto files are found in protos/
beside this file (an sdist, which sdist below fills) or in the repository's
protos/ two levels up (a checkout).
"""

import os
import shutil
import sys
from importlib import metadata

from setuptools import setup
from setuptools.command.build_py import build_py
from setuptools.command.sdist import sdist

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import gen_stubs  # noqa: E402  (beside this file, not an installed module)

# Lowest runtimes the client supports: Debian 12's python3-grpcio and
# python3-protobuf. Stubs made by a newer generator refuse older runtimes at
# import (grpcio-tools >= 1.63 checks grpcio, protobuf >= 5.26 gencode checks
# protobuf), so a newer grpcio-tools or protobuf at build time raises the floor.
FLOORS = [("grpcio", "grpcio-tools", (1, 51)), ("protobuf", "protobuf", (4, 21))]


def requirements():
    reqs = []
    for dist, generator, floor in FLOORS:
        try:
            built_with = tuple(int(x) for x in metadata.version(generator).split(".")[:2])
        except (metadata.PackageNotFoundError, ValueError):
            built_with = floor
        reqs.append("%s>=%d.%d" % ((dist,) + max(floor, built_with)))
    return reqs


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


setup(install_requires=requirements(),
      cmdclass={"build_py": BuildPyWithStubs, "sdist": SdistWithProtos})
