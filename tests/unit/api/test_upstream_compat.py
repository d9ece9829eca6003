"""Upstream nodemanager's documented YAML parses and means the same here (fixtures in
tests/fixtures/upstream/, written in the shapes upstream's docs show), and local files are
parsed strictly, as kubectl would refuse them."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from nodemanager.agent.identity import NodeIdentity
from nodemanager.agent.local import plan_files
from nodemanager.agent.sources import load
from nodemanager.api import ConfigSet, InvalidObject
from nodemanager.api.configset import Notify, Ref
from nodemanager.desired.merge import merge
from nodemanager.playbook.build import build

UPSTREAM = Path(__file__).resolve().parents[2] / "fixtures" / "upstream"


def parsed(path: Path) -> list[ConfigSet]:
    """The ConfigSets of a local file, parsed as local mode parses them (strictly)."""
    return [ConfigSet.from_dict(d, strict=True) for d in load([str(path)]).snapshot.configsets]


def docs(name: str) -> list[dict]:
    return list(yaml.safe_load_all((UPSTREAM / name).read_text()))


def test_documented_example_parses_strictly_with_enable_as_upstream():
    loaded = load([str(UPSTREAM / "clock-linux.yaml")])
    assert loaded.errors == []
    (cs,) = parsed(UPSTREAM / "clock-linux.yaml")
    chronyd, timesyncd = cs.services
    assert (chronyd.ensure, chronyd.enable) == ("running", True)
    assert (timesyncd.ensure, timesyncd.enable) == ("stopped", False)


def test_omitted_enable_disables_at_boot_as_upstream():
    cs = ConfigSet.from_dict({"metadata": {"name": "s"}, "spec": {"services": [{"name": "a"}]}})
    assert cs.services[0].enable is False
    task = build(merge([cs]), "arch", "n").playbook[0]["tasks"][0]["block"][0]
    assert task["ansible.builtin.service"]["enabled"] is False


def test_refs_as_lists_of_names_and_as_objects():
    loaded = load([str(UPSTREAM / "secret-refs.yaml")])
    assert loaded.errors == [] and "my-app-secret" in loaded.snapshot.secrets
    (f,) = parsed(UPSTREAM / "secret-refs.yaml")[0].files
    assert f.secret_refs == (Ref("my-app-secret"),) and f.configmap_refs == ()
    mixed = ConfigSet.from_dict(
        {
            "metadata": {"name": "m"},
            "spec": {
                "files": [
                    {
                        "path": "/a",
                        "template": "x",
                        "configMapRefs": ["one", {"name": "two", "key": "k"}],
                    }
                ]
            },
        }
    )
    assert mixed.files[0].configmap_refs == (Ref("one"), Ref("two", "k"))


@pytest.mark.parametrize(
    "refs, field",
    [([""], "spec.files[0].secretRefs[0]"), ([{"key": "k"}], "spec.files[0].secretRefs[0].name")],
)
def test_bad_refs_name_the_field(refs, field):
    with pytest.raises(InvalidObject) as caught:
        ConfigSet.from_dict(
            {"metadata": {"name": "b"}, "spec": {"files": [{"path": "/a", "secretRefs": refs}]}}
        )
    assert field in str(caught.value)


def test_notify_without_name_means_every_object_of_the_kind():
    (cs,) = parsed(UPSTREAM / "notify-all.yaml")
    assert cs.notifies == (Notify("v1", "ConfigMap", None, None),)


BASE = {
    "apiVersion": "common.nodemanager/v1",
    "kind": "ConfigSet",
    "metadata": {"name": "t", "uid": "x", "annotations": {"a": "b"}},
    "spec": {"files": [{"path": "/a", "content": "x"}]},
}


@pytest.mark.parametrize(
    "change, expected",
    [
        (lambda d: d["spec"]["files"][0].update(contents="y"), "spec.files[0].contents: unknown"),
        (lambda d: d["spec"]["files"][0].update(mdoe="0644"), "spec.files[0].mdoe: unknown"),
        (lambda d: d["spec"].update(file=[]), "spec.file: unknown field"),
        (lambda d: d.update(apiVersion="common.nodemanager/v2"), "apiVersion: must be"),
        (lambda d: d.update(kind="Configset"), "kind: must be ConfigSet, not 'Configset'"),
        (lambda d: d.pop("kind"), "kind: required"),
    ],
)
def test_strict_parse_names_the_field(change, expected):
    raw = yaml.safe_load(yaml.safe_dump(BASE))
    change(raw)
    with pytest.raises(InvalidObject) as caught:
        ConfigSet.from_dict(raw, strict=True)
    assert expected in str(caught.value)
    if expected.endswith("unknown") or "unknown field" in expected:
        ConfigSet.from_dict(raw)  # from the API server: lenient (it prunes and validates)


def test_strict_parse_accepts_metadata_and_status_the_server_adds():
    raw = {**BASE, "status": {"anything": 1}}
    raw["metadata"] = {**BASE["metadata"], "managedFields": [], "resourceVersion": "7"}
    assert ConfigSet.from_dict(raw, strict=True).resource_version == "7"


def test_misspelt_kind_in_a_file_is_an_error_not_skipped(tmp_path):
    path = tmp_path / "cs.yaml"
    path.write_text(yaml.safe_dump({**BASE, "kind": "Configset"}))
    local = plan_files([str(path)], NodeIdentity("n", {}, "debian"))
    assert local.desired.configsets == () and "kind: must be ConfigSet" in local.load_errors[0]


def test_render_of_upstreams_example_on_an_arch_host_selects_it_and_elsewhere_says_why():
    """docs/api/configset.md selects on ``kubernetes.io/os: arch`` (upstream's os-release ID)."""
    from click.testing import CliRunner

    from nodemanager.cli import main

    fixture = str(UPSTREAM / "clock-linux.yaml")
    arch = CliRunner().invoke(main, ["render", "-f", fixture, "--os", "arch"])
    assert arch.exit_code == 0 and "chrony" in arch.stdout
    debian = CliRunner().invoke(main, ["render", "-f", fixture, "--os", "debian"])
    assert "chrony" not in debian.stdout
    assert (
        "note: ConfigSet clock-linux: label kubernetes.io/os=arch: not carried "
        "(this node's labels carry: debian)" in debian.stderr
    )


def test_an_execution_without_subscribe_files_never_runs_as_upstream(tmp_path):
    """upstream handleExecutions runs only executions subscribed to a changed file."""
    from click.testing import CliRunner

    from nodemanager.cli import main

    marker = tmp_path / "ran"
    spec = {
        "selector": {},
        "executions": [
            {"command": "/bin/touch", "args": [str(marker)]},
            {"command": "/bin/touch", "args": [f"{marker}-always"], "onEveryApply": True},
        ],
    }
    cs = tmp_path / "cs.yaml"
    doc = {"apiVersion": "common.nodemanager/v1", "kind": "ConfigSet", "metadata": {"name": "x"}}
    cs.write_text(yaml.safe_dump({**doc, "spec": spec}))
    rendered = CliRunner().invoke(main, ["render", "-f", str(cs)])
    assert rendered.exit_code == 0, rendered.output
    assert f"{marker}-always" in rendered.stdout and f"'{marker}'" not in rendered.stdout
    assert (
        "note: x spec.executions[0]: no subscribe_files, so it never runs (as upstream)"
        in rendered.stderr
    )
