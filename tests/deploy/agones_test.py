#!/usr/bin/python3
"""agones_test.py — physd's Agones SDK client (server/agones.c) against a
stand-in of the SDK server's REST API (agones_standin.py: NOT the real SDK
server; the documented paths only, with the checks the real one makes).

Usage: agones_test.py PHYSD PHYSCTL FLEET_YAML WORKDIR

Checks, over three physd lives:
  A. A sidecar that starts 2 s after physd: POST /ready is retried and
     arrives once the stand-in listens; at that moment physd's protocol
     port accepts and its /readyz answers 200 ("ready after listening").
     Exactly one /ready is sent.
  B. POST /health every agones_health_period (0.5 s here; the gaps are
     measured); labels agones.dev/sdk-physd-version = physd's version and
     -physd-protocol = 1; the counter "worlds" of the Fleet manifest gets
     capacity = max_worlds (the manifest's 256) and count 0, then 1 and 2 as
     worlds are created and 1 when one is destroyed; the GameServer watch:
     an address and port appear -> label physd-address = host_port and
     annotation physd-address = host:port; state Allocated is logged.
  C. A world whose step hangs (past step_stall_timeout 1.5 s): health pings
     stop, and resume once the world is destroyed.
  D. SIGTERM: physd drains (stops accepting: the port refuses), the
     counter goes to 0, POST /shutdown arrives after that, nothing after
     it, and physd exits 0.
  E. A second physd whose GameServer turns Shutdown (the watch): it drains
     by itself, POSTs /shutdown and exits 0.
  F. Shutdown after a drain that moves worlds: a source physd with
     drain_to (a name, as the manifests' Service is) and two worlds, a
     target physd under its own stand-in whose GameServer has an address.
     SIGTERM: both worlds move to the target (same ids, ticks and state
     hashes; the target's counter goes to 2), told to clients at the
     target's GameServer address; the source's counter goes 2, 1, 0, then
     POST /shutdown, nothing after it, exit 0.
"""
import json
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.request

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from agones_standin import StandIn  # noqa: E402
from deploy_common import Harness, free_port  # noqa: E402

PHYSD, PHYSCTL, FLEET, WORK = sys.argv[1:5]
os.makedirs(WORK, exist_ok=True)
LOG = os.path.join(WORK, "physd.log")
H = Harness("agones_test", PHYSCTL, LOG)
fail, physctl, procs = H.fail, H.physctl, H.procs


def start_physd(sdk_port, port, http_port, extra=(), log=LOG):
    env = dict(os.environ)
    env["AGONES_SDK_HTTP_PORT"] = str(sdk_port)
    args = [PHYSD, "--no-demo", "--port", str(port), "--http-port", str(http_port), "--agones-health-period", "0.5",
            "--step-stall-timeout", "1.5", "--max-step-work", "1e15"] + list(extra)
    logf = open(log, "w")
    p = subprocess.Popen(args, stdout=logf, stderr=subprocess.STDOUT, env=env)
    procs.append(p)
    return p


def port_open(port):
    try:
        socket.create_connection(("127.0.0.1", port), timeout=1).close()
        return True
    except OSError:
        return False


def readyz(http_port):
    try:
        with urllib.request.urlopen("http://127.0.0.1:%d/readyz" % http_port, timeout=2) as r:
            return r.status
    except Exception as e:  # noqa: BLE001
        return repr(e)


def calls(si, method=None, path=None, t0=0.0):
    return [c for c in si.snapshot() if c[0] >= t0 and (method is None or c[1] == method) and
            (path is None or (c[2] == path if not path.endswith("*") else c[2].startswith(path[:-1])))]


def wait(pred, timeout, what):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        v = pred()
        if v:
            return v
        time.sleep(0.05)
    fail("no %s within %.1f s" % (what, timeout))


def counter_values(si, t0=0.0):
    return [(c[3].get("count"), c[3].get("capacity")) for c in calls(si, "PATCH", "/v1beta1/counters/*", t0)
            if c[4] == 200]


# ------------------------------------------------------------- A. late sidecar
sdk_port, port, http_port = free_port(), free_port(), free_port()
p = start_physd(sdk_port, port, http_port)
time.sleep(2.0)
if p.poll() is not None:
    fail("physd exited without a sidecar: %s" % p.returncode)
at_ready = {}
si = StandIn(FLEET, sdk_port)


def on_call(method, path, body):
    if path == "/ready" and not at_ready:
        at_ready["port"] = port_open(port)
        at_ready["readyz"] = readyz(http_port)


si.on_call = on_call
si.wait_for(lambda c: c[2] == "/ready" and c[4] == 200, 10, "POST /ready")
if at_ready.get("port") is not True or at_ready.get("readyz") != 200:
    fail("POST /ready arrived before physd was ready: port open %s, /readyz %s" % (at_ready.get("port"),
                                                                                 at_ready.get("readyz")))
print("A. sidecar up 2 s late: POST /ready arrived with the protocol port open and /readyz 200")

# -------------------------------------------------------- B. the steady state
t_b = time.monotonic()
time.sleep(3.0)
h = [c[0] for c in calls(si, "POST", "/health", t_b)]
gaps = [b - a for a, b in zip(h, h[1:])]
if len(h) < 5 or max(gaps) > 0.75 or min(gaps) < 0.3:
    fail("health in 3 s: %d calls, gaps %s (expected every 0.5 s)" % (len(h), ["%.3f" % g for g in gaps]))
print("B. POST /health: %d in 3 s, gaps %.3f..%.3f s (period 0.5 s)" % (len(h), min(gaps), max(gaps)))
nready = len(calls(si, "POST", "/ready"))
if nready != 1:
    fail("POST /ready sent %d times" % nready)
version = subprocess.run([PHYSD, "--version"], capture_output=True, text=True).stdout.split()[1]
wait(lambda: si.labels.get("agones.dev/sdk-physd-version") == version and
     si.labels.get("agones.dev/sdk-physd-protocol") == "1", 5, "version labels")
print("   labels: %s" % {k: v for k, v in si.labels.items()})
manifest_cap = si.counters["worlds"]["capacity"]
wait(lambda: ("0", str(manifest_cap)) in counter_values(si), 5, "counter worlds = 0 of %d" % manifest_cap)
t_c = time.monotonic()
w1 = physctl(port, "create", "--scene", "stack20", "--name", "one")
wait(lambda: si.counters["worlds"]["count"] == 1, 5, "counter 1 after a create")
w2 = physctl(port, "create", "--scene", "stack20", "--name", "two")
wait(lambda: si.counters["worlds"]["count"] == 2, 5, "counter 2 after a second create")
physctl(port, "destroy", w1)
wait(lambda: si.counters["worlds"]["count"] == 1, 5, "counter 1 after a destroy")
seq = [v[0] for v in counter_values(si, t_c)]
if seq != ["1", "2", "1"] or si.counters["worlds"]["capacity"] != 256:
    fail("counter updates %s, capacity %s" % (seq, si.counters["worlds"]["capacity"]))
print("   counter worlds: capacity %d (max_worlds, as the Fleet manifest); counts %s on create, create, destroy" %
      (si.counters["worlds"]["capacity"], seq))
si.set_address("127.0.0.2", 7654)
si.set_state("Allocated")
wait(lambda: si.labels.get("agones.dev/sdk-physd-address") == "127.0.0.2_7654" and
     si.annotations.get("agones.dev/sdk-physd-address") == "127.0.0.2:7654", 5, "the address label")
wait(lambda: "the GameServer is Allocated" in open(LOG).read(), 5, "the Allocated state in the log")
print("   watch: address label 127.0.0.2_7654, annotation 127.0.0.2:7654; state Allocated logged")

# ------------------------------------------------------- C. a hanging step
stuck = physctl(port, "create", "--scene", "pyramid20", "--name", "stuck", "--paused", "iterations=10000",
                "substeps=64")
physctl(port, "resume", stuck)
t_resume = time.monotonic()
time.sleep(4.0)
hs = [c[0] for c in calls(si, "POST", "/health", t_resume)]
last = hs[-1] if hs else t_resume
if last > t_resume + 1.5 + 0.5 + 0.4 or time.monotonic() - last < 1.5:
    fail("stuck step: health calls at %s after the step began" % ["%.2f" % (t - t_resume) for t in hs])
print("C. a step stuck past step_stall_timeout 1.5 s: last health %.2f s after it began, none for %.2f s" %
      (last - t_resume, time.monotonic() - last))
t_d = time.monotonic()
physctl(port, "destroy", stuck)
wait(lambda: len(calls(si, "POST", "/health", t_d)) >= 2, 5, "health after the stuck world is destroyed")
print("   destroyed: health pings resume")

# ---------------------------------------------------------------- D. SIGTERM
t_term = time.monotonic()
si.on_call = None
at_shutdown = {}


def on_call2(method, path, body):
    if path == "/shutdown" and not at_shutdown:
        at_shutdown["port"] = port_open(port)


si.on_call = on_call2
p.send_signal(signal.SIGTERM)
try:
    rc = p.wait(timeout=30)
except subprocess.TimeoutExpired:
    fail("physd did not exit after SIGTERM")
sd = calls(si, "POST", "/shutdown", t_term)
if rc != 0 or len(sd) != 1:
    fail("SIGTERM: exit %s, %d POST /shutdown" % (rc, len(sd)))
if at_shutdown.get("port") is not False:
    fail("POST /shutdown arrived while the protocol port still accepted")
after = [c for c in si.snapshot() if c[0] > sd[0][0] and c[2] != "/watch/gameserver"]
zero = [c for c in calls(si, "PATCH", "/v1beta1/counters/*", t_term) if c[3].get("count") == "0"]
if after or not zero or zero[-1][0] > sd[0][0]:
    fail("after /shutdown: %s; counter 0 before it: %s" % ([c[1:3] for c in after], bool(zero)))
print("D. SIGTERM: listener closed, counter 0, then POST /shutdown (%.2f s after the signal), exit 0" %
      (sd[0][0] - t_term))
si.close()

# -------------------------------------------------- E. GameServer Shutdown
sdk_port = free_port()
si = StandIn(FLEET, sdk_port)
port, http_port = free_port(), free_port()
p = start_physd(sdk_port, port, http_port)
si.wait_for(lambda c: c[2] == "/ready" and c[4] == 200, 15, "POST /ready (E)")
si.wait_for(lambda c: c[2] == "/watch/gameserver", 5, "the watch (E)")
time.sleep(0.5)
t_sd = time.monotonic()
si.set_state("Shutdown")
try:
    rc = p.wait(timeout=30)
except subprocess.TimeoutExpired:
    fail("physd did not exit after its GameServer turned Shutdown")
sd = calls(si, "POST", "/shutdown", t_sd)
if rc != 0 or len(sd) != 1 or "the GameServer is Shutdown" not in open(LOG).read():
    fail("GameServer Shutdown: exit %s, %d POST /shutdown" % (rc, len(sd)))
print("E. GameServer Shutdown seen on the watch: drained, POST /shutdown %.2f s later, exit 0" % (sd[0][0] - t_sd))
si.close()

# ------------------------------------ F. SIGTERM with drain_to: worlds move first
T_LOG = os.path.join(WORK, "physd-target.log")
t_sdk, t_port, t_http = free_port(), free_port(), free_port()
si_t = StandIn(FLEET, t_sdk)
pt = start_physd(t_sdk, t_port, t_http, ["--world-id-base", "1000"], log=T_LOG)
si_t.wait_for(lambda c: c[2] == "/ready" and c[4] == 200, 15, "POST /ready (F, the target)")
si_t.wait_for(lambda c: c[2] == "/watch/gameserver", 5, "the watch (F, the target)")
si_t.set_address("127.0.0.1", t_port)  # the target's GameServer address: what clients must be told
wait(lambda: si_t.annotations.get("agones.dev/sdk-physd-address") == "127.0.0.1:%d" % t_port, 5,
     "the target's address annotation")
sdk_port, port, http_port = free_port(), free_port(), free_port()
si = StandIn(FLEET, sdk_port)
p = start_physd(sdk_port, port, http_port, ["--drain-to", "localhost:%d" % t_port])
si.wait_for(lambda c: c[2] == "/ready" and c[4] == 200, 15, "POST /ready (F, the source)")
worlds = {}
for name in ("f1", "f2"):
    w = physctl(port, "create", "--scene", "stack20", "--name", name, "--paused")
    physctl(port, "step", w, "17")
    k = json.loads(physctl(port, "--json", "counters", w))
    worlds[w] = (int(k["tick"]), str(k["state_hash"]))
wait(lambda: si.counters["worlds"]["count"] == 2, 5, "the source's counter at 2")
t_term = time.monotonic()
p.send_signal(signal.SIGTERM)
try:
    rc = p.wait(timeout=30)
except subprocess.TimeoutExpired:
    fail("the source did not exit after SIGTERM with drain_to")
sd = calls(si, "POST", "/shutdown", t_term)
counts = [v[0] for v in counter_values(si, t_term)]
after = [c for c in si.snapshot() if sd and c[0] > sd[0][0] and c[2] != "/watch/gameserver"]
log = open(LOG).read()
falling = counts and counts[-1] == "0" and all(int(a) > int(b) for a, b in zip(counts, counts[1:]))
zero = [c for c in calls(si, "PATCH", "/v1beta1/counters/*", t_term) if c[3].get("count") == "0"]
if rc != 0 or len(sd) != 1 or after or not falling or zero[-1][0] > sd[0][0]:
    fail("SIGTERM with drain_to: exit %s, %d POST /shutdown, counts %s, calls after it %s" %
         (rc, len(sd), counts, [c[1:3] for c in after]))
if "drain to localhost:%d: 2 worlds moved, 0 could not be" % t_port not in log:
    fail("the source's log does not say both worlds moved")
for w in worlds:
    if "world %s moved to 127.0.0.1:%d" % (w, t_port) not in log:
        fail("world %s was not told to clients at the target's GameServer address 127.0.0.1:%d" % (w, t_port))
    k = json.loads(physctl(t_port, "--json", "counters", w))
    if (int(k["tick"]), str(k["state_hash"])) != worlds[w]:
        fail("world %s at the target: tick %s hash %s, left at %s" % (w, k["tick"], k["state_hash"], worlds[w]))
wait(lambda: si_t.counters["worlds"]["count"] == 2, 5, "the target's counter at 2")
print("F. SIGTERM with drain_to localhost:%d: worlds %s moved (same ticks and state hashes there), told at the "
      "target's GameServer address 127.0.0.1:%d; the source's counter %s, then POST /shutdown %.2f s after the "
      "signal, exit 0; the target's counter 2" %
      (t_port, ", ".join(sorted(worlds)), t_port, " -> ".join(counts), sd[0][0] - t_term))
pt.send_signal(signal.SIGTERM)  # (the target has no drain_to: it stops, journals nothing here)
if pt.wait(timeout=30) != 0:
    fail("the target did not stop cleanly")
si.close()
si_t.close()
print("agones_test: all checks passed (against the stand-in, not the real Agones SDK server)")
