#!/usr/bin/python3
"""agones_crds.py — validates deploy/k8s/ against Agones' own CRD schemas.

Usage: agones_crds.py AGONES_SOURCE_DIR K8S_DIR

Agones publishes its CRDs as Helm templates (install/helm/agones/templates/
crds/*.yaml in the Agones repository, with named schema blocks in _*.yaml
files). No Helm runs here, so this renders the small subset of the template
language those files use — define/include with indent, if/end on the values
given, dict literals — with the chart's defaults for the few values they read
(every feature gate on, gameservers.lists.maxItems 1000, no unknown pod
fields), then validates every Fleet and FleetAutoscaler document of K8S_DIR
against the CRD's openAPIV3Schema with python3-jsonschema (OpenAPI's
`nullable` and the `x-kubernetes-*` keywords mapped to their JSON-schema
meaning). Exit 0 when every document is valid, 1 with the errors, 77 when
AGONES_SOURCE_DIR has no CRD templates.
"""
import glob
import os
import re
import sys

import jsonschema
import yaml

SRC, K8S = sys.argv[1], sys.argv[2]
CRD_DIR = os.path.join(SRC, "install/helm/agones/templates/crds")
if not os.path.isdir(CRD_DIR):
    print("agones_crds: no %s: skipped" % CRD_DIR)
    sys.exit(77)

VALUES = {"Values": {"agones": {"crds": {"install": True}},
                     "gameservers": {"podPreserveUnknownFields": False, "lists": {"maxItems": 1000}}},
          "Release": {"Name": "agones", "Service": "Helm"}}

defines = {}
for path in glob.glob(os.path.join(CRD_DIR, "**/_*.yaml"), recursive=True):
    text = open(path).read()
    for m in re.finditer(r'\{\{-?\s*define\s+"([^"]+)"\s*-?\}\}(.*?)\{\{-?\s*end\s*-?\}\}\s*(?=\{\{-?\s*(?:/\*|define)|\Z)',
                         text, re.S):
        defines[m.group(1)] = m.group(2)


def lookup(ctx, expr):
    expr = expr.strip()
    if expr in ("true", "false"):
        return expr == "true"
    m = re.match(r"^(\S+)\s*\|\s*default\s+(\S+)$", expr)
    if m:
        v = lookup(ctx, m.group(1))
        return v if v not in (None, False) else lookup(ctx, m.group(2))
    if expr.startswith("$featureGates."):
        return True
    if expr.startswith("."):
        v = ctx
        for part in expr[1:].split("."):
            if not part:
                continue
            v = v.get(part) if isinstance(v, dict) else None
        return v
    return None


def parse_dict(ctx, s):
    toks = re.findall(r'"[^"]*"|\S+', s)
    out = {}
    for k, v in zip(toks[0::2], toks[1::2]):
        out[k.strip('"')] = lookup(ctx, v)
    return out


def render(text, ctx):
    """Renders text: if/end blocks, includes with indent, value substitutions."""
    out, stack = [], [True]
    i = 0
    pat = re.compile(r"\{\{(-?)\s*(.*?)\s*(-?)\}\}", re.S)
    while True:
        m = pat.search(text, i)
        if not m:
            if all(stack):
                out.append(text[i:])
            break
        pre = text[i:m.start()]
        if m.group(1) == "-":
            pre = pre.rstrip(" \t\n")
        if all(stack):
            out.append(pre)
        body = m.group(2)
        i = m.end()
        if m.group(3) == "-":
            while i < len(text) and text[i] in " \t\n":
                i += 1
        if body.startswith("/*"):
            continue
        if body.startswith("if "):
            stack.append(bool(lookup(ctx, body[3:])))
        elif body == "end":
            stack.pop()
        elif not all(stack):
            continue
        elif body.startswith("$data := dict"):
            ctx = dict(ctx, data=parse_dict(ctx, body[len("$data := dict"):]))
        elif body.startswith("$featureGates"):
            pass
        elif body.startswith("include") or body.startswith("template"):
            m2 = re.match(r'(?:include|template)\s+"([^"]+)"\s*([^|]*?)\s*(?:\|\s*indent\s+(\d+))?\s*(?:\|.*)?$', body, re.S)
            name, arg, ind = m2.group(1), m2.group(2).strip(), int(m2.group(3) or 0)
            if name not in defines:
                out.append("agones")  # agones.name, agones.chart: labels only
                continue
            if arg.startswith("(dict"):
                sub = parse_dict(ctx, arg[5:].rstrip(")"))
            elif arg == "$data":
                sub = ctx.get("data", {})
            else:
                sub = ctx
            r = render(defines[name], sub)
            out.append("\n".join((" " * ind + ln) if ln.strip() else ln for ln in r.split("\n")))
        else:
            v = lookup(ctx, body)
            out.append(str(v) if v is not None else "x")
    return "".join(out)


def to_jsonschema(s):
    """OpenAPI v3 (as Kubernetes uses it) to JSON schema."""
    if isinstance(s, list):
        return [to_jsonschema(x) for x in s]
    if not isinstance(s, dict):
        return s
    out = {}
    for k, v in s.items():
        if k in ("x-kubernetes-preserve-unknown-fields", "x-kubernetes-list-type", "x-kubernetes-list-map-keys",
                 "x-kubernetes-map-type", "x-kubernetes-embedded-resource", "nullable", "default", "title",
                 "description", "format", "example"):
            continue
        if k == "x-kubernetes-int-or-string":
            out["anyOf"] = [{"type": "integer"}, {"type": "string"}]
            continue
        if k in ("properties", "patternProperties"):
            out[k] = {kk: to_jsonschema(vv) for kk, vv in v.items()}
        else:
            out[k] = to_jsonschema(v)
    if s.get("nullable") and "type" in out:
        out["type"] = [out["type"], "null"]
    if s.get("x-kubernetes-int-or-string"):
        out.pop("type", None)
    return out


schemas = {}
for path in glob.glob(os.path.join(CRD_DIR, "*.yaml")):
    if os.path.basename(path).startswith("_"):
        continue
    doc = yaml.safe_load(render(open(path).read(), VALUES))
    if not doc or doc.get("kind") != "CustomResourceDefinition":
        continue
    group, kind = doc["spec"]["group"], doc["spec"]["names"]["kind"]
    for v in doc["spec"]["versions"]:
        schemas[(group + "/" + v["name"], kind)] = to_jsonschema(v["schema"]["openAPIV3Schema"])

errors, checked = [], []
for path in sorted(glob.glob(os.path.join(K8S, "*.yaml"))):
    for doc in yaml.safe_load_all(open(path)):
        if not doc:
            continue
        key = (doc.get("apiVersion"), doc.get("kind"))
        if key not in schemas:
            continue
        v = jsonschema.Draft7Validator(schemas[key])
        errs = sorted(v.iter_errors(doc), key=lambda e: list(e.path))
        for e in errs:
            errors.append("%s %s: %s: %s" % (os.path.basename(path), key[1], "/".join(map(str, e.path)), e.message))
        checked.append("%s (%s %s)" % (os.path.basename(path), key[0], key[1]))
if not checked:
    print("agones_crds: no Agones document in %s" % K8S)
    sys.exit(1)
for e in errors:
    print("agones_crds: " + e, file=sys.stderr)
print("agones_crds: rendered %d CRD schemas; %s: %s" % (len(schemas), ", ".join(checked),
                                                      "valid" if not errors else "%d errors" % len(errors)))
sys.exit(1 if errors else 0)
