"""Network interfaces and their addresses: IPv4 and global-scope IPv6, loopback excluded."""

from __future__ import annotations

import ipaddress
import json
import re
import shutil
import subprocess
from collections.abc import Set as AbstractSet


def _keep(address: str) -> bool:
    ip = ipaddress.ip_address(address.split("%")[0])
    return not (ip.is_loopback or ip.is_link_local or ip.is_multicast or ip.is_unspecified)


def _add(out: dict[str, dict[str, list[str]]], name: str, address: str) -> None:
    if not _keep(address):
        return
    family = "ipv6" if ":" in address else "ipv4"
    entry = out.setdefault(name, {"ipv4": [], "ipv6": []})
    if address not in entry[family]:
        entry[family].append(address)


def _sorted(out: dict[str, dict[str, list[str]]]) -> dict[str, dict[str, list[str]]]:
    return {
        name: {k: sorted(v, key=ipaddress.ip_address) for k, v in fams.items()}
        for name, fams in sorted(out.items())
    }


def parse_ip_json(text: str) -> dict[str, dict[str, list[str]]]:
    """Parse `ip -j addr` (iproute2) output."""
    out: dict[str, dict[str, list[str]]] = {}
    for link in json.loads(text or "[]"):
        if "LOOPBACK" in link.get("flags", []):
            continue
        for addr in link.get("addr_info", []):
            if addr.get("family") in ("inet", "inet6") and addr.get("scope", "global") in (
                "global",
                "site",
            ):
                _add(out, link["ifname"], addr["local"])
    return _sorted(out)


_IFACE = re.compile(r"^(\S+?):? flags=")
_INET = re.compile(r"^\s+inet6?\s+(\S+)")


def parse_ifconfig(text: str) -> dict[str, dict[str, list[str]]]:
    """Parse FreeBSD `ifconfig` output."""
    out: dict[str, dict[str, list[str]]] = {}
    name = None
    for line in text.splitlines():
        m = _IFACE.match(line)
        if m:
            name = m.group(1)
            continue
        m = _INET.match(line)
        if m and name and not name.startswith("lo"):
            _add(out, name, m.group(1))
    return _sorted(out)


def parse_if_inet6(
    text: str, skip: AbstractSet[str] = frozenset()
) -> dict[str, dict[str, list[str]]]:
    """Parse Linux /proc/net/if_inet6 (address, index, prefix, scope, flags, name): global scope
    (00) only, interfaces in ``skip`` left out."""
    out: dict[str, dict[str, list[str]]] = {}
    for line in text.splitlines():
        fields = line.split()
        if len(fields) != 6 or fields[3] != "00" or fields[5] in skip:
            continue
        _add(out, fields[5], str(ipaddress.IPv6Address(bytes.fromhex(fields[0]))))
    return _sorted(out)


def _linux_without_iproute2() -> dict[str, dict[str, list[str]]]:
    """Minimal Linux hosts (Debian minbase, containers) have neither `ip` nor `ifconfig`: each
    interface's primary IPv4 address from the kernel (SIOCGIFADDR), IPv6 from /proc."""
    import fcntl
    import socket
    import struct

    out: dict[str, dict[str, list[str]]] = {}
    loopback: set[str] = set()
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        for _, name in socket.if_nameindex():
            request = struct.pack("256s", name.encode()[:15])
            try:
                flags = struct.unpack("H", fcntl.ioctl(s, 0x8913, request)[16:18])[0]
                if flags & 0x8:  # IFF_LOOPBACK
                    loopback.add(name)
                    continue
                _add(out, name, socket.inet_ntoa(fcntl.ioctl(s, 0x8915, request)[20:24]))
            except OSError:  # no IPv4 address on it
                continue
    try:
        with open("/proc/net/if_inet6") as f:
            v6 = parse_if_inet6(f.read(), loopback)
    except OSError:
        v6 = {}
    for name, families in v6.items():
        for address in families["ipv6"]:
            _add(out, name, address)
    return _sorted(out)


def interfaces() -> dict[str, dict[str, list[str]]]:
    if shutil.which("ip"):
        return parse_ip_json(
            subprocess.run(["ip", "-j", "addr"], capture_output=True, text=True, check=True).stdout
        )
    if shutil.which("ifconfig"):
        return parse_ifconfig(
            subprocess.run(["ifconfig"], capture_output=True, text=True, check=True).stdout
        )
    return _linux_without_iproute2()
