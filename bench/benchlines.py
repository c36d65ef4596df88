"""benchlines.py: the one reader of physd-bench's JSON lines for the
scripts of bench/ (table.py, rounds_ratio.py, ab_ratio.py,
threads_ratio.py). read(stream, who) returns the lines that are JSON
objects with an engine and a scene, in order; empty lines are skipped, and
any other line (a progress message, a truncated write) is left out with a
warning on stderr naming the script and the line number, so one bad line
does not lose a run of rounds. Python 3 standard library only."""
import json
import sys


def read(stream, who):
    runs = []
    for n, line in enumerate(stream, 1):
        line = line.strip()
        if not line:
            continue
        try:
            obj = json.loads(line)
        except json.JSONDecodeError as e:
            print(f"{who}: line {n}: not JSON ({e})", file=sys.stderr)
            continue
        if not isinstance(obj, dict) or "engine" not in obj or "scene" not in obj:
            print(f"{who}: line {n}: not a physd-bench line", file=sys.stderr)
            continue
        runs.append(obj)
    return runs
