"""nodemanager migrate's logic: upstream objects in, ours and a report out (desired/migrate.py,
desired/gomplate.py)."""

from __future__ import annotations

from pathlib import Path

import pytest
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


GETTING_STARTED = """\
apiVersion: common.nodemanager/v1
kind: ConfigSet
metadata:
  name: hosts
  labels:
    nodemanager.io/os: arch
spec:
  files:
    - path: /etc/hosts.extra
      ensure: file
      template: |
        # Generated for {{ (ds "data").Node.Labels["kubernetes.io/hostname"] }}
        {{ range (ds "data").Nodes -}}
        {{ range .Status.Interfaces -}}
        {{ range .IPv4 }}{{ . }}  {{ $.Name }}{{ end }}
        {{ end -}}
        {{ end }}
"""


def test_upstreams_getting_started_template_is_flagged_at_its_line_and_exits_1(tmp_path):
    """docs/getting-started.md's /etc/hosts.extra: `$` is gomplate's context, not the data."""
    from click.testing import CliRunner

    from nodemanager.cli import main

    path = tmp_path / "hosts.yaml"
    path.write_text(GETTING_STARTED)
    done = CliRunner().invoke(main, ["migrate", "-f", str(path)])
    assert done.exit_code == 1, done.output
    assert (
        f"edit: {path}:15: ConfigSet hosts spec.files[0].template line 4: {{{{ $.Name }}}}: "
        in done.stderr
    )
    assert f"note: {path}:6: ConfigSet hosts metadata.labels.nodemanager.io/os: no agent" in (
        done.stderr
    )
    (kept,) = yaml.safe_load_all(done.stdout)  # left as it was, for the hand edit
    assert "$.Name" in kept["spec"]["files"][0]["template"]


def test_the_getting_started_template_edited_translates_and_renders():
    from nodemanager.api import File, Node
    from nodemanager.desired.templates import TemplateData, render_file

    template = yaml.safe_load(GETTING_STARTED)["spec"]["files"][0]["template"]
    result = translate(
        template.replace("$.Name", "$n.Name").replace(
            '{{ range (ds "data").Nodes -}}', '{{ range $n := (ds "data").Nodes -}}'
        )
    )
    assert result.problems  # range with variables: not translated, said so
    fixed = translate(template.replace("{{ $.Name }}", ""))
    assert not fixed.problems
    node = Node("a", {"kubernetes.io/hostname": "a"}, {"interfaces": {"e": {"ipv4": ["10.0.0.1"]}}})
    text = render_file(File(path="/x", template=fixed.text), TemplateData(node, (node,))).text
    assert text == "# Generated for a\n10.0.0.1  \n\n"


@pytest.mark.parametrize(
    "template, why",
    [
        ("{{ . }}\n", "'.' outside a range"),
        ('{{ range (ds "data").Nodes }}\n', "range/if without end"),
        ("{{ $x }}\n", "translated, but it cannot render: 'x' is undefined"),
    ],
)
def test_translations_that_cannot_render_are_edits_not_done(template, why):
    cs = {
        "apiVersion": "common.nodemanager/v1",
        "kind": "ConfigSet",
        "metadata": {"name": "t"},
        "spec": {"files": [{"path": "/x", "template": template}]},
    }
    out = migrate([cs])
    assert any(why in f for f in out.flagged), out.flagged
    assert not out.changes


def test_literal_jinja_markers_in_upstream_text_stay_literal():
    """gomplate printed `{%` and `{#` as text; Jinja2 would read them as syntax."""
    from nodemanager.api import File, Node
    from nodemanager.desired.templates import TemplateData, render_file

    template = '{# not a comment #} {% raw %} {{ (ds "data").Node.Labels.a }}\n'
    out = migrate(
        [
            {
                "apiVersion": "common.nodemanager/v1",
                "kind": "ConfigSet",
                "metadata": {"name": "t"},
                "spec": {"files": [{"path": "/x", "template": template}]},
            }
        ]
    )
    assert not out.flagged
    translated = out.objects[0]["spec"]["files"][0]["template"]
    node = Node("n", {"a": "1"}, {})
    text = render_file(File(path="/x", template=translated), TemplateData(node, (node,))).text
    assert text == "{# not a comment #} {% raw %} 1\n"


def test_output_has_no_server_owned_fields_and_only_administrators_labels():
    stored = {
        "apiVersion": "common.nodemanager/v1",
        "kind": "ManagedNode",
        "metadata": {
            "name": "h1",
            "namespace": "nodemanager",
            "resourceVersion": "42",
            "uid": "u",
            "generation": 3,
            "creationTimestamp": "2026-11-01T00:00:00Z",
            "managedFields": [{"manager": "nodemanager"}],
            "annotations": {"kubectl.kubernetes.io/last-applied-configuration": "{}"},
            "labels": {
                "kubernetes.io/hostname": "h1",
                "kubernetes.io/os": "arch",
                "kubernetes.io/arch": "x86_64",
                "role": "dns",
            },
        },
        "spec": {"domain": "example.org"},
        "status": {"release": "6.1"},
    }
    out = migrate([stored])
    (node,) = out.objects
    assert node == {
        "apiVersion": "common.nodemanager/v1",
        "kind": "ManagedNode",
        "metadata": {"name": "h1", "namespace": "nodemanager", "labels": {"role": "dns"}},
        "spec": {"domain": "example.org"},
    }
    named = [str(n) for n in out.notes if n.kind == "note"]
    for key in ("kubernetes.io/hostname", "kubernetes.io/os", "kubernetes.io/arch"):
        assert any(f"metadata.labels.{key}:" in n and "upstream's agent" in n for n in named)
    assert stored["metadata"]["resourceVersion"] == "42"  # the input is left alone


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
    assert "ConfigSet old spec.packages[0]: vim has no ensure, which means installed" in report
    assert "ConfigSet old spec.executions[0]: no subscribe_files, so it never runs" in report
    assert "kubernetes.io/os" not in report  # one value per label, upstream's: no change
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
    at = 1 + bad.read_text().splitlines().index("  - path: /x") + 1  # the next line: template
    assert f"edit: {bad}:{at}: ConfigSet b spec.files[0].template line 1:" in flagged.stderr


def test_a_mode_without_leading_zero_is_reported_as_upstream_read_it():
    """upstream GetFileModeFromString: strconv.ParseUint(mode, 0, 32), base 10 without a 0."""
    cs = {
        "apiVersion": "common.nodemanager/v1",
        "kind": "ConfigSet",
        "metadata": {"name": "m"},
        "spec": {"files": [{"path": "/a", "mode": "644"}, {"path": "/b", "mode": "0644"}]},
    }
    (line,) = migrate([cs]).changes
    assert line == (
        'ConfigSet m spec.files[0].mode: "644" was decimal to upstream (mode 0204); here it is '
        "octal 0644: the file's mode changes at the first apply"
    )
