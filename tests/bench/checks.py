"""checks.py: the one check() of the bench tests (test_bench_scripts.py,
test_interleave.py): prints ok or FAIL for a figure against its expected
value and counts the failures (checks.failures; exit with it at the end)."""
failures = 0


def check(what, got, want):
    global failures
    if got != want:
        print(f"FAIL {what}: {got!r}, expected {want!r}")
        failures += 1
    else:
        print(f"ok {what}: {got}")
