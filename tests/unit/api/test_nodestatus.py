"""Another node's status is untrusted input: invalid entries are dropped, each named by path."""

from __future__ import annotations

import base64
import json
import unicodedata
from pathlib import Path

import pytest
import yaml

from nodemanager.api.nodestatus import (
    MAX_CONFLICTS,
    MAX_ERROR,
    MAX_STATUS_BYTES,
    NO_CONTROL_RE2,
    clean_status,
    has_control,
    printable,
    wireguard_key,
    within_bounds,
)

ROOT = Path(__file__).resolve().parents[3]

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


def test_the_control_rule_is_unicodes_cc_zl_and_zp_on_every_code_point():
    # the CRD and the policy say \p{Cc}\p{Zl}\p{Zp} (RE2): the agent's set must be the same
    for code in range(0x110000):
        char = chr(code)
        assert has_control(char) == (unicodedata.category(char) in ("Cc", "Zl", "Zp")), hex(code)


@pytest.mark.parametrize("line_break", ["\u0085", "\u2028", "\u2029", "\x9b"])
def test_unicode_line_breaks_are_dropped_from_peers_and_replaced_in_own_messages(line_break):
    clean, problems = clean_status({"release": f"Arch{line_break}admin: true", "agentVersion": "1"})
    assert clean == {"agentVersion": "1"}
    assert problems == ["status.release: holds a control character"]
    assert printable(f"a{line_break}b") == "a b"


def test_a_configset_entry_with_a_bad_revision_or_time_is_dropped_alone():
    good = {"name": "ok", "revision": "ok-5d8f", "lastApplied": "2030-01-01T00:00:00Z"}
    clean, problems = clean_status(
        {
            "configsets": [
                good,
                {"name": "r", "revision": "r-1\nadmin: true"},
                {"name": "t", "lastApplied": "2030-01-01t00:00:00z"},
            ]
        }
    )
    assert clean == {"configsets": [good]}
    assert problems == [
        "status.configsets[1].revision: not a ControllerRevision name",
        "status.configsets[2].lastApplied: not an RFC 3339 time",
    ]


def test_a_status_past_the_size_bound_is_dropped_whole():
    status = {"release": "x" * MAX_STATUS_BYTES}
    clean, problems = clean_status(status)
    assert clean == {}
    size = len(json.dumps(status))
    assert problems == [f"status: {size} bytes, more than {MAX_STATUS_BYTES}"]


def test_own_status_is_cut_to_the_schemas_bounds():
    status = {
        "configsets": [
            {"name": "a", "error": "e" * 5000, "conflicts": [f"file:/{i}" for i in range(40)]}
        ]
    }
    entry = within_bounds(status)["configsets"][0]
    assert len(entry["error"]) == MAX_ERROR and entry["error"].endswith("…")
    assert entry["conflicts"] == [f"file:/{i}" for i in range(MAX_CONFLICTS)]
    assert status["configsets"][0]["error"] == "e" * 5000  # the input is left as it was


def _strings(schema: dict, path: str):
    if schema.get("type") == "string":
        yield path, schema
    for key, sub in (schema.get("properties") or {}).items():
        yield from _strings(sub, f"{path}.{key}")
    for key in ("items", "additionalProperties"):
        if isinstance(schema.get(key), dict):
            yield from _strings(schema[key], f"{path}[]")


def test_every_string_a_node_writes_has_a_pattern_and_a_bound_in_the_crd():
    crd = yaml.safe_load((ROOT / "crds" / "managednodes.yaml").read_text())
    for version in crd["spec"]["versions"]:
        status = version["schema"]["openAPIV3Schema"]["properties"]["status"]
        strings = dict(_strings(status, "status"))
        assert strings
        for path, schema in strings.items():
            if "enum" in schema:
                continue
            assert "pattern" in schema, path
            assert "maxLength" in schema or schema.get("format") == "date-time", path
            if schema["pattern"].startswith("^[^"):  # free text: the one rule
                assert schema["pattern"] == NO_CONTROL_RE2, path
