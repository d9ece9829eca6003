import pytest
import yaml

from nodemanager.api import ConfigSet, InvalidObject

SEED_CHRONY = """
apiVersion: common.nodemanager/v1
kind: ConfigSet
metadata:
  name: chrony
  namespace: nodemanager
  labels:
    nodemanager.io/os: arch
spec:
  packages:
    - name: chrony
  files:
    - path: /etc/chrony.conf
      content: |
        server 0.arch.pool.ntp.org iburst
      mode: "0644"
  services:
    - name: chronyd
      ensure: running
      enable: true
      subscribe_files:
        - /etc/chrony.conf
  executions:
    - command: /usr/bin/systemctl
      args: ["daemon-reload"]
      subscribe_files: ["/etc/chrony.conf"]
"""


def errors_of(spec: dict) -> list[str]:
    with pytest.raises(InvalidObject) as caught:
        ConfigSet.from_dict({"metadata": {"name": "bad"}, "spec": spec})
    return [str(e) for e in caught.value.errors]


def test_seed_era_configset_parses_with_defaults():
    cs = ConfigSet.from_dict(yaml.safe_load(SEED_CHRONY))
    assert cs.name == "chrony" and cs.labels == (("nodemanager.io/os", "arch"),)
    assert cs.weight == 100 and cs.selector is None
    assert cs.packages[0].ensure == "installed"
    assert cs.files[0].mode == "0644" and cs.files[0].ensure == "file"
    assert cs.services[0].subscribe_files == ("/etc/chrony.conf",)
    assert cs.executions[0].argv == ("/usr/bin/systemctl", "daemon-reload")


@pytest.mark.parametrize(
    "file, expected",
    [
        ({"path": "etc/x"}, "spec.files[0].path: 'etc/x' must be an absolute path"),
        (
            {"path": "/etc/../shadow"},
            "spec.files[0].path: '/etc/../shadow' must not contain a '..' segment",
        ),
        ({"path": "/x", "ensure": "present"}, "spec.files[0].ensure: unknown value 'present'"),
        ({"path": "/x", "mode": "999"}, "spec.files[0].mode: '999' is not an octal string"),
        ({"path": "/x", "mode": 644}, "spec.files[0].mode: must be a string, not int"),
        (
            {"path": "/x", "ensure": "symlink"},
            "spec.files[0].target: required when ensure is symlink",
        ),
        (
            {"path": "/x", "content": "a", "template": "b"},
            "spec.files[0].template: content and template are mutually exclusive",
        ),
        (
            {"path": "/x", "purge": True},
            "spec.files[0].purge: only allowed when ensure is directory",
        ),
    ],
)
def test_bad_file_names_the_field(file, expected):
    assert any(e.startswith(expected) for e in errors_of({"files": [file]})), errors_of(
        {"files": [file]}
    )


def test_every_problem_is_reported_at_once():
    errors = errors_of(
        {
            "packages": [{"name": "vim", "ensure": "removed"}],
            "files": [{"path": "/ok"}, {"path": "rel", "mode": "8"}],
            "services": [{"ensure": "running"}],
            "executions": [{"args": ["x"]}],
        }
    )
    fields = [e.split(":")[0] for e in errors]
    assert fields == [
        "spec.packages[0].ensure",
        "spec.files[1].path",
        "spec.files[1].mode",
        "spec.services[0].name",
        "spec.executions[0].command",
    ]


def test_option_like_package_name_is_refused():
    assert errors_of({"packages": [{"name": "--overwrite=*"}]})[0].startswith(
        "spec.packages[0].name:"
    )


def test_mode_is_normalised_to_four_digits():
    cs = ConfigSet.from_dict(
        {"metadata": {"name": "m"}, "spec": {"files": [{"path": "/x", "mode": "644"}]}}
    )
    assert cs.files[0].mode == "0644"


def test_one_mode_one_spelling():
    # "1777" and "01777" (and "644", "0644") are one mode: two ConfigSets spelling it
    # differently do not conflict (tests/unit/desired/test_merge.py).
    modes = {"644": "0644", "0644": "0644", "1777": "1777", "01777": "1777", "0755": "0755"}
    for given, normal in modes.items():
        spec = {"files": [{"path": "/x", "mode": given}]}
        parsed = ConfigSet.from_dict({"metadata": {"name": "m"}, "spec": spec})
        assert parsed.files[0].mode == normal


def test_selector_and_weight():
    cs = ConfigSet.from_dict(
        {
            "metadata": {"name": "s"},
            "spec": {
                "weight": 5,
                "selector": {
                    "matchLabels": {"a": "1"},
                    "matchExpressions": [{"key": "b", "operator": "In", "values": ["x"]}],
                },
            },
        }
    )
    assert cs.weight == 5
    assert cs.selector.match_labels == (("a", "1"),)
    assert cs.selector.match_expressions[0].values == ("x",)


def test_bad_selector_operator_and_values():
    errors = errors_of(
        {
            "selector": {
                "matchExpressions": [
                    {"key": "a", "operator": "Has"},
                    {"key": "b", "operator": "In"},
                    {"key": "c", "operator": "Exists", "values": ["x"]},
                ]
            }
        }
    )
    assert [e.split(":")[0] for e in errors] == [
        "spec.selector.matchExpressions[0].operator",
        "spec.selector.matchExpressions[1].values",
        "spec.selector.matchExpressions[2].values",
    ]


def test_missing_name_and_wrong_kind():
    with pytest.raises(InvalidObject) as caught:
        ConfigSet.from_dict({"kind": "Secret", "metadata": {}, "spec": {}})
    assert [e.field for e in caught.value.errors] == ["metadata.name", "kind"]
