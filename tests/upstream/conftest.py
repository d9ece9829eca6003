"""Two sides, each a booted machine with its own API server and agent, fed the same ConfigSets.

Upstream's agent is built from ``../shared/vendor`` (tests/thirdparty.py; the suite is
skipped with one line naming what is missing where it cannot be had). Its side's API server
has upstream's CRDs (tests/fixtures/upstream/crds), ours has ours (crds/). How a pass is
driven and awaited: tests/upstream/drive.py.
"""

from __future__ import annotations

import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest

from tests.controlplane.cluster import ControlPlane
from tests.thirdparty import UPSTREAM, build, missing
from tests.upstream.cases import CASES
from tests.upstream.drive import Run, make_repository, prepare_host, run_phases, start_plane
from tests.upstream.hosts import Side, boot


def upstream_binary() -> Path:
    """Upstream's agent, built once; the test is skipped with one line where it cannot be."""
    reason = missing(UPSTREAM)
    if reason:
        pytest.skip(reason)
    return build(UPSTREAM)


@pytest.fixture(scope="module")
def differential(tmp_path_factory) -> Any:
    binary = upstream_binary()
    base = tmp_path_factory.mktemp("upstream-differential")
    repo = make_repository(base, CASES)
    started = time.monotonic()
    planes: dict[str, ControlPlane] = {}
    sides: dict[str, Side] = {}

    def up(name: str) -> None:
        planes[name] = start_plane(name, base / f"{name}-cp")
        (base / name).mkdir()
        sides[name] = boot(
            name, planes[name], base / name, repo, binary if name == "upstream" else None
        )
        prepare_host(sides[name], repo, CASES)

    try:
        with ThreadPoolExecutor(2) as pool:
            list(pool.map(up, ("upstream", "ours")))  # raises the first failure
        for side in sides.values():
            side.start_agent()
        set_up = time.monotonic() - started
        states, seconds = run_phases(sides, CASES)
        TIMES.update({"set-up": set_up, **seconds})
        yield Run(sides, states, {"set-up": set_up, **seconds})
    finally:
        for side in sides.values():
            side.stop_agent()
            side.machine.stop()
            side.close()
        for plane in planes.values():
            plane.stop()


TIMES: dict[str, float] = {}


def pytest_terminal_summary(terminalreporter: Any) -> None:
    if TIMES:
        terminalreporter.write_sep("-", "upstream differential: time of each phase")
        for phase, seconds in TIMES.items():
            terminalreporter.write_line(f"{phase:<10} {seconds:7.1f} s")
