"""Upstream's notify annotation key, nodemanager.io/notify-<configset>."""

from __future__ import annotations

from nodemanager.api.labels import key_problem
from nodemanager.kube.notify import notify_key


def test_upstreams_key_for_a_short_name():
    assert notify_key("web") == "nodemanager.io/notify-web"


def test_a_long_configset_name_gives_a_valid_unique_key():
    long_a, long_b = "a" * 60 + ".x", "a" * 60 + ".y"
    key_a, key_b = notify_key(long_a), notify_key(long_b)
    assert key_problem(key_a) is None
    assert key_a != key_b and len(key_a.partition("/")[2]) <= 63
