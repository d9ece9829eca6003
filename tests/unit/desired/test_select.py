import pytest

from nodemanager.api import ConfigSet
from nodemanager.desired.select import matches, select

NODE = {"kubernetes.io/os": "arch", "kubernetes.io/arch": "x86_64", "role": "web"}


def cs(name, labels=None, selector=None, weight=None):
    spec = {} if selector is None else {"selector": selector}
    if weight is not None:
        spec["weight"] = weight
    return ConfigSet.from_dict({"metadata": {"name": name, "labels": labels or {}}, "spec": spec})


def test_own_labels_all_present_and_equal():
    assert matches(cs("a", {"kubernetes.io/os": "arch"}), NODE)
    assert matches(cs("a", {"kubernetes.io/os": "arch", "role": "web"}), NODE)
    assert not matches(cs("a", {"kubernetes.io/os": "arch", "role": "db"}), NODE)
    assert not matches(cs("a", {"zone": "x"}), NODE)


def test_no_labels_and_no_selector_matches_nothing():
    assert not matches(cs("a"), NODE)


def test_selector_wins_over_own_labels():
    assert matches(cs("a", {"unrelated": "x"}, selector={"matchLabels": {"role": "web"}}), NODE)


def test_empty_selector_matches_every_node():
    assert matches(cs("a", selector={}), NODE)


def test_match_expressions():
    def expr(op, values=None, key="role"):
        e = {"key": key, "operator": op}
        if values:
            e["values"] = values
        return cs("a", selector={"matchExpressions": [e]})

    assert matches(expr("In", ["web", "db"]), NODE)
    assert not matches(expr("In", ["db"]), NODE)
    assert matches(expr("NotIn", ["db"]), NODE)
    assert not matches(expr("NotIn", ["web"]), NODE)
    assert matches(expr("NotIn", ["x"], key="absent"), NODE)
    assert matches(expr("Exists"), NODE)
    assert not matches(expr("Exists", key="absent"), NODE)
    assert matches(expr("DoesNotExist", key="absent"), NODE)
    assert not matches(expr("DoesNotExist"), NODE)


def test_order_is_weight_then_name():
    chosen = select(
        [
            cs("b", selector={}),
            cs("a", selector={}),
            cs("z", selector={}, weight=10),
            cs("skip", {"role": "db"}),
        ],
        NODE,
    )
    assert [c.name for c in chosen] == ["z", "a", "b"]


# Labels as upstream's agent writes them (pkg/common/labels DefaultLabels: os-release ID, uname -m).
LINUX = {"kubernetes.io/os": "arch", "kubernetes.io/arch": "x86_64"}
FREEBSD = {"kubernetes.io/os": "freebsd", "kubernetes.io/arch": "amd64"}
LINUX_ARM = {"kubernetes.io/os": "alpine", "kubernetes.io/arch": "aarch64"}


@pytest.mark.parametrize(
    "selecting, selected",
    [
        ({"kubernetes.io/os": "arch"}, ["linux"]),
        ({"kubernetes.io/os": "freebsd"}, ["freebsd"]),
        ({"kubernetes.io/os": "linux"}, []),  # kubelet's word: upstream's agent never wrote it
        ({"kubernetes.io/arch": "x86_64"}, ["linux"]),
        ({"kubernetes.io/arch": "amd64"}, ["freebsd"]),  # upstream: FreeBSD's uname -m only
        ({"kubernetes.io/arch": "arm64"}, []),
        ({"kubernetes.io/arch": "aarch64"}, ["arm"]),
        ({"nodemanager.io/os": "arch"}, []),  # upstream's getting-started: inert there, here
    ],
)
def test_a_node_answers_one_value_per_label_as_upstreams_node_does(selecting, selected):
    nodes = {"linux": LINUX, "freebsd": FREEBSD, "arm": LINUX_ARM}
    by_labels = [n for n, labels in nodes.items() if matches(cs("a", selecting), labels)]
    key, value = next(iter(selecting.items()))
    expr = {"matchExpressions": [{"key": key, "operator": "In", "values": [value]}]}
    by_in = [n for n, labels in nodes.items() if matches(cs("a", selector=expr), labels)]
    assert by_labels == by_in == selected
    expr = {"matchExpressions": [{"key": key, "operator": "NotIn", "values": [value]}]}
    by_not_in = [n for n, labels in nodes.items() if matches(cs("a", selector=expr), labels)]
    assert by_not_in == [n for n in nodes if n not in selected]


def test_the_agent_labels_this_host_as_upstreams_agent_would():
    import os

    from nodemanager.host.labels import node_labels
    from nodemanager.host.osinfo import machine, read_os_release

    labels = node_labels("h1", read_os_release(), machine())
    assert labels == {
        "kubernetes.io/hostname": "h1",
        "kubernetes.io/os": read_os_release().id,  # upstream: os-release ID, lower-cased
        "kubernetes.io/arch": os.uname().machine,  # upstream: uname -m
    }


def test_missing_values_names_the_label_and_what_nodes_carry():
    from nodemanager.desired.select import explain, missing_values

    wanted = cs("a", {"kubernetes.io/os": "ubuntu", "kubernetes.io/arch": "amd64"})
    missing = missing_values(wanted, [LINUX, FREEBSD])
    assert missing == [("kubernetes.io/os", ("ubuntu",), ["arch", "freebsd"])]
    assert explain(missing) == (
        "label kubernetes.io/os=ubuntu: not carried (nodes carry: arch, freebsd)"
    )
    assert missing_values(cs("b", {"kubernetes.io/os": "arch"}), [LINUX]) == []
