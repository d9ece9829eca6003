"""Upstream's agent and ours, each on a host of its own, fed the same ConfigSets: the same hosts.

Each case (tests/upstream/cases.py) is compared after the first apply, a second pass, a drift
made by hand on the host and a change to its ConfigSets: its files (content, mode, owner, group,
link targets, directories), its packages, its services (enabled, running), how many times each
of its executions ran and each of its services started, and its entries in the ManagedNode's
``status.configsets`` (whether each has an error, whether it names conflicts). A case that
diverges fails with both hosts' states side by side. A difference that is by design (README
"Compatibility with upstream") is pinned instead: the case checks each side's own behaviour.
A divergence found and not yet resolved is marked ``xfail(strict=True)`` with its reason
(``Case.diverges``): the case must be unmarked once the agents agree.

Templates are out: upstream renders them with an external gomplate binary, which cannot be
built here (no Go module source for it), so no case has a ``template``.

Both hosts boot the same cached root (os-release ``ID=arch``, Debian's systemd and pacman with a
local repository); the whole run is one pair of machines, all cases at once.
"""

from __future__ import annotations

import json
import re
from typing import Any

import pytest

from tests.upstream.cases import CASES, PHASES, Case, View

# set-up, four passes of every case on a loaded 2-core machine
pytestmark = [pytest.mark.machine, pytest.mark.timeout(1800)]


def view(state: dict[str, Any], case: Case) -> View:
    """The part of a host's state that belongs to ``case``."""
    root = case.root
    files = {
        p: e
        for p, e in state["files"].items()
        if p == root or p.startswith(root + "/") or p in case.paths
    }
    prefix = f"nmd-{case.name}"
    packages = {
        n: v for n, v in state["packages"].items() if n.startswith(prefix) or n in _pkgs(case)
    }
    units = (*case.units, *case.absent_units)
    services = {u: s for u, s in state["services"].items() if u in units}
    counts = {
        k: v
        for k, v in state["counts"].items()
        if "/" in k and (k.split("/", 1)[1].startswith(case.name) or k.split("/", 1)[1] in units)
    }
    names = {o["metadata"]["name"] for phase in PHASES for o in case.objects(phase)}
    entries = (state["node"].get("status") or {}).get("configsets") or []
    status = {
        e["name"]: {"error": bool(e.get("error")), "conflicts": bool(e.get("conflicts"))}
        for e in entries
        if e.get("name") in names
    }
    return {
        "files": files,
        "packages": packages,
        "services": services,
        "counts": counts,
        "status": status,
    }


def _pkgs(case: Case) -> set[str]:
    return set(case.packages)


def side_by_side(phase: str, up: View, ours: View) -> str:
    lines = [f"after {phase}:"]
    for part in ("files", "packages", "services", "counts", "status"):
        keys = sorted(set(up[part]) | set(ours[part]))
        for key in keys:
            a, b = up[part].get(key, "-"), ours[part].get(key, "-")
            if a != b:
                lines.append(f"  {part} {key}:\n    upstream: {a}\n    ours:     {b}")
    return "\n".join(lines)


def errors(run: Any, side: str, phase: str, case: Case) -> list[str]:
    entries = (run.states[side][phase]["node"].get("status") or {}).get("configsets") or []
    names = {o["metadata"]["name"] for o in case.objects(phase)}
    return [
        f"{e['name']}: {e['error']}" for e in entries if e.get("name") in names and e.get("error")
    ]


def _param(case: Case) -> Any:
    if not case.diverges:
        return pytest.param(case, id=case.name)
    return pytest.param(
        case, id=case.name, marks=pytest.mark.xfail(strict=True, reason=case.diverges)
    )


@pytest.mark.parametrize("case", [_param(c) for c in CASES])
def test_same_host(differential, case):
    failures = []
    for phase in PHASES:
        up = view(differential.states["upstream"][phase], case)
        ours = view(differential.states["ours"][phase], case)
        if case.expect is not None:
            try:
                case.expect(phase, up, ours)
            except AssertionError as e:
                failures.append(
                    f"after {phase} ({case.pinned}): {e}\n" + side_by_side(phase, up, ours)
                )
            continue
        if up != ours:
            detail = side_by_side(phase, up, ours)
            for side in ("upstream", "ours"):
                for line in errors(differential, side, phase, case):
                    detail += f"\n  {side} reported: {line}"
            failures.append(detail)
    assert not failures, f"{case.name}: the hosts differ\n" + "\n".join(failures)


MANAGED = ("kubernetes.io/hostname", "kubernetes.io/os", "kubernetes.io/arch")


def test_managednode_fields_both_write(differential):
    """The labels upstream's agent sets on itself, and the status fields both write."""
    up = differential.states["upstream"]["change"]["node"]
    ours = differential.states["ours"]["change"]["node"]
    failures = []
    for key in MANAGED:
        a, b = up["metadata"]["labels"].get(key), ours["metadata"]["labels"].get(key)
        if a != b:
            failures.append(f"label {key}: upstream {a!r}, ours {b!r}")
    for key in ("release", "interfaces", "sshHostKeys"):
        a, b = up.get("status", {}).get(key), ours.get("status", {}).get(key)
        if a != b:
            failures.append(
                f"status.{key}:\n  upstream: {json.dumps(a)}\n  ours:     {json.dumps(b)}"
            )
    up_names = sorted(e["name"] for e in up["status"].get("configsets") or [])
    our_names = sorted(e["name"] for e in ours["status"].get("configsets") or [])
    if up_names != our_names:
        failures.append(
            f"status.configsets names:\n  upstream: {up_names}\n  ours:     {our_names}"
        )
    assert not failures, "\n".join(failures)


METRIC = re.compile(r"^(nodemanager_[a-z_]+?)(?:_bucket|_sum|_count)?(?:\{|\s)", re.M)


def test_metrics_upstream_exports_are_exported_by_ours(differential):
    names = {}
    for side in ("upstream", "ours"):
        names[side] = set(METRIC.findall(differential.sides[side].metrics()))
    missing = sorted(names["upstream"] - names["ours"])
    assert not missing, f"upstream exports, ours does not: {missing}"
