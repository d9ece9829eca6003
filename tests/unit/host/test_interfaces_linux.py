"""Interfaces on a Linux host without iproute2 or ifconfig (Debian minbase, containers)."""

from __future__ import annotations

import shutil

from nodemanager.host import interfaces

IF_INET6 = """\
00000000000000000000000000000001 01 80 10 80       lo
fd000000000000000000000000000002 04 40 00 82     eth0
fe8000000000000000fc00fffe000001 04 40 20 80     eth0
20010db8000000000000000000000005 05 40 00 80    wg0
"""


def test_if_inet6_keeps_global_addresses_only():
    assert interfaces.parse_if_inet6(IF_INET6, {"lo"}) == {
        "eth0": {"ipv4": [], "ipv6": ["fd00::2"]},
        "wg0": {"ipv4": [], "ipv6": ["2001:db8::5"]},
    }


def test_fallback_agrees_with_iproute2_on_this_host():
    """Without `ip`, the kernel's own answer: the same interfaces and primary IPv4 addresses."""
    fallback = interfaces._linux_without_iproute2()
    assert all(not name.startswith("lo") for name in fallback)
    if shutil.which("ip"):
        with_ip = interfaces.interfaces()
        assert set(fallback) == set(with_ip)
        for name, families in fallback.items():
            assert set(families["ipv4"]) <= set(with_ip[name]["ipv4"])
            assert families["ipv6"] == with_ip[name]["ipv6"]
