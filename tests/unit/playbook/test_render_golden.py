"""`render` output is byte-identical to what it was when the playbook was still built as task
dicts beside the steps (captured from main before tasks were rendered from steps): the examples
and upstream fixtures through the real CLI for every family, every step kind and form (user
services, rc.conf arguments, purge, Secret-fed content shown and hidden, literal paths), and the
whole differential suite's plans (as digests: some hold megabytes of content).

Changed on purpose for issue 34 (the playbook an Ansible team would write): each task a block
whose rescue goes on, the file guard a stat and an assert, literal paths, values without
anything to template written plain, `render` indented as ansible-lint wants.

One digest was changed on purpose when tasks came to be rendered from steps: a directory and its
purge whose paths need the same literal environment shared one dict, which yaml.safe_dump wrote
as an anchor and an alias (``&id001``/``*id001``); each task now carries its own copy (the same
mapping when loaded).

Regenerate only for an intended change of the rendered playbook:
``.venv/bin/python -m tests.unit.playbook.test_render_golden``, then read the diff.
"""

from __future__ import annotations

import hashlib
import json
import sys
from dataclasses import replace
from pathlib import Path

from click.testing import CliRunner

from nodemanager.api import ConfigSet
from nodemanager.cli.local import render
from nodemanager.desired.merge import merge
from nodemanager.desired.templates import Rendered
from nodemanager.playbook import subset
from nodemanager.playbook.build import build
from nodemanager.playbook.dump import to_yaml
from nodemanager.playbook.platforms import FAMILIES
from nodemanager.playbook.upgrade import upgrade_plan
from tests.integration.differential import cases, plan_of

ROOT = Path(__file__).resolve().parents[3]
GOLDEN = Path(__file__).parent / "golden" / "render.json"
FAMILY_NAMES = sorted(set(FAMILIES.values()))

# Each file with node labels its selector matches.
FILES = {
    "examples/arch-chrony.yaml": "",
    "examples/demo.yaml": "",
    "examples/cluster/hosts-from-nodes.yaml": "",
    "examples/cluster/sshfp-records.yaml": "role=dns",
    "examples/cluster/wireguard-peers.yaml": "",
    "tests/fixtures/upstream/clock-linux.yaml": "",  # its label is managed: matches no node
    "tests/fixtures/upstream/gomplate-secret.yaml": "role=app",
    "tests/fixtures/upstream/notify-all.yaml": "role=jailhost",
    "tests/fixtures/upstream/secret-refs.yaml": "role=app",
}

EVERY_FORM = {
    "packages": [{"name": "p"}, {"name": "q", "ensure": "latest", "version": "1.2"}],
    "files": [
        {"path": "/a", "content": "x {{ y }}\n", "mode": "0640", "owner": "root"},
        {"path": "/b"},
        {"path": "/c", "content": "c", "createOnly": True},
        {"path": "/s", "template": "{{ s }}", "secretRefs": [{"name": "s"}]},
        {"path": "/d", "ensure": "directory", "purge": True, "group": "wheel"},
        {"path": "/d/kept", "content": "k"},
        {"path": "/l", "ensure": "symlink", "target": "$HOME/x"},
        {"path": "/$HOME/t", "ensure": "symlink", "target": "/a"},
        {"path": "/t", "ensure": "symlink", "target": "~/x"},
        {"path": "/g", "ensure": "absent"},
    ],
    "services": [
        {"name": "s", "ensure": "running", "enable": True, "subscribe_files": ["/a", "/s"]},
        {"name": "t", "ensure": "running", "arguments": "-x", "enable": False},
        {"name": "v", "ensure": "stopped", "enable": False},
        {"name": "w", "enable": True},
        {"name": "u", "user": "al", "ensure": "running", "enable": True, "subscribe_files": ["/a"]},
        {"name": "k", "user": "al", "ensure": "stopped"},
        {"name": "m", "user": "al"},
    ],
    "executions": [
        {"command": "/bin/true", "onEveryApply": True},
        {"command": "/bin/h", "args": ["$X", "~"], "subscribe_files": ["/a", "/d/kept"]},
    ],
}


def _cli_renders() -> dict[str, str]:
    out = {}
    for name, labels in FILES.items():
        for fam in FAMILY_NAMES:
            for show in (False, True):
                args = ["-f", str(ROOT / name), "--os", fam, "--hostname", "web1"]
                args += ["--node-labels", labels] if labels else []
                args += ["--show-secrets"] if show else []
                result = CliRunner().invoke(render, args)
                out[f"cli {name} {fam} show={show}"] = f"exit {result.exit_code}\n{result.stdout}"
    return out


def _form_renders() -> dict[str, str]:
    out = {}
    cs = ConfigSet.from_dict({"metadata": {"name": "every"}, "spec": EVERY_FORM})
    other = ConfigSet.from_dict(
        {
            "metadata": {"name": "other"},
            "spec": {"files": [{**EVERY_FORM["files"][0], "mode": "640"}]},
        }
    )
    contents = {"/s": Rendered("secret text\n", secret=True)}
    for fam in [*FAMILY_NAMES, "unsupported:plan9"]:
        for show in (False, True):
            plan = build(merge([cs, other]), fam, "n", contents=contents, show_secrets=show)
            out[f"forms {fam} show={show}"] = to_yaml(plan.playbook)
    for fam in FAMILY_NAMES:
        out[f"upgrade {fam}"] = to_yaml(upgrade_plan(fam, "n").playbook)
    return out


def _handed_over() -> dict[str, str]:
    """What the executor hands to Ansible: some steps left, handlers notified by native changes
    or forced into tasks, large content spilled to a file."""
    cs = ConfigSet.from_dict({"metadata": {"name": "every"}, "spec": EVERY_FORM})
    contents = {"/s": Rendered("secret text\n", secret=True)}
    plan = build(merge([cs]), "debian", "n", contents=contents)
    tasks = plan.tasks()
    left = subset.rest(plan, tasks[1::2], {"nodemanager changed /a"}, [])
    forced = subset.rest(plan, [], set(), plan.handlers()[1:])
    spill = {s.task: f"/run/content/{i}" for i, s in enumerate(tasks) if s.kind == "write"}
    return {
        "rest notified": to_yaml(left.playbook),
        "rest forced": to_yaml(forced.playbook),
        "rest spilled": to_yaml(
            replace(
                left,
                steps=tuple(replace(s, content_file=spill.get(s.task)) for s in left.steps),
            ).playbook
        ),
    }


def _differential_digests() -> dict[str, str]:
    out = {}
    for case in cases():
        text = to_yaml(plan_of([case], Path("/golden")).playbook)
        out[f"differential {case.name}"] = hashlib.sha256(text.encode()).hexdigest()
    return out


def renders() -> dict[str, str]:
    return {**_cli_renders(), **_form_renders(), **_handed_over(), **_differential_digests()}


def test_render_output_is_unchanged():
    golden = json.loads(GOLDEN.read_text())
    got = renders()
    assert sorted(got) == sorted(golden)
    assert [k for k in golden if got[k] != golden[k]] == []


def test_the_golden_covers_what_render_can_say():
    golden = json.loads(GOLDEN.read_text())
    texts = "".join(v for k, v in golden.items() if k.startswith(("cli", "forms")))
    for word in (
        "become_user",
        "no_log: true",
        "nodemanager.core.purge",
        "community.general.sysrc",
        "listen:",
        "when:",
        "register:",
        "<redacted",
        "secret text",
        "HOME: $HOME",
        "content: !unsafe |",  # what Ansible would template, tagged so it never does
        "rescue:",
        "ansible.builtin.assert",
        "exit 1",  # the gomplate fixture: nothing written
    ):
        assert word in texts, word


if __name__ == "__main__":
    GOLDEN.parent.mkdir(exist_ok=True)
    GOLDEN.write_text(json.dumps(renders(), indent=1, sort_keys=True) + "\n")
    sys.exit(0)
