"""The host parsers on captured tool output: FreeBSD ifconfig, iproute2, `wg`, SSH keys."""

import base64
import hashlib
import json
import os

from nodemanager.host.interfaces import parse_ifconfig, parse_ip_json
from nodemanager.host.osinfo import from_fields, machine, read_os_release
from nodemanager.host.sshkeys import sshfp
from nodemanager.host.wireguard import parse_wg_dump

FREEBSD_IFCONFIG = """\
vtnet0: flags=8863<UP,BROADCAST,RUNNING,SIMPLEX,MULTICAST> metric 0 mtu 1500
\toptions=4c07bb<RXCSUM,TXCSUM,VLAN_MTU,VLAN_HWTAGGING,JUMBO_MTU,VLAN_HWCSUM,TSO4>
\tether 52:54:00:12:34:56
\tinet 192.0.2.10 netmask 0xffffff00 broadcast 192.0.2.255
\tinet 192.0.2.11 netmask 0xffffffff broadcast 192.0.2.11
\tinet6 fe80::5054:ff:fe12:3456%vtnet0 prefixlen 64 scopeid 0x1
\tinet6 2001:db8::10 prefixlen 64
\tmedia: Ethernet autoselect (10Gbase-T <full-duplex>)
\tstatus: active
lo0: flags=8049<UP,LOOPBACK,RUNNING,MULTICAST> metric 0 mtu 16384
\tinet 127.0.0.1 netmask 0xff000000
\tinet6 ::1 prefixlen 128
wg0: flags=80c1<UP,RUNNING,NOARP,MULTICAST> metric 0 mtu 1420
\tinet 10.10.0.1 netmask 0xffffff00
"""


def test_freebsd_ifconfig_keeps_global_addresses_per_interface_without_loopback():
    assert parse_ifconfig(FREEBSD_IFCONFIG) == {
        "vtnet0": {"ipv4": ["192.0.2.10", "192.0.2.11"], "ipv6": ["2001:db8::10"]},
        "wg0": {"ipv4": ["10.10.0.1"], "ipv6": []},
    }


def test_ip_json_skips_loopback_link_local_and_host_scope():
    links = [
        {"ifname": "lo", "flags": ["LOOPBACK", "UP"], "addr_info": [
            {"family": "inet", "local": "127.0.0.1", "scope": "host"}]},
        {"ifname": "eth0", "flags": ["UP"], "addr_info": [
            {"family": "inet", "local": "10.0.0.2", "scope": "global"},
            {"family": "inet6", "local": "fe80::1", "scope": "link"},
            {"family": "inet6", "local": "fd00::2", "scope": "global"},
        ]},
    ]  # fmt: skip
    assert parse_ip_json(json.dumps(links)) == {"eth0": {"ipv4": ["10.0.0.2"], "ipv6": ["fd00::2"]}}


PRIVATE = "yAnz5TF+lXXJte14tji3zlMNq+hd2rYUIgJBgB3fBmk="
PUBLIC = "xTIBA5rboUvnH4htodjb6e697QjLERt1NAB4mZqp8Dg="
PEER = "TrMvSoP4jYQlY6RIzBgbssQqY3vxI2Pi+y71lOWWXX0="


def test_wg_dump_keeps_name_public_key_and_port_and_never_the_private_key():
    peer = [PEER, "(none)", "192.0.2.1:51820", "10.10.0.2/32", "0", "0", "0", "off"]
    dump = "\n".join(
        [
            "\t".join(["wg0", PRIVATE, PUBLIC, "51820", "off"]),
            "\t".join(["wg0", *peer]),
            "\t".join(["wg1", PRIVATE, PUBLIC, "0", "off"]),
        ]
    )
    parsed = parse_wg_dump(dump)
    assert parsed == [
        {"name": "wg0", "publicKey": PUBLIC, "listenPort": 51820},
        {"name": "wg1", "publicKey": PUBLIC, "listenPort": 0},
    ]
    assert PRIVATE not in json.dumps(parsed)


def test_sshfp_entries_are_sha1_and_sha256_of_the_key_blob():
    blob = b"\x00\x00\x00\x0bssh-ed25519" + bytes(range(36))
    line = f"ssh-ed25519 {base64.b64encode(blob).decode()} root@host"
    assert sshfp(line) == [
        {"algorithm": 4, "fingerprintType": 1, "fingerprint": hashlib.sha1(blob).hexdigest()},
        {"algorithm": 4, "fingerprintType": 2, "fingerprint": hashlib.sha256(blob).hexdigest()},
    ]
    assert sshfp("ssh-unknown AAAA") == []


def test_os_release_fields_and_this_hosts_release():
    release = from_fields({"ID": "Ubuntu", "VERSION_ID": "24.04", "ID_LIKE": "debian"})
    assert (release.id, release.version_id, release.id_like) == ("ubuntu", "24.04", ("debian",))
    assert from_fields({}).id == "linux"
    assert read_os_release().id  # this host has one (platform.freedesktop_os_release)


def test_machine_is_unames_as_upstreams_agent_labels_it():
    assert machine() == os.uname().machine
