#!/bin/sh
# install_venv.sh SOURCE_DIR WORK_DIR — installs clients/python with pip as a
# user does (docs/clients.md, "The Python client"), for the Python client's
# tests (ctest fixture python_client).
#
# Normal path: a virtual environment WORK_DIR/venv made by Debian's
# /usr/bin/python3 with --system-site-packages (so Debian's python3-protobuf,
# python3-websocket, setuptools and wheel are visible: nothing is fetched),
# then `pip install --no-build-isolation --no-index` of a copy of
# clients/python beside a copy of proto/ (the layout of the repository, so
# the build finds ../../proto/physd.proto; the copy keeps setuptools' build/
# and egg-info out of the source tree). The build runs protoc, so
# physd_pb2.py in the installed package comes from proto/physd.proto here;
# the last step checks that: the descriptor the package carries equals the
# one protoc makes from the repository's proto now.
#
# Failure modes: anything failing exits non-zero with pip's or Python's
# message; a stale venv is removed first.
set -eu
src=$1 work=$2
rm -rf "$work/venv" "$work/src"
mkdir -p "$work/src/clients"
cp -r "$src/clients/python" "$work/src/clients/python"
rm -rf "$work/src/clients/python/build" "$work/src/clients/python/"*.egg-info
cp -r "$src/proto" "$work/src/proto"
/usr/bin/python3 -m venv --system-site-packages "$work/venv"
"$work/venv/bin/python" -m pip install --quiet --no-build-isolation --no-index "$work/src/clients/python"
protoc --descriptor_set_out="$work/physd.desc" -I "$src/proto" "$src/proto/physd.proto"
cd "$work"
"$work/venv/bin/python" - "$work/physd.desc" <<'PY'
import sys
from google.protobuf import descriptor_pb2
import physd_client
fds = descriptor_pb2.FileDescriptorSet()
fds.ParseFromString(open(sys.argv[1], "rb").read())
want = fds.file[0]
for m in want.message_type:  # protoc's descriptor sets carry json_name, the generated code not
    for f in m.field:
        f.ClearField("json_name")
    for n in m.nested_type:
        for f in n.field:
            f.ClearField("json_name")
got = descriptor_pb2.FileDescriptorProto()
got.ParseFromString(physd_client.pb.DESCRIPTOR.serialized_pb)
assert got == want, "the installed physd_pb2 is not proto/physd.proto's"
assert "site-packages" in physd_client.__file__, physd_client.__file__
print("install_venv: physd_client %s installed in %s; physd_pb2 = proto/physd.proto (%d messages, %d enums)"
      % (physd_client.__version__, physd_client.__file__, len(want.message_type), len(want.enum_type)))
PY
