"""Run the suites that share nothing side by side: `make test`'s pytest step.

The fleet in a box (tests/e2e) spends most of its 13 minutes waiting (a token's shortest
lifetime is 10 minutes, machines boot, reboot), not computing; so do the controller's
hung-API-server test (5 minutes of a SIGSTOPped kube-apiserver) and the cluster tests (the API
server and agents). The host tests (unit, integration) are the other way round. Each suite
starts its own control plane on free ports and its machines under unique names, so running them
at once shares no state and takes about the longest of them.

The first suite streams to the terminal; the others go to build/test-<suite>.log, printed after
it. The last line counts every suite's tests from their JUnit reports, in the plain form CI
reads ("N passed, N failed"). Extra arguments go to every pytest run.
"""

from __future__ import annotations

import subprocess
import sys
import tempfile
import xml.etree.ElementTree as ET
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
BUILD = ROOT / "build"
# name -> pytest arguments; the first one streams to the terminal
HANG = "tests/cluster/test_controller_hang.py"  # 5 minutes of a SIGSTOPped API server


def cluster_halves() -> tuple[list[str], list[str]]:
    """The cluster test files in two sets, each for a control plane of its own: together they
    were the longest suite (about 29 minutes of mostly waiting on agents and controllers)."""
    files = sorted(
        str(path.relative_to(ROOT))
        for path in (ROOT / "tests" / "cluster").glob("test_*.py")
        if str(path.relative_to(ROOT)) != HANG
    )
    return files[0::2], files[1::2]


# The host tests' heaviest files (real Ansible runs, release builds, booted machines) in a second
# pytest beside the first: with issues 33 and 34's differential cases the one serial run of
# unit and integration tests would have outgrown the cluster suites.
HOST_SECOND = [
    f"tests/integration/test_{name}.py"
    for name in (
        "differential",
        "differential_apk",
        "differential_apt",
        "release",
        "recipes",
        "ansible_lint",
        "services",
        "pkgng",
        "apk",
    )
]

SUITES = {
    "main": [
        "tests",
        "--ignore=tests/e2e",
        "--ignore=tests/cluster",
        "--ignore=tests/upstream",
        *(f"--ignore={path}" for path in HOST_SECOND),
    ],
    "main2": HOST_SECOND,
    "cluster": cluster_halves()[0],
    "cluster2": cluster_halves()[1],
    "e2e": ["tests/e2e"],
    "hang": [HANG],
    "upstream": ["tests/upstream"],  # upstream's agent beside ours: machines, agents, waiting
}


def counts(report: Path) -> dict[str, int]:
    """passed/failed/skipped from one JUnit report (errors count as failed)."""
    total = {"passed": 0, "failed": 0, "skipped": 0}
    if not report.exists():
        return total
    for suite in ET.parse(report).getroot().iter("testsuite"):
        tests, skipped = int(suite.get("tests", 0)), int(suite.get("skipped", 0))
        failed = int(suite.get("failures", 0)) + int(suite.get("errors", 0))
        total["passed"] += tests - skipped - failed
        total["failed"] += failed
        total["skipped"] += skipped
    return total


def main(extra: list[str]) -> int:
    BUILD.mkdir(exist_ok=True)
    runs: dict[str, tuple[subprocess.Popen[bytes], Path | None]] = {}
    for index, (name, args) in enumerate(SUITES.items()):
        report = BUILD / f"junit-{name}.xml"
        report.unlink(missing_ok=True)
        # a base temp of its own each: pytest prunes older numbered dirs at start
        base = f"--basetemp={Path(tempfile.gettempdir()) / f'nodemanager-tests-{name}'}"
        command = [sys.executable, "-m", "pytest", *args, base, f"--junitxml={report}", *extra]
        if index == 0:
            runs[name] = (subprocess.Popen(command, cwd=ROOT), None)
            continue
        log = BUILD / f"test-{name}.log"
        with log.open("wb") as out:
            proc = subprocess.Popen(command, cwd=ROOT, stdout=out, stderr=subprocess.STDOUT)
        runs[name] = (proc, log)
    codes = {name: proc.wait() for name, (proc, _) in runs.items()}
    for name, (_, log) in runs.items():
        if log is not None:
            print(f"\n===== suite {name} (exit {codes[name]}) =====", flush=True)
            sys.stdout.write(log.read_text(errors="replace"))
    total = {"passed": 0, "failed": 0, "skipped": 0}
    for name in SUITES:
        for key, value in counts(BUILD / f"junit-{name}.xml").items():
            total[key] += value
    failed = any(code != 0 for code in codes.values())
    if failed and total["failed"] == 0:
        total["failed"] = 1  # a suite died before reporting: never report it green
    print(
        f"\ntests: {total['passed']} passed, {total['failed']} failed, {total['skipped']} skipped"
    )
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
