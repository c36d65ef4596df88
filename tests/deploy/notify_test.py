#!/usr/bin/python3
"""notify_test.py — systemd's notification protocol as physd speaks it
(server/notify.c), against a real NOTIFY_SOCKET: a datagram socket this test
opens and reads, as systemd's manager would.

Usage: notify_test.py PHYSD PHYSCTL WORKDIR

What it checks, in order:
  1. A first physd (no NOTIFY_SOCKET) journals a world in WORKDIR/data and
     stops. A second one, with NOTIFY_SOCKET and WATCHDOG_USEC=1 s, sends
     READY=1 only once it listens and has recovered that world: at the
     moment READY=1 arrives, the protocol port accepts a connection and
     physctl lists the recovered world (id 1).
  2. WATCHDOG=1 arrives every 0.5 s (half of WATCHDOG_USEC; the gaps are
     measured), and STATUS= lines follow the worlds and connections.
  3. The loop blocked (SIGUSR2 with --test-stall-signal 3, a test-only
     option off by default): no ping for the 3 s the loop sleeps (longer
     than WATCHDOG_USEC: systemd would kill it), pings again afterwards.
  4. A stuck worker: a world whose one step takes far longer than
     --step-stall-timeout 1.5 (pyramid20 with 10000 iterations x 64
     substeps and no step budget): the pings stop within the timeout plus a
     period, STATUS says which world is unhealthy, and once the world is
     destroyed (its step cancelled) pings and a healthy STATUS come back.
  5. SIGTERM: STOPPING=1, then physd exits 0.
Exit 0 when all hold; otherwise the failed check is printed.
"""
import os
import re
import signal
import socket
import subprocess
import sys
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from deploy_common import Harness, free_port  # noqa: E402

PHYSD, PHYSCTL, WORK = sys.argv[1], sys.argv[2], sys.argv[3]
os.makedirs(WORK, exist_ok=True)
DATA = os.path.join(WORK, "data")
LOG = os.path.join(WORK, "physd.log")


H = Harness("notify_test", PHYSCTL, LOG)
fail, physctl = H.fail, H.physctl


def wait_port(logpath, proc, what="listening on", timeout=30):
    pat = re.compile(r"listening on [0-9.]+:(\d+)")
    t0 = time.time()
    while time.time() - t0 < timeout:
        if proc.poll() is not None:
            fail("physd exited early with %s" % proc.returncode)
        with open(logpath) as f:
            m = pat.search(f.read())
        if m:
            return int(m.group(1))
        time.sleep(0.05)
    fail("physd did not report its port")


BASE = ["--no-demo", "--port", "0", "--http", "off", "--data-dir", DATA]

# ------------------------------------------------------------ 1. a journal
if os.path.exists(DATA):
    subprocess.run(["rm", "-rf", DATA], check=True)
env = dict(os.environ)
for k in ("NOTIFY_SOCKET", "WATCHDOG_USEC", "WATCHDOG_PID"):
    env.pop(k, None)
with open(LOG, "w") as logf:
    p = subprocess.Popen([PHYSD] + BASE, stdout=logf, stderr=subprocess.STDOUT, env=env)
H.procs.append(p)
port = wait_port(LOG, p)
wid = physctl(port, "create", "--scene", "stack20", "--name", "journaled")
if wid != "1":
    fail("the first world is %r, not 1" % wid)
p.send_signal(signal.SIGTERM)
if p.wait(timeout=30) != 0:
    fail("the first physd exited %s" % p.returncode)

# ------------------------------------------------- the notification socket
sock_path = os.path.join(WORK, "notify.sock")
if os.path.exists(sock_path):
    os.unlink(sock_path)
ns = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
ns.bind(sock_path)
msgs = []  # (monotonic time, text)
lock = threading.Lock()
ready_evt = threading.Event()
ready_check = {}


def reader():
    while True:
        try:
            data = ns.recv(65536)
        except OSError:
            return
        t = time.monotonic()
        text = data.decode("utf-8", "replace")
        if "READY=1" in text and not ready_evt.is_set():
            # Right now, before anything else: is the port open?
            try:
                c = socket.create_connection(("127.0.0.1", ready_check["port"]), timeout=2)
                c.close()
                ready_check["connect"] = True
            except (OSError, KeyError) as e:
                ready_check["connect"] = repr(e)
            ready_evt.set()
        with lock:
            msgs.append((t, text))


env = dict(os.environ)
env["NOTIFY_SOCKET"] = sock_path
env["WATCHDOG_USEC"] = "1000000"
env.pop("WATCHDOG_PID", None)
# A fixed free port, so the reader can connect the instant READY=1 arrives.
fixed_port = free_port()
ready_check["port"] = fixed_port
args = [PHYSD, "--no-demo", "--port", str(fixed_port), "--http", "off", "--data-dir", DATA,
        "--test-stall-signal", "3", "--step-stall-timeout", "1.5", "--max-step-work", "1e15"]
threading.Thread(target=reader, daemon=True).start()
with open(LOG, "w") as logf:
    p = subprocess.Popen(args, stdout=logf, stderr=subprocess.STDOUT, env=env)
H.procs.append(p)
if not ready_evt.wait(30):
    p.kill()
    fail("no READY=1 within 30 s")
if ready_check.get("connect") is not True:
    p.kill()
    fail("READY=1 arrived before the port accepted connections: %s" % ready_check.get("connect"))
port = fixed_port
worlds = physctl(port, "worlds")
if not re.search(r"^\s*1\s", worlds, re.M) or "journaled" not in worlds:
    p.kill()
    fail("READY=1 arrived but world 1 is not recovered: %r" % worlds)
with lock:
    first = msgs[0][1]
if not first.startswith("READY=1") or "STATUS=worlds 1, connections 0; healthy" not in first:
    p.kill()
    fail("the first message is %r" % first)
print("1. READY=1 after listening and recovery: %r; world 1 listed" % first.replace("\n", " | "))


def pings(t0, t1):
    with lock:
        return [t for (t, m) in msgs if "WATCHDOG=1" in m and t0 <= t <= t1]


def statuses(t0):
    with lock:
        return [m for (t, m) in msgs if "STATUS=" in m and t >= t0]


def wait_status(pattern, t0, timeout=10):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        for m in statuses(t0):
            if re.search(pattern, m):
                return m
        time.sleep(0.05)
    fail("no STATUS matching %r; got %r" % (pattern, statuses(t0)))


# ------------------------------------------------------- 2. regular pings
time.sleep(3.0)
now = time.monotonic()
ps_ = pings(now - 2.6, now)
gaps = [b - a for a, b in zip(ps_, ps_[1:])]
if len(ps_) < 4 or max(gaps) > 0.8 or min(gaps) < 0.3:
    p.kill()
    fail("pings in 2.6 s: %d, gaps %s (expected every 0.5 s)" % (len(ps_), ["%.3f" % g for g in gaps]))
print("2. %d pings in 2.6 s, gaps %.3f..%.3f s (WATCHDOG_USEC 1 s)" % (len(ps_), min(gaps), max(gaps)))
t_create = time.monotonic()
physctl(port, "create", "--scene", "stack20", "--name", "second")
m = wait_status(r"STATUS=worlds 2, connections 0; healthy", t_create)
held = socket.create_connection(("127.0.0.1", port))
t_conn = time.monotonic()
m2 = wait_status(r"STATUS=worlds 2, connections 1; healthy", t_conn)
held.close()
print("   STATUS follows: %r then %r" % (m.strip(), m2.strip()))

# ------------------------------------------------------- 3. a blocked loop
time.sleep(1.0)
t_sig = time.monotonic()
p.send_signal(signal.SIGUSR2)
time.sleep(4.5)
during = pings(t_sig + 0.1, t_sig + 2.8)
after = pings(t_sig + 3.0, t_sig + 4.5)
with lock:
    before = [t for (t, mm) in msgs if "WATCHDOG=1" in mm and t < t_sig + 0.1]
gap = (after[0] if after else float("inf")) - (before[-1] if before else t_sig)
if during or len(after) < 2 or gap < 2.8:
    p.kill()
    fail("blocked loop: %d pings while blocked, %d after, gap %.3f s" % (len(during), len(after), gap))
print("3. loop blocked 3 s: no ping for %.3f s (watchdog 1 s), %d pings in the 1.5 s after" % (gap, len(after)))

# ------------------------------------------------------- 4. a stuck worker
t_heavy = time.monotonic()
heavy = physctl(port, "create", "--scene", "pyramid20", "--name", "stuck", "--paused",
                "iterations=10000", "substeps=64")
physctl(port, "resume", heavy)
t_resume = time.monotonic()
m = wait_status(r"STATUS=worlds 3, connections \d+; unhealthy: world %s's step has been in flight" % heavy,
                t_resume, timeout=15)
t_unhealthy = time.monotonic()
time.sleep(2.0)
ps_heavy = pings(t_resume, time.monotonic())
last_ping = ps_heavy[-1] if ps_heavy else t_resume
stalled_for = time.monotonic() - last_ping
if stalled_for < 1.9 or last_ping > t_resume + 1.5 + 0.6 + 0.3:
    p.kill()
    fail("stuck worker: last ping %.3f s after resume, none for %.3f s" % (last_ping - t_resume, stalled_for))
print("4. stuck step: STATUS %r; last ping %.3f s after the step began, none for the %.3f s since" %
      (m.strip(), last_ping - t_resume, stalled_for))
t_destroy = time.monotonic()
physctl(port, "destroy", heavy)
wait_status(r"STATUS=worlds 2, connections \d+; healthy", t_destroy, timeout=20)
time.sleep(1.5)
back = pings(t_destroy, time.monotonic())
if len(back) < 2:
    p.kill()
    fail("pings did not come back after the stuck world was destroyed (%d)" % len(back))
print("   world %s destroyed: healthy again, %d pings since" % (heavy, len(back)))

# ------------------------------------------------------------- 5. SIGTERM
t_term = time.monotonic()
p.send_signal(signal.SIGTERM)
rc = p.wait(timeout=30)
time.sleep(0.2)
with lock:
    stopping = [mm for (t, mm) in msgs if t >= t_term and "STOPPING=1" in mm]
if rc != 0 or not stopping:
    fail("SIGTERM: exit %s, STOPPING=1 messages %r" % (rc, stopping))
print("5. SIGTERM: %r, exit 0" % stopping[0].replace("\n", " | "))
ns.close()
print("notify_test: all checks passed")
