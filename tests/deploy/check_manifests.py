#!/usr/bin/python3
"""check_manifests.py — the Kubernetes manifests of deploy/k8s/, checked
without a cluster: YAML syntax (python3-yaml), the fields Agones' CRDs
require (a hand-written subset of install/helm/agones/templates/crds/ in the
Agones repository: Fleet, FleetAutoscaler with the Counter policy; the full
schemas are checked by agones_crds.py when an Agones source tree is given),
and the manifests against physd itself.

Usage: check_manifests.py PHYSD K8S_DIR CONTAINER_CONF

physd-side checks: the Fleet's counter and port names are physd's defaults
of agones_counter and agones_port_name (`physd --help`), the counter's
capacity is max_worlds of the image's config, the GameServer's
containerPort is its port, the probes call /healthz and /readyz on its
http_port, the data volume is mounted at the --data-dir of the container's
arguments, the FleetAutoscaler's buffer is consistent (Agones: bufferSize >
0, minCapacity >= bufferSize, maxCapacity >= minCapacity) and names the
Fleet and its counter, the metrics Service selects the Pods and their HTTP
port, the drain Service selects the Pods and their protocol port and is
the container's --drain-to (NAME:PORT), and physd accepts the container's
arguments with the image's config.
"""
import os
import re
import subprocess
import sys

import yaml

PHYSD, K8S, CONF = sys.argv[1:4]
errors = []


def check(cond, msg):
    if not cond:
        errors.append(msg)
    return cond


def get(d, path, default=None):
    for p in path.split("."):
        if not isinstance(d, dict) or p not in d:
            return default
        d = d[p]
    return d


docs = {}
services = {}  # by name: the metrics Service and the drain Service
for name in sorted(os.listdir(K8S)):
    if not name.endswith(".yaml"):
        continue
    with open(os.path.join(K8S, name)) as f:
        try:
            loaded = [d for d in yaml.safe_load_all(f) if d]
        except yaml.YAMLError as e:
            errors.append("%s: not YAML: %s" % (name, e))
            continue
    for d in loaded:
        for k in ("apiVersion", "kind"):
            check(isinstance(d.get(k), str), "%s: no %s" % (name, k))
        check(isinstance(get(d, "metadata.name"), str), "%s: no metadata.name" % name)
        docs[d.get("kind")] = d
        if d.get("kind") == "Service":
            services[get(d, "metadata.name")] = d

# physd's defaults and the image's config.
helptext = subprocess.run([PHYSD, "--help"], capture_output=True, text=True).stdout
defaults = dict(re.findall(r"^\s+--([a-z0-9-]+)\s.*\(default ([^)]*)\)\s*$", helptext, re.M))
conf = dict(defaults)
for line in open(CONF):
    line = line.split("#")[0].strip()
    if "=" in line:
        k, v = (x.strip() for x in line.split("=", 1))
        conf[k.replace("_", "-")] = v

fleet, fas, svc = docs.get("Fleet"), docs.get("FleetAutoscaler"), services.get("physd-metrics")
check(fleet and get(fleet, "apiVersion") == "agones.dev/v1", "no Fleet of agones.dev/v1")
check(fas and get(fas, "apiVersion") == "autoscaling.agones.dev/v1", "no FleetAutoscaler of autoscaling.agones.dev/v1")
check(svc and get(svc, "apiVersion") == "v1", "no Service physd-metrics of v1")
if errors:
    print("\n".join("check_manifests: " + e for e in errors), file=sys.stderr)
    sys.exit(1)

# ------------------------------------------------------------------ Fleet
gs = get(fleet, "spec.template.spec")
check(isinstance(gs, dict) and isinstance(get(gs, "template.spec.containers"), list),
      "Fleet: spec.template.spec.template (a PodTemplateSpec with containers) is required")
check(get(fleet, "spec.scheduling", "Packed") in ("Packed", "Distributed"), "Fleet: scheduling")
ports = gs.get("ports", [])
game = [p for p in ports if p.get("name") == defaults["agones-port-name"]]
if check(len(game) == 1, "Fleet: no GameServer port named %s (agones_port_name)" % defaults["agones-port-name"]):
    p = game[0]
    check(p.get("portPolicy") in ("Dynamic", "Static", "Passthrough", "None"), "Fleet: portPolicy")
    check(p.get("protocol", "UDP") in ("TCP", "TCPUDP"), "Fleet: the physd port must be TCP")
    check(str(p.get("containerPort")) == conf["port"], "Fleet: containerPort %s != port %s of %s" %
          (p.get("containerPort"), conf["port"], CONF))
counters = gs.get("counters") or {}
ctr = counters.get(defaults["agones-counter"])
if check(isinstance(ctr, dict), "Fleet: no counter %s (agones_counter)" % defaults["agones-counter"]):
    check(str(ctr.get("capacity")) == conf["max-worlds"], "Fleet: counter capacity %s != max_worlds %s" %
          (ctr.get("capacity"), conf["max-worlds"]))
    check(int(ctr.get("count", 0)) == 0, "Fleet: the counter starts at 0")
for pr in get(fleet, "spec.priorities", []):
    check(pr.get("type") in ("Counter", "List") and pr.get("order", "Ascending") in ("Ascending", "Descending"),
          "Fleet: priorities")
    check(pr.get("key") in counters, "Fleet: priority key %s is not a counter" % pr.get("key"))
health = gs.get("health", {})
check(not health.get("disabled", False), "Fleet: health checking must be on (physd pings)")
period = int(health.get("periodSeconds", 5)) * int(health.get("failureThreshold", 3))
check(period > float(conf["agones-health-period"]) * 2,
      "Fleet: health period x threshold %d s is not well above agones_health_period" % period)
pod = get(gs, "template.spec")
cont = [c for c in pod.get("containers", []) if c.get("name") == game[0].get("container", "")] if game else []
if check(len(cont) == 1, "Fleet: the port's container is not in the Pod"):
    c = cont[0]
    http = [p for p in c.get("ports", []) if p.get("name") == "http"]
    check(len(http) == 1 and str(http[0].get("containerPort")) == conf["http-port"],
          "Fleet: container port http is not http_port %s" % conf["http-port"])
    for probe, path in (("livenessProbe", "/healthz"), ("readinessProbe", "/readyz")):
        check(get(c, probe + ".httpGet.path") == path and get(c, probe + ".httpGet.port") in ("http",
                                                                                           int(conf["http-port"])),
              "Fleet: %s must call %s on the HTTP port" % (probe, path))
    check(get(c, "resources.requests.cpu") and get(c, "resources.limits.memory"), "Fleet: resources")
    args = c.get("args", [])
    data_dir = args[args.index("--data-dir") + 1] if "--data-dir" in args else None
    mounts = {m["name"]: m["mountPath"] for m in c.get("volumeMounts", [])}
    vols = {v["name"]: v for v in pod.get("volumes", [])}
    dv = [n for n, m in mounts.items() if m == data_dir]
    check(data_dir and len(dv) == 1 and dv[0] in vols, "Fleet: --data-dir %s is not a mounted volume" % data_dir)
    check(get(c, "securityContext.readOnlyRootFilesystem") is True, "Fleet: a read-only root filesystem")
    check(get(pod, "securityContext.runAsNonRoot") is True, "Fleet: runAsNonRoot")
    # physd accepts these arguments with the image's config (the path in the
    # image is replaced by the repository's file).
    a = list(args)
    if "--config" in a:
        a[a.index("--config") + 1] = CONF
    r = subprocess.run([PHYSD] + a + ["--version"], capture_output=True, text=True)
    check(r.returncode == 0, "Fleet: physd refuses the container's arguments %s: %s" % (args, r.stderr.strip()))
    # The drain target: a Service of these manifests over the protocol port.
    drain_to = args[args.index("--drain-to") + 1] if "--drain-to" in args else ""
    dname, _, dport = drain_to.rpartition(":")
    dsvc = services.get(dname)
    if check(dsvc is not None, "Fleet: --drain-to %r is not NAME:PORT of a Service here" % drain_to):
        dsel = get(dsvc, "spec.selector", {})
        check(dsel and all(get(gs, "template.metadata.labels", {}).get(k) == v for k, v in dsel.items()),
              "drain Service %s: its selector does not match the Pods" % dname)
        check(get(dsvc, "spec.clusterIP") != "None", "drain Service %s: headless (a name per Pod, not one)" % dname)
        dp = [x for x in get(dsvc, "spec.ports", []) if str(x.get("port")) == dport]
        check(len(dp) == 1 and str(dp[0].get("targetPort")) in (conf["port"], defaults["agones-port-name"]) and
              dp[0].get("protocol", "TCP") == "TCP",
              "drain Service %s: port %s must lead to the protocol port %s" % (dname, dport, conf["port"]))

# -------------------------------------------------------- FleetAutoscaler
check(get(fas, "spec.fleetName") == get(fleet, "metadata.name"), "FleetAutoscaler: fleetName is not the Fleet")
check(get(fas, "spec.policy.type") == "Counter", "FleetAutoscaler: a Counter policy")
pc = get(fas, "spec.policy.counter", {})
for k in ("key", "bufferSize", "maxCapacity"):
    check(k in pc, "FleetAutoscaler: policy.counter.%s is required" % k)
check(pc.get("key") == defaults["agones-counter"], "FleetAutoscaler: counter key")
buf, mn, mx = pc.get("bufferSize"), int(pc.get("minCapacity", 0)), int(pc.get("maxCapacity", 0))
if isinstance(buf, int):
    check(buf > 0 and (mn == 0 or mn >= buf) and mx >= max(mn, buf), "FleetAutoscaler: buffer %s, min %d, max %d" %
          (buf, mn, mx))
cap = int(ctr.get("capacity", 0)) if ctr else 0
check(cap and mn % cap == 0 and mx % cap == 0, "FleetAutoscaler: min/max capacity are not whole GameServers")
check(get(fas, "spec.sync.type", "FixedInterval") == "FixedInterval", "FleetAutoscaler: sync type")

# ---------------------------------------------------------------- Service
sel = get(svc, "spec.selector", {})
labels = get(gs, "template.metadata.labels", {})
check(sel and all(labels.get(k) == v for k, v in sel.items()), "Service: its selector does not match the Pods")
sp = get(svc, "spec.ports", [])
check(len(sp) == 1 and str(sp[0].get("port")) == conf["http-port"] and sp[0].get("targetPort") in
      ("http", int(conf["http-port"])), "Service: port %s to the Pods' http port" % conf["http-port"])

if errors:
    print("\n".join("check_manifests: " + e for e in errors), file=sys.stderr)
    sys.exit(1)
print("check_manifests: %s parse; Fleet (port %s -> %s, counter %s of %s, probes /healthz /readyz on %s), "
      "FleetAutoscaler (buffer %s of %s..%s), Services %s (drain_to %s): consistent with physd" %
      (", ".join(sorted(k for k in docs)), defaults["agones-port-name"], conf["port"], defaults["agones-counter"],
       conf["max-worlds"], conf["http-port"], buf, mn, mx, ", ".join(sorted(services)), drain_to))
