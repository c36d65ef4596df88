"""run_examples.py — the Python examples of the documentation, run as written.

Usage: PYTHON run_examples.py PHYSD_BIN ROOT EXPECT  (PYTHON: the venv with
physd_client installed, tests/python/install_venv.sh)

Normal path: starts PHYSD_BIN --port 0 --http-port 0 (with its demo world,
as ./deploy/run.sh does) and reads its ports from the log; takes every
```python block of README.md's "## Python client" section and of
docs/clients.md's "## The Python client" section; runs each, unchanged, with
this Python in a scratch directory, PHYSD_PORT naming the server (connect()
reads it, as physctl does); each must exit 0 within 60 s, and its stdout must
match every regular expression EXPECT gives for it ("FILE N<TAB>REGEX"
lines, N counting that file's blocks from 1).

Failure modes: a block that fails, times out, or prints something else, a
block without an expectation, or fewer blocks than expected (the extraction
broke) exits 1 with the block's output.
"""
import os
import re
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "server"))
from physd_py import Physd  # noqa: E402

physd_bin, root, expect_path = sys.argv[1:4]
SECTIONS = {"README.md": "## Python client", "docs/clients.md": "## The Python client"}


def blocks(path, heading):
    out, in_sec, in_blk, cur = [], False, False, []
    for line in open(os.path.join(root, path)):
        line = line.rstrip("\n")
        if line.startswith("## "):
            in_sec = line == heading
            continue
        if in_sec and not in_blk and line == "```python":
            in_blk, cur = True, []
        elif in_blk and line == "```":
            in_blk = False
            out.append("\n".join(cur) + "\n")
        elif in_blk:
            cur.append(line)
    return out


expect = {}
for line in open(expect_path):
    if not line.strip() or line.startswith("#"):
        continue
    key, regex = line.rstrip("\n").split("\t", 1)
    expect.setdefault(key, []).append(regex)

physd = Physd([physd_bin, "--port", "0", "--http-port", "0", "--workers", "2"])
m = physd.wait_log(r"listening on 127\.0\.0\.1:(\d+)")
if not m:
    physd.proc.kill()
    sys.exit("physd did not start:\n" + physd.log())
env = dict(os.environ, PHYSD_PORT=m.group(1))
env.pop("PHYSD_HOST", None)
failed, n = 0, 0
try:
    with tempfile.TemporaryDirectory() as work:
        for path, heading in SECTIONS.items():
            found = blocks(path, heading)
            if not found:
                sys.exit("no python blocks in %s, %s" % (path, heading))
            for k, code in enumerate(found, 1):
                n += 1
                key = "%s %d" % (path, k)
                script = os.path.join(work, "example_%d.py" % n)
                with open(script, "w") as f:
                    f.write(code)
                if key not in expect:
                    print("%s: no expectation in %s" % (key, expect_path))
                    failed += 1
                    continue
                try:
                    p = subprocess.run([sys.executable, script], cwd=work, env=env, capture_output=True, text=True,
                                       timeout=60)
                    rc, out, err = p.returncode, p.stdout, p.stderr
                except subprocess.TimeoutExpired as e:
                    rc, out, err = "timeout", e.stdout or "", e.stderr or ""
                bad = [r for r in expect[key] if not re.search(r, out, re.M)]
                if rc != 0 or bad:
                    failed += 1
                    print("%s: exit %s, unmatched %s\n--- stdout\n%s--- stderr\n%s" % (key, rc, bad, out, err))
                else:
                    print("ok %s (%d lines of code): %s" % (key, code.count("\n"), out.strip().replace("\n", " | ")))
finally:
    rc = physd.stop()
if rc != 0:
    sys.exit("physd exited with %d:\n%s" % (rc, physd.log()[-3000:]))
if failed:
    sys.exit("%d of %d examples failed" % (failed, n))
print("%d examples ran as written" % n)
