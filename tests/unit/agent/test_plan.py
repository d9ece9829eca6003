"""One pipeline for files and the cluster, parsed once per version, planned once per input."""

import yaml

from nodemanager.agent.identity import NodeIdentity
from nodemanager.agent.local import plan_files
from nodemanager.agent.plan import Planner
from nodemanager.agent.sources import Snapshot

NODE = NodeIdentity("n1", {"kubernetes.io/hostname": "n1"}, "debian")


def configset(name, rv="1", uid="u", **spec):
    return {
        "apiVersion": "common.nodemanager/v1",
        "kind": "ConfigSet",
        "metadata": {"name": name, "resourceVersion": rv, "uid": uid, "generation": 1},
        "spec": {"selector": {}, **spec},
    }


def snapshot(*configsets, secrets=None, labels=None):
    meta = {"name": "n1", "labels": labels or {}}
    return Snapshot(node={"metadata": meta}, configsets=list(configsets), secrets=secrets or {})


def test_files_and_the_cluster_give_the_same_plan(tmp_path):
    cs = configset("a", files=[{"path": "/etc/a", "content": "x\n"}], packages=[{"name": "vim"}])
    path = tmp_path / "a.yaml"
    path.write_text(yaml.safe_dump(cs))
    local = plan_files([str(path)], NODE)
    cluster = Planner(NODE).plan(snapshot(cs))
    assert local.plan.playbook == cluster.plan.playbook and local.plan.origins
    assert local.load_errors == [] and local.errors == {}


def test_nothing_changed_means_no_parse_and_no_new_plan():
    p = Planner(NODE)
    a = configset("a", files=[{"path": "/etc/a", "content": "x\n"}])
    first = p.plan(snapshot(a))
    parsed = p.parse(snapshot(a))[0][0]
    again = p.plan(snapshot(a, secrets={"unused": {"k": "dg=="}}))
    assert again is first and p.builds == 1 and p.parse(snapshot(a))[0][0] is parsed
    changed = configset("a", rv="2", files=[{"path": "/etc/a", "content": "y\n"}])
    third = p.plan(snapshot(changed))
    assert p.builds == 2 and third.digests != first.digests
    p.plan(snapshot(changed, labels={"role": "dns"}))  # labels select: a new plan
    assert p.builds == 3


def test_a_template_replans_when_what_it_reads_changes():
    p = Planner(NODE)
    f = {"path": "/etc/t", "template": "{{ node.secrets.k }}\n", "secretRefs": [{"name": "s"}]}
    a = configset("a", files=[f])
    one = p.plan(snapshot(a, secrets={"s": {"k": "b25l"}}))  # "one"
    two = p.plan(snapshot(a, secrets={"s": {"k": "dHdv"}}))  # "two"
    assert p.builds == 2 and one.contents["/etc/t"].text == "one\n"
    assert two.contents["/etc/t"].text == "two\n"


def test_invalid_configsets_are_reported_with_field_and_origin(tmp_path):
    bad = configset("bad", files=[{"path": "/etc/x", "mode": "rw"}])
    elsewhere = configset("other", files=[{"path": "relative"}])
    elsewhere["spec"]["selector"] = {"matchLabels": {"role": "db"}}
    path = tmp_path / "two.yaml"
    path.write_text(yaml.safe_dump_all([bad, elsewhere]))
    local = plan_files([str(path)], NODE)
    assert len(local.load_errors) == 2  # local mode reports every one
    assert local.load_errors[0].startswith(f"{path} (document 1): ConfigSet bad is invalid")
    assert "spec.files[0].mode" in local.load_errors[0]
    invalid = {i.name: i for i in Planner(NODE).plan(snapshot(bad, elsewhere)).invalid}
    assert invalid["bad"].targets(NODE.labels) and not invalid["other"].targets(NODE.labels)


def test_template_and_platform_errors_name_the_field():
    f = {"path": "/etc/t", "template": "{{ node.nothing_here }}"}
    svc = {"name": "sshd", "arguments": "-4"}
    planned = Planner(NODE).plan(snapshot(configset("a", files=[f], services=[svc])))
    assert planned.errors["file:/etc/t"].startswith("TemplateError: spec.files[0].template:")
    assert "spec.services[0].arguments" in planned.errors["service:sshd"]


def test_uses_nodes_reads_the_template_not_its_text():
    p = Planner(NODE)
    literal = configset("a", files=[{"path": "/etc/a", "template": "nodes: {{ node.name }}\n"}])
    loop = configset(
        "b", files=[{"path": "/etc/b", "template": "{% for n in nodes %}{{ n.name }}{% endfor %}"}]
    )
    assert not p.uses_nodes(snapshot(literal))
    assert p.uses_nodes(snapshot(literal, loop))
