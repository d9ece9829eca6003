"""The differential suite's cases: ConfigSets, a starting host, a drift and a change.

Each case owns ``/srv/nmdiff/<case>`` (``R`` in its ConfigSets and in ``$R`` of its scripts),
the packages ``nmd-<case>*``, the units ``nmd-<case>*`` and the counters
``/var/lib/nmdiff/{runs,starts}/<case>*``. ``setup`` runs on both machines before the agents
start, ``drift`` on both between the second pass and the third; ``change`` replaces the case's
ConfigSets for the last phase. Cases whose ConfigSets other cases' resources could collide with
use distinct names, so all of them share one pair of machines and one run.

``pinned`` marks a difference that is by design (README "Compatibility with upstream"): the
test then checks each side's own behaviour, as ``expect`` says, instead of equality.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from tests.upstream.hosts import COUNTERS, HOSTNAME

ROOT = Path(__file__).resolve().parents[2]
UPSTREAM_FIXTURES = ROOT / "tests" / "fixtures" / "upstream"
PHASES = ("first", "second", "drift", "change")
View = dict[str, Any]
Expect = Callable[[str, View, View], None]  # phase, upstream's view, ours


@dataclass
class Case:
    name: str
    configsets: list[dict[str, Any]]  # {"name", "labels", "spec"}; name defaults to the case's
    setup: str = ""
    drift: str = ""
    change: list[dict[str, Any]] | None = None
    packages: tuple[str, ...] = ()  # published to the repository (version 1.0-1)
    units: tuple[str, ...] = ()  # installed before the agents start, observed
    absent_units: tuple[str, ...] = ()  # observed, never installed
    paths: tuple[str, ...] = ()  # observed paths outside R
    pinned: str = ""  # why the difference is by design
    expect: Expect | None = None
    # a divergence found and not yet resolved: the case is expected to fail (strictly, so
    # that it must be unmarked once the agents agree)
    diverges: str = ""

    @property
    def root(self) -> str:
        return f"/srv/nmdiff/{self.name}"

    def objects(self, phase: str) -> list[dict[str, Any]]:
        """The case's ConfigSets as API objects for ``phase`` (R substituted)."""
        declared = self.change if phase == "change" and self.change is not None else self.configsets
        out = []
        for i, cs in enumerate(declared):
            name = cs.get("name") or (self.name if len(declared) == 1 else f"{self.name}-{i}")
            labels = cs.get("labels", {"kubernetes.io/hostname": HOSTNAME})
            out.append(
                {
                    "apiVersion": "common.nodemanager/v1",
                    "kind": "ConfigSet",
                    "metadata": {"name": name, "labels": labels},
                    "spec": _sub(cs["spec"], self.root),
                }
            )
        return out

    def script(self, text: str) -> str:
        return f"set -e; R={self.root}; mkdir -p $R; {text}"


def _sub(value: Any, root: str) -> Any:
    if isinstance(value, str):
        return root + value[1:] if value == "R" or value.startswith("R/") else value
    if isinstance(value, list):
        return [_sub(v, root) for v in value]
    if isinstance(value, dict):
        return {k: _sub(v, root) for k, v in value.items()}
    return value


def run(case: str, what: str, *subscribe: str) -> dict[str, Any]:
    """An execution that counts its runs in /var/lib/nmdiff/runs/<case>-<what>."""
    return {
        "command": "/bin/sh",
        "args": ["-c", f"mkdir -p {COUNTERS}/runs && echo ran >> {COUNTERS}/runs/{case}-{what}"],
        "subscribe_files": list(subscribe),
    }


def unit_text(unit: str) -> str:
    """A service that counts its starts in /var/lib/nmdiff/starts/<unit>: ExecStartPre runs to
    its end before a start returns, so a restart right after a start cannot lose the count."""
    return (
        f"[Unit]\nDescription=nmdiff {unit}\n\n[Service]\n"
        f"ExecStartPre=/bin/sh -c 'mkdir -p {COUNTERS}/starts; echo started >> "
        f"{COUNTERS}/starts/{unit}'\nExecStart=/bin/sleep infinity\n\n"
        "[Install]\nWantedBy=multi-user.target\n"
    )


def upstream_fixture(name: str) -> list[dict[str, Any]]:
    docs = yaml.safe_load_all((UPSTREAM_FIXTURES / name).read_text())
    return [
        {
            "name": d["metadata"]["name"],
            "labels": d["metadata"].get("labels", {}),
            "spec": d["spec"],
        }
        for d in docs
        if d and d.get("kind") == "ConfigSet"
    ]


def _upstream_sample() -> list[dict[str, Any]]:
    """config/samples/common_v1_configset.yaml of upstream's archive, as shipped (no spec)."""
    return [
        {
            "name": "configset-sample",
            "labels": {
                "app.kubernetes.io/name": "nodemanager",
                "app.kubernetes.io/managed-by": "kustomize",
            },
            "spec": {},
        }
    ]


def _marker(case: str) -> dict[str, Any]:
    return {"files": [{"path": "R/selected", "content": f"{case}\n", "mode": "0644"}]}


# -- by-design differences, each side's own behaviour ----------------------------------------


def _runs(view: View, key: str) -> int:
    return int(view["counts"].get(f"runs/{key}", 0))


def _expect_runs_per_change(phase: str, up: View, ours: View) -> None:
    """Upstream runs a subscribed execution once per changed file; ours once per run."""
    assert up["files"] == ours["files"], "files differ"
    want_up = {"first": 2, "second": 2, "drift": 4, "change": 5}[phase]
    want_ours = {"first": 1, "second": 1, "drift": 2, "change": 3}[phase]
    assert _runs(up, "exec-two-files-reload") == want_up, up["counts"]
    assert _runs(ours, "exec-two-files-reload") == want_ours, ours["counts"]


def _expect_cross_configset(phase: str, up: View, ours: View) -> None:
    """Upstream: only a file of the same ConfigSet triggers; ours: any declared file."""
    assert up["files"] == ours["files"], "files differ"
    assert _runs(up, "exec-cross-configset-reload") == 0, up["counts"]
    want = {"first": 1, "second": 1, "drift": 2, "change": 3}[phase]
    assert _runs(ours, "exec-cross-configset-reload") == want, ours["counts"]


def _expect_conflict(phase: str, up: View, ours: View) -> None:
    """Upstream skips both ConfigSets entirely and names the conflict; ours applies what does
    not conflict and reports the conflicting path in both."""
    root = "/srv/nmdiff/conflict"
    assert f"{root}/shared" not in up["files"] and f"{root}/own-a" not in up["files"], up["files"]
    assert f"{root}/shared" not in ours["files"], ours["files"]
    assert ours["files"].get(f"{root}/own-a", {}).get("content") == "a\n", ours["files"]
    for view in (up, ours):
        assert all(entry["conflicts"] for entry in view["status"].values()), view["status"]


def _expect_symlink_new(phase: str, up: View, ours: View) -> None:
    """A symlink that does not exist yet: upstream reads the link first and fails ("failed to
    read symlink"), so it never creates one; ours creates it."""
    link = "/srv/nmdiff/symlink-new/link"
    assert link not in up["files"] and up["status"]["symlink-new"]["error"], up
    assert ours["files"].get(link, {}).get("target") == "/etc/hostname", ours["files"]
    assert not ours["status"]["symlink-new"]["error"], ours["status"]


def _expect_no_ensure(phase: str, up: View, ours: View) -> None:
    """A package without ``ensure``: upstream reports an error and installs nothing; ours
    installs it."""
    assert "nmd-package-no-ensure" not in up["packages"], up["packages"]
    assert up["status"].get("package-no-ensure", {}).get("error"), up["status"]
    assert ours["packages"].get("nmd-package-no-ensure") == "1.0-1", ours["packages"]
    assert not ours["status"].get("package-no-ensure", {}).get("error"), ours["status"]


# -- the cases ------------------------------------------------------------------------------

FILE = {"path": "R/app.conf", "content": "one\n", "owner": "root", "group": "root", "mode": "0644"}

CASES: list[Case] = [
    Case(
        "file-basic",
        [{"spec": {"files": [FILE], "executions": [run("file-basic", "reload", "R/app.conf")]}}],
        drift="echo edited > $R/app.conf; chmod 600 $R/app.conf",
        change=[
            {
                "spec": {
                    "files": [{**FILE, "content": "two\n", "mode": "0640"}],
                    "executions": [run("file-basic", "reload", "R/app.conf")],
                }
            }
        ],
    ),
    Case(
        "file-owner-unset",  # upstream resets a file without owner/group to root:root
        [
            {
                "spec": {
                    "files": [{"path": "R/app.conf", "content": "one\n", "mode": "0600"}],
                    "executions": [run("file-owner-unset", "reload", "R/app.conf")],
                }
            }
        ],
        drift="chown nobody:nogroup $R/app.conf",
    ),
    Case(
        "file-no-mode",  # a new file without mode: 0644 from the umask upstream
        [{"spec": {"files": [{"path": "R/app.conf", "content": "one\n"}]}}],
        drift="chmod 0600 $R/app.conf",
    ),
    Case(
        "file-existing-mode",  # an existing file's mode is kept when none is declared
        [{"spec": {"files": [{"path": "R/app.conf", "content": "one\n"}]}}],
        setup="echo old > $R/app.conf; chmod 0600 $R/app.conf",
    ),
    Case(
        "file-no-content",  # neither content nor template: upstream skips it
        [
            {
                "spec": {
                    "files": [{"path": "R/empty.conf", "mode": "0644"}],
                    "executions": [run("file-no-content", "reload", "R/empty.conf")],
                }
            }
        ],
    ),
    Case(
        "file-missing-parent",  # upstream creates no parent directory
        [{"spec": {"files": [{"path": "R/sub/app.conf", "content": "one\n"}]}}],
    ),
    Case(
        "file-absent",
        [
            {
                "spec": {
                    "files": [{"path": "R/old.conf", "ensure": "absent"}],
                    "executions": [run("file-absent", "reload", "R/old.conf")],
                }
            }
        ],
        setup="echo old > $R/old.conf",
        drift="echo back > $R/old.conf",
    ),
    Case(
        "file-create-only",
        [{"spec": {"files": [{"path": "R/seed.conf", "content": "seed\n", "createOnly": True}]}}],
        drift="echo mine > $R/seed.conf",
    ),
    Case(
        "dir-mode",
        [{"spec": {"files": [{"path": "R/d", "ensure": "directory", "mode": "0750"}]}}],
        drift="chmod 0700 $R/d",
        change=[{"spec": {"files": [{"path": "R/d", "ensure": "directory", "mode": "0755"}]}}],
    ),
    Case(
        "dir-no-mode",  # upstream: 0660 before the umask
        [{"spec": {"files": [{"path": "R/d", "ensure": "directory"}]}}],
        diverges="found here: a new directory without mode is 0640 upstream (0660 before the "
        "umask), 0755 ours",
    ),
    Case(
        "dir-purge",
        [
            {
                "spec": {
                    "files": [
                        {"path": "R/conf.d", "ensure": "directory", "mode": "0755", "purge": True},
                        {"path": "R/conf.d/app.conf", "content": "declared\n", "mode": "0644"},
                    ],
                    "executions": [
                        run("dir-purge", "on-dir", "R/conf.d"),
                        run("dir-purge", "on-stray", "R/conf.d/stray.conf"),
                    ],
                }
            }
        ],
        setup="mkdir -p $R/conf.d/keep.d; echo x > $R/conf.d/stray.conf; "
        "echo y > $R/conf.d/keep.d/mine.conf",
        drift="echo again > $R/conf.d/stray.conf",
    ),
    Case(
        "symlink-new",
        [{"spec": {"files": [{"path": "R/link", "ensure": "symlink", "target": "/etc/hostname"}]}}],
        pinned="found here: upstream cannot create a symlink that does not exist yet",
        expect=_expect_symlink_new,
    ),
    Case(
        "symlink-existing",
        [{"spec": {"files": [{"path": "R/link", "ensure": "symlink", "target": "/etc/hostname"}]}}],
        setup="ln -s /etc/os-release $R/link",
        drift="ln -sfn /etc/passwd $R/link",
    ),
    Case(
        "exec-unsubscribed",  # never runs, on both
        [
            {
                "spec": {
                    "files": [FILE],
                    "executions": [{**run("exec-unsubscribed", "x"), "subscribe_files": []}],
                }
            }
        ],
    ),
    Case(
        "exec-two-files",
        [
            {
                "spec": {
                    "files": [FILE, {**FILE, "path": "R/b.conf"}],
                    "executions": [run("exec-two-files", "reload", "R/app.conf", "R/b.conf")],
                }
            }
        ],
        drift="echo x > $R/app.conf; echo x > $R/b.conf",
        change=[
            {
                "spec": {
                    "files": [{**FILE, "content": "two\n"}, {**FILE, "path": "R/b.conf"}],
                    "executions": [run("exec-two-files", "reload", "R/app.conf", "R/b.conf")],
                }
            }
        ],
        pinned="README: a subscribed execution runs once per run however many files changed",
        expect=_expect_runs_per_change,
    ),
    Case(
        "exec-cross-configset",
        [
            {"name": "exec-cross-configset-files", "spec": {"files": [FILE]}},
            {
                "name": "exec-cross-configset-exec",
                "spec": {"executions": [run("exec-cross-configset", "reload", "R/app.conf")]},
            },
        ],
        drift="echo x > $R/app.conf",
        change=[
            {"name": "exec-cross-configset-files", "spec": {"files": [{**FILE, "content": "2\n"}]}},
            {
                "name": "exec-cross-configset-exec",
                "spec": {"executions": [run("exec-cross-configset", "reload", "R/app.conf")]},
            },
        ],
        pinned="README: a file declared by another ConfigSet triggers an execution too",
        expect=_expect_cross_configset,
    ),
    Case(
        "package-install",
        [{"spec": {"packages": [{"name": "nmd-package-install", "ensure": "installed"}]}}],
        packages=("nmd-package-install",),
        drift="pacman -R --noconfirm nmd-package-install >/dev/null",
        change=[{"spec": {"packages": [{"name": "nmd-package-install", "ensure": "absent"}]}}],
    ),
    Case(
        "package-absent",
        [{"spec": {"packages": [{"name": "nmd-package-absent", "ensure": "absent"}]}}],
        packages=("nmd-package-absent",),
        setup="pacman -S --noconfirm nmd-package-absent >/dev/null",
        drift="pacman -S --noconfirm nmd-package-absent >/dev/null",
    ),
    Case(
        "package-no-ensure",
        [{"spec": {"packages": [{"name": "nmd-package-no-ensure"}]}}],
        packages=("nmd-package-no-ensure",),
        pinned="README: packages without ensure mean installed (upstream: an error)",
        expect=_expect_no_ensure,
    ),
    Case(
        "service-running",
        [
            {
                "spec": {
                    "files": [{**FILE, "path": "R/svc.conf"}],
                    "services": [
                        {
                            "name": "nmd-service-running",
                            "ensure": "running",
                            "enable": True,
                            "subscribe_files": ["R/svc.conf"],
                        }
                    ],
                }
            }
        ],
        units=("nmd-service-running",),
        diverges="found here: a stopped service whose subscribed file is new is started and "
        "then restarted in the same pass upstream (2 starts), started once ours",
        drift="systemctl disable --now nmd-service-running 2>/dev/null",
        change=[
            {
                "spec": {
                    "files": [{**FILE, "path": "R/svc.conf", "content": "two\n"}],
                    "services": [
                        {
                            "name": "nmd-service-running",
                            "ensure": "running",
                            "enable": True,
                            "subscribe_files": ["R/svc.conf"],
                        }
                    ],
                }
            }
        ],
    ),
    Case(
        "service-restart",  # running already: a changed subscribed file restarts it
        [
            {
                "spec": {
                    "files": [{**FILE, "path": "R/svc.conf"}],
                    "services": [
                        {
                            "name": "nmd-service-restart",
                            "ensure": "running",
                            "enable": True,
                            "subscribe_files": ["R/svc.conf"],
                        }
                    ],
                }
            }
        ],
        units=("nmd-service-restart",),
        setup="systemctl enable --now nmd-service-restart 2>/dev/null",
        drift="echo edited > $R/svc.conf",
    ),
    Case(
        "service-enable-omitted",  # README: false or omitted disables at boot
        [{"spec": {"services": [{"name": "nmd-service-enable-omitted", "ensure": "running"}]}}],
        units=("nmd-service-enable-omitted",),
        setup="systemctl enable nmd-service-enable-omitted 2>/dev/null",
    ),
    Case(
        "service-stopped",
        [
            {
                "spec": {
                    "services": [
                        {"name": "nmd-service-stopped", "ensure": "stopped", "enable": False}
                    ]
                }
            }
        ],
        units=("nmd-service-stopped",),
        setup="systemctl enable --now nmd-service-stopped 2>/dev/null",
        drift="systemctl start nmd-service-stopped",
    ),
    Case(
        "conflict",
        [
            {
                "name": "conflict-a",
                "spec": {
                    "files": [
                        {"path": "R/shared", "content": "a\n"},
                        {"path": "R/own-a", "content": "a\n"},
                    ]
                },
            },
            {"name": "conflict-b", "spec": {"files": [{"path": "R/shared", "content": "b\n"}]}},
        ],
        pinned="README: merging with conflicts reported per resource",
        expect=_expect_conflict,
    ),
    # Selection: which of upstream's label values select this node (one value per label).
    *(
        Case(
            f"select-{slug}",
            [{"labels": labels, "spec": _marker(f"select-{slug}")}],
        )
        for slug, labels in [
            ("os-arch", {"kubernetes.io/os": "arch"}),
            ("os-linux", {"kubernetes.io/os": "linux"}),
            ("nmos-arch", {"nodemanager.io/os": "arch"}),
            ("arch-x86-64", {"kubernetes.io/arch": "x86_64"}),
            ("arch-amd64", {"kubernetes.io/arch": "amd64"}),
            ("hostname", {"kubernetes.io/hostname": HOSTNAME}),
            ("other-host", {"kubernetes.io/hostname": "elsewhere"}),
            ("no-labels", {}),
            ("os-and-arch", {"kubernetes.io/os": "arch", "kubernetes.io/arch": "x86_64"}),
        ]
    ),
    # Upstream's own shapes: config/samples (no spec; its labels match no node), the
    # documented example of docs/api/configset.md and docs/getting-started.md's clock.
    Case("upstream-sample", _upstream_sample()),
    Case(
        "upstream-clock",
        [
            *upstream_fixture("clock-linux.yaml"),
            {
                # docs/getting-started.md's ConfigSet: the same resources under
                # nodemanager.io/os, which upstream's agent never sets
                "name": "clock",
                "labels": {"nodemanager.io/os": "arch"},
                "spec": upstream_fixture("clock-linux.yaml")[0]["spec"],
            },
        ],
        packages=("chrony",),
        units=("chronyd",),
        absent_units=("systemd-timesyncd",),
        paths=("/etc/chrony.conf",),
        diverges="found here: chronyd starts twice upstream (started, then restarted for its "
        "new file), once ours",
    ),
]

SENTINEL = "zzzz-nmdiff-sentinel"  # last by name and by creation: applied after every case
