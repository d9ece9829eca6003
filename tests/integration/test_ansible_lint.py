"""`render`'s output passes ansible-lint's production profile, as a team's CI would run it.

Every example and upstream fixture through the real CLI for every platform family, every step
kind and form (tests/unit/playbook/test_render_golden.py's EVERY_FORM), the whole differential
suite's ConfigSets as one playbook, and `render --role` output: one ansible-lint run over all of
them, offline, with no configuration of ours. Zero violations; a rule broken on purpose carries
its `noqa` comment with the reason (docs/incoming/issue-34.md lists them).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

from nodemanager.api import ConfigSet
from nodemanager.cli.local import render
from nodemanager.desired.merge import merge
from nodemanager.desired.templates import Rendered
from nodemanager.playbook.build import build
from nodemanager.playbook.dump import to_yaml
from tests.integration.differential import cases, plan_of
from tests.unit.playbook.test_render_golden import EVERY_FORM, FAMILY_NAMES, FILES

ROOT = Path(__file__).resolve().parents[2]
LINT = Path(sys.executable).parent / "ansible-lint"

pytestmark = [pytest.mark.timeout(900)]


# ansible-lint runs ansible-playbook --syntax-check once per file: the examples and fixtures are
# rendered together, one file per set of node labels, on Arch (examples/arch-chrony.yaml selects
# it), Debian and FreeBSD (what differs by family beyond that is the package and service
# modules, which EVERY_FORM covers per family).
CLI_FAMILIES = ("arch", "debian", "freebsd")


def _write_renders(out: Path) -> list[Path]:
    written = []
    groups: dict[str, list[str]] = {}
    for name, labels in FILES.items():
        groups.setdefault(labels, []).append(name)
    for labels, names in groups.items():
        for fam in CLI_FAMILIES:
            args = [a for name in names for a in ("-f", str(ROOT / name))]
            args += ["--os", fam, "--hostname", "web1"]
            args += ["--node-labels", labels] if labels else []
            result = CliRunner().invoke(render, args)
            if result.stdout:  # nothing when every ConfigSet was refused (the gomplate one)
                path = out / f"examples-{labels.replace('=', '-') or 'all'}-{fam}.yml"
                path.write_text(result.stdout)
                written.append(path)
    cs = ConfigSet.from_dict({"metadata": {"name": "every"}, "spec": EVERY_FORM})
    contents = {"/s": Rendered("secret text\n", secret=True)}
    for fam in FAMILY_NAMES:
        plan = build(merge([cs]), fam, "n", contents=contents, show_secrets=False)
        path = out / f"every-form-{fam}.yml"
        path.write_text(to_yaml(plan.exported, pretty=True))
        written.append(path)
    path = out / "differential.yml"
    path.write_text(to_yaml(plan_of(cases(), Path("/srv/differential")).exported, pretty=True))
    return [*written, path]


def lint(paths: list[Path], cwd: Path) -> subprocess.CompletedProcess[str]:
    """ansible-lint's production profile over ``paths``, offline, with the project's
    collections (nodemanager.core, community.general) found as a team installs them."""
    env = {**os.environ, "ANSIBLE_COLLECTIONS_PATH": str(ROOT / "collections")}
    return subprocess.run(
        [str(LINT), "--offline", "--profile", "production", "--nocolor", "-f", "pep8"]
        + [str(p.relative_to(cwd)) for p in paths],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
    )


def test_render_output_is_clean_under_ansible_lint_production(tmp_path):
    paths = _write_renders(tmp_path)
    assert len(paths) >= 13
    done = lint(paths, tmp_path)
    assert done.stdout == "" and done.returncode == 0, done.stdout[-4000:] + done.stderr[-2000:]
    assert "Profile 'production' was required, and it passed" in done.stderr


COLLECTION = ROOT / "collections" / "ansible_collections" / "nodemanager" / "core"


def test_the_collection_is_clean_and_its_modules_documented():
    done = lint([COLLECTION], COLLECTION)
    assert done.stdout == "" and done.returncode == 0, done.stdout[-4000:] + done.stderr[-2000:]
    env = {**os.environ, "ANSIBLE_COLLECTIONS_PATH": str(ROOT / "collections")}
    modules = sorted(p.stem for p in (COLLECTION / "plugins" / "modules").glob("*.py"))
    assert modules == ["purge"]
    for module in modules:
        shown = subprocess.run(
            [str(LINT.parent / "ansible-doc"), "--json", f"nodemanager.core.{module}"],
            env=env,
            capture_output=True,
            text=True,
        )
        assert shown.returncode == 0, shown.stderr
        doc = json.loads(shown.stdout)[f"nodemanager.core.{module}"]
        assert doc["doc"]["short_description"] and doc["doc"]["options"]
        assert doc["examples"].strip().startswith("- name:")
        assert doc["return"]  # RETURN values, each described
        assert all(v.get("description") for v in doc["return"].values())
