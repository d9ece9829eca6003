"""`render --role`: the role's files, as data (no I/O here)."""

import yaml

from nodemanager.api import ConfigSet
from nodemanager.desired.merge import merge
from nodemanager.desired.templates import Rendered
from nodemanager.playbook.build import build
from nodemanager.playbook.render import leaves
from nodemanager.playbook.role import FILES_ABOVE, role, secret_var


def _role(show_secrets: bool):
    spec = {
        "files": [
            {"path": "/etc/s.conf", "template": "{{ node.secrets.k }}", "secretRefs": ["s"]},
            {"path": "/etc/big", "content": "b" * (FILES_ABOVE + 1)},
            {"path": "/etc/small", "content": "s\n"},
        ],
        "services": [{"name": "svc", "ensure": "running", "subscribe_files": ["/etc/small"]}],
    }
    cs = ConfigSet.from_dict({"metadata": {"name": "site"}, "spec": spec})
    contents = {"/etc/s.conf": Rendered("CANARY-34", secret=True)}
    plan = build(merge([cs]), "debian", "n", contents=contents, show_secrets=show_secrets)
    return {f.path: f.data.decode() for f in role(plan)}


def test_a_secret_is_an_argument_and_never_in_the_role_even_when_shown():
    for show in (False, True):
        files = _role(show)
        assert not any("CANARY-34" in text for text in files.values())
        arg = secret_var("/etc/s.conf")
        spec = yaml.safe_load(files["meta/argument_specs.yml"])["argument_specs"]["main"]
        assert spec["options"][arg]["no_log"] and spec["options"][arg]["required"]
        tasks = leaves(yaml.safe_load(files["tasks/main.yml"].replace("!unsafe", "")))
        (secret,) = [t for t in tasks if t["name"] == "ConfigSet site | file /etc/s.conf"]
        assert secret["ansible.builtin.copy"]["content"] == "{{ " + arg + " }}"
        assert secret["no_log"] is True
        assert arg in files["README.md"]


def test_large_content_goes_to_files_and_the_readme_names_the_configsets():
    files = _role(False)
    assert files["files/0-big"] == "b" * (FILES_ABOVE + 1)
    tasks = leaves(yaml.safe_load(files["tasks/main.yml"]))
    (big,) = [t for t in tasks if t["name"] == "ConfigSet site | file /etc/big"]
    assert big["ansible.builtin.copy"] == {
        "src": "0-big",
        "dest": "/etc/big",
        "owner": "root",  # upstream chowns every file it writes
        "group": "root",
    }
    (small,) = [t for t in tasks if t["name"] == "ConfigSet site | file /etc/small"]
    assert small["ansible.builtin.copy"]["content"] == "s\n"
    handlers = yaml.safe_load(files["handlers/main.yml"])
    assert [h["name"] for h in handlers] == ["ConfigSet site | restart service svc"]
    assert "site" in files["README.md"] and "force_handlers: true" in files["README.md"]
