"""Another node's status is untrusted input: invalid entries are dropped, each named by path."""

from __future__ import annotations

import base64

from nodemanager.api.nodestatus import clean_status, printable, wireguard_key

KEY = base64.b64encode(bytes(range(32))).decode()


def test_well_formed_status_passes_unchanged():
    status = {
        "release": "Arch Linux",
        "interfaces": {"eth0": {"ipv4": ["10.0.0.5"], "ipv6": ["2001:db8::5"]}},
        "wireGuard": [{"name": "wg0", "publicKey": KEY, "listenPort": 51820}],
        "sshHostKeys": [{"algorithm": 4, "fingerprintType": 2, "fingerprint": "ab" * 32}],
        "configsets": [{"name": "a", "error": ""}],
    }
    assert clean_status(status) == (status, [])


def test_injected_lines_and_addresses_are_dropped_with_their_field_path():
    status = {
        "release": "Arch\n10.66.66.66 kubernetes.default.svc",
        "interfaces": {
            "eth0": {"ipv4": ["10.0.0.5", "10.0.0.6 evil"], "ipv6": ["10.0.0.7"]},
            "eth0\nx": {"ipv4": ["10.0.0.8"]},
            "averyveryverylongname": {"ipv4": []},
        },
        "wireGuard": [
            {"name": "wg0", "publicKey": KEY + "\nAllowedIPs = 0.0.0.0/0", "listenPort": 1},
            {"name": "wg1", "publicKey": KEY, "listenPort": 70000},
            {"name": "wg2", "publicKey": KEY},
        ],
        "sshHostKeys": [
            {"algorithm": 4, "fingerprintType": 1, "fingerprint": "ab" * 32},
            {"algorithm": 5, "fingerprintType": 2, "fingerprint": "ab" * 32},
            {"algorithm": 1, "fingerprintType": 1, "fingerprint": "ab" * 20},
        ],
    }
    clean, problems = clean_status(status)
    assert "release" not in clean
    assert clean["interfaces"] == {"eth0": {"ipv4": ["10.0.0.5"], "ipv6": []}}
    assert clean["wireGuard"] == [{"name": "wg2", "publicKey": KEY}]
    assert clean["sshHostKeys"] == [
        {"algorithm": 1, "fingerprintType": 1, "fingerprint": "ab" * 20}
    ]
    assert problems == [
        "status.release: holds a control character",
        "status.interfaces.eth0.ipv4[1]: not an IPv4",
        "status.interfaces.eth0.ipv6[0]: not an IPv6",
        "status.interfaces['eth0\\nx']: not an interface name",
        "status.interfaces['averyveryverylongname']: not an interface name",
        "status.wireGuard[0].publicKey: not a base64 32-byte key",
        "status.wireGuard[1].listenPort: not a port",
        "status.sshHostKeys[0].fingerprint: not a hex digest of its type",
        "status.sshHostKeys[1].algorithm: not an SSHFP algorithm number",
    ]


def test_wireguard_keys_are_32_bytes_of_canonical_base64():
    assert wireguard_key(KEY)
    assert not wireguard_key(base64.b64encode(bytes(31)).decode())
    assert not wireguard_key(KEY[:-2] + "B=")  # non-canonical trailing bits
    assert not wireguard_key("(none)")


def test_printable_replaces_control_characters_everywhere():
    assert printable({"a": ["x\ny", {"b": "c\td"}], "n": 1}) == {"a": ["x y", {"b": "c d"}], "n": 1}
