"""nodemanager migrate's logic: upstream objects in, ours and a report out (desired/migrate.py,
desired/gomplate.py)."""

from __future__ import annotations

from pathlib import Path

import yaml

from nodemanager.desired.gomplate import field_name, translate
from nodemanager.desired.migrate import migrate

UPSTREAM = Path(__file__).resolve().parents[2] / "fixtures" / "upstream"


def test_go_field_names_become_the_apis():
    assert [field_name(n) for n in ("PublicKey", "SSHHostKeys", "IPv4", "Name", "ListenPort")] == [
        "publicKey",
        "sshHostKeys",
        "ipv4",
        "name",
        "listenPort",
    ]


def test_untranslated_actions_are_flagged_with_their_line_and_the_template_kept():
    template = 'a\n{{ strings.ToUpper "x" }}\n{{ with .Foo }}{{ end }}\n'
    result = translate(template)
    assert result.problems[0].startswith('line 2: {{ strings.ToUpper "x" }}: function')
    cs = {
        "apiVersion": "common.nodemanager/v1",
        "kind": "ConfigSet",
        "metadata": {"name": "t", "labels": {"kubernetes.io/os": "arch"}},
        "spec": {"files": [{"path": "/x", "template": '{{ (ds "data").Node.Name }}\n' + template}]},
    }
    out = migrate([cs])
    assert out.objects[0]["spec"]["files"][0]["template"] == cs["spec"]["files"][0]["template"]
    assert any("ConfigSet t spec.files[0].template line 3" in f for f in out.flagged)


def test_every_upstream_fixture_migrates_and_the_report_names_each_changed_meaning():
    docs = []
    for path in sorted(UPSTREAM.glob("*.yaml")):
        docs += [d for d in yaml.safe_load_all(path.read_text()) if d]
    docs.append(
        {
            "apiVersion": "common.nodemanager/v1",
            "kind": "ConfigSet",
            "metadata": {"name": "old", "labels": {"kubernetes.io/os": "arch"}},
            "spec": {"packages": [{"name": "vim"}], "executions": [{"command": "/bin/true"}]},
        }
    )
    docs.append({"apiVersion": "freebsd.nodemanager/v1", "kind": "Jail", "metadata": {"name": "j"}})
    out = migrate(docs)
    assert "Jail" not in [d["kind"] for d in out.objects]
    assert any("Jail j" in f and "not implemented" in f for f in out.flagged)
    report = "\n".join(out.changes)
    assert "ConfigSet old spec.packages[0] (vim): no ensure means installed" in report
    assert "ConfigSet old spec.executions[0]: no subscribe_files, so it never runs" in report
    assert "ConfigSet old selects kubernetes.io/os=arch" in report
    gomplate = [d for d in out.objects if d.get("metadata", {}).get("name") == "app-secret"]
    assert gomplate and "app-secret spec.files[0].template: gomplate translated" in report
    for doc in gomplate:  # translated, and now readable by the strict parser
        from nodemanager.api import ConfigSet

        ConfigSet.from_dict(doc, strict=True)


def test_migrate_on_the_command_line_prints_ours_and_the_report(tmp_path):
    from click.testing import CliRunner

    from nodemanager.cli import main

    ok = CliRunner().invoke(main, ["migrate", "-f", str(UPSTREAM / "nodes" / "managednode.yaml")])
    assert ok.exit_code == 0, ok.output
    (node,) = yaml.safe_load_all(ok.stdout)
    assert node["spec"]["upgrade"] == {"schedule": "0 3 * * *", "delay": "23h", "group": "workers"}
    assert "no meaning changes" in ok.stderr
    bad = tmp_path / "bad.yaml"
    doc = {
        "apiVersion": "common.nodemanager/v1",
        "kind": "ConfigSet",
        "metadata": {"name": "b"},
        "spec": {
            "files": [{"path": "/x", "template": '{{ (ds "data").Node.Name | printf "%s" }}'}]
        },
    }
    bad.write_text(yaml.safe_dump(doc))
    flagged = CliRunner().invoke(main, ["migrate", "-f", str(bad)])
    assert flagged.exit_code == 1
    assert "edit: ConfigSet b spec.files[0].template line 1:" in flagged.stderr
