from nodemanager.api import ConfigSet
from nodemanager.desired.select import matches, select

NODE = {"kubernetes.io/os": "linux", "nodemanager.io/os": "arch", "role": "web"}


def cs(name, labels=None, selector=None, weight=None):
    spec = {} if selector is None else {"selector": selector}
    if weight is not None:
        spec["weight"] = weight
    return ConfigSet.from_dict({"metadata": {"name": name, "labels": labels or {}}, "spec": spec})


def test_own_labels_all_present_and_equal():
    assert matches(cs("a", {"nodemanager.io/os": "arch"}), NODE)
    assert matches(cs("a", {"nodemanager.io/os": "arch", "role": "web"}), NODE)
    assert not matches(cs("a", {"nodemanager.io/os": "arch", "role": "db"}), NODE)
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


# Upstream nodemanager's label values (pkg/common/labels/labels.go: os-release ID, uname machine).
KUBE_NODE = {
    "kubernetes.io/os": "linux",
    "kubernetes.io/arch": "amd64",
    "nodemanager.io/os": "arch",
}


def test_upstream_os_and_arch_values_still_select():
    from nodemanager.desired.select import carried

    assert carried(KUBE_NODE, "kubernetes.io/os") == {"linux", "arch"}
    assert matches(cs("a", {"kubernetes.io/os": "arch"}), KUBE_NODE)
    assert matches(cs("a", {"kubernetes.io/os": "linux"}), KUBE_NODE)
    assert matches(cs("a", {"kubernetes.io/arch": "x86_64"}), KUBE_NODE)
    assert not matches(cs("a", {"kubernetes.io/arch": "aarch64"}), KUBE_NODE)
    assert not matches(cs("a", {"kubernetes.io/os": "debian"}), KUBE_NODE)
    sel = {
        "matchExpressions": [{"key": "kubernetes.io/os", "operator": "NotIn", "values": ["arch"]}]
    }
    assert not matches(cs("a", selector=sel), KUBE_NODE)
    sel = {"matchExpressions": [{"key": "kubernetes.io/os", "operator": "In", "values": ["arch"]}]}
    assert matches(cs("a", selector=sel), KUBE_NODE)


def test_a_node_labelled_by_upstream_matches_as_before():
    upstream = {"kubernetes.io/os": "arch", "kubernetes.io/arch": "x86_64"}
    assert matches(cs("a", {"kubernetes.io/os": "arch", "kubernetes.io/arch": "x86_64"}), upstream)
    assert not matches(cs("a", {"kubernetes.io/os": "linux"}), upstream)


def test_missing_values_names_the_label_and_what_nodes_carry():
    from nodemanager.desired.select import explain, missing_values

    wanted = cs("a", {"kubernetes.io/os": "ubuntu", "kubernetes.io/arch": "amd64"})
    missing = missing_values(wanted, [KUBE_NODE])
    assert missing == [("kubernetes.io/os", ("ubuntu",), ["arch", "linux"])]
    assert explain(missing) == (
        "label kubernetes.io/os=ubuntu: not carried (nodes carry: arch, linux)"
    )
    assert missing_values(cs("b", {"kubernetes.io/os": "arch"}), [KUBE_NODE]) == []
