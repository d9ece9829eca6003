"""Node identity, computed once for the agent and local mode alike."""

import pytest

from nodemanager.agent.identity import identify
from nodemanager.host.labels import parse_label_args


def test_pretending_freebsd_labels_the_node_freebsd_and_picks_its_family():
    node = identify("h1", "freebsd", {"role": "dns"})
    assert node.name == "h1" and node.family == "freebsd"
    assert node.labels["kubernetes.io/os"] == "freebsd"
    assert "nodemanager.io/os" not in node.labels  # upstream's agent never wrote it
    assert node.labels["kubernetes.io/hostname"] == "h1" and node.labels["role"] == "dns"


def test_this_host_is_identified_from_its_os_release():
    node = identify("h1")
    assert node.labels["kubernetes.io/os"] == "debian" and node.family  # os-release ID


def test_managed_labels_cannot_be_set_by_hand_and_bad_labels_are_named():
    with pytest.raises(ValueError, match="managed by nodemanager"):
        identify("h1", custom={"kubernetes.io/os": "plan9"})
    assert parse_label_args("a=1, b/c=x") == {"a": "1", "b/c": "x"}
    with pytest.raises(ValueError, match="'bad key'"):
        parse_label_args("bad key=1")
