"""setup.py — the build step of physd_client: physd_pb2.py from proto/physd.proto.

Normal path: pip (setuptools) runs build_py, which copies the package and
then runs protoc (PROTOC, else protoc on PATH; Debian: protobuf-compiler)
on physd.proto into the build's physd_client/. The proto is found at
PHYSD_PROTO, else next to this file (an sdist, which copies it in), else at
../../proto/physd.proto (the repository). The generated module is never
committed (as for protoc-c's C code, DESIGN.md).

Failure modes: no proto or no protoc stops the build with a message saying
what is missing; protoc's own errors are shown as they are.
"""
import os
import shutil
import subprocess

from setuptools import setup
from setuptools.command.build_py import build_py
from setuptools.command.sdist import sdist

HERE = os.path.dirname(os.path.abspath(__file__))


def find_proto():
    for p in (os.environ.get("PHYSD_PROTO"), os.path.join(HERE, "physd.proto"),
              os.path.join(HERE, "..", "..", "proto", "physd.proto")):
        if p and os.path.isfile(p):
            return os.path.abspath(p)
    raise SystemExit("physd_client: proto/physd.proto not found (set PHYSD_PROTO to its path)")


class BuildPy(build_py):
    def run(self):
        super().run()
        proto = find_proto()
        protoc = os.environ.get("PROTOC") or shutil.which("protoc")
        if not protoc:
            raise SystemExit("physd_client: protoc not found (Debian: apt-get install protobuf-compiler)")
        out = os.path.join(self.build_lib, "physd_client")
        self.mkpath(out)
        subprocess.run([protoc, "--python_out=" + out, "-I", os.path.dirname(proto), os.path.basename(proto)],
                       check=True)
        print("physd_client: generated %s from %s" % (os.path.join(out, "physd_pb2.py"), proto))


class Sdist(sdist):
    def make_release_tree(self, base_dir, files):
        super().make_release_tree(base_dir, files)
        shutil.copy(find_proto(), os.path.join(base_dir, "physd.proto"))


setup(cmdclass={"build_py": BuildPy, "sdist": Sdist})
