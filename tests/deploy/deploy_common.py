"""deploy_common.py — what the tests of tests/deploy share: failing with the
tail of physd's log (and killing the physd children still running), physctl
as a child process, a free port on 127.0.0.1."""
import socket
import subprocess
import sys


class Harness:
    def __init__(self, name, physctl_bin, log_path):
        self.name, self.physctl_bin, self.log = name, physctl_bin, log_path
        self.procs = []  # physd children to kill on failure

    def fail(self, msg):
        print("%s: FAIL: %s" % (self.name, msg), file=sys.stderr)
        for p in self.procs:
            if p.poll() is None:
                p.kill()
        try:
            with open(self.log) as f:
                sys.stderr.write("---- physd log (tail) ----\n" + "".join(f.readlines()[-40:]))
        except OSError:
            pass
        sys.exit(1)

    def physctl(self, port, *args):
        r = subprocess.run([self.physctl_bin, "--port", str(port), "--timeout", "20000"] + list(args),
                           capture_output=True, text=True, timeout=60)
        if r.returncode != 0:
            self.fail("physctl %s: exit %d: %s" % (" ".join(args), r.returncode, r.stderr.strip()))
        return r.stdout.strip()


def free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port
