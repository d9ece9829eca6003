"""Checks on ManagedNode status data before any template sees it (pure, no I/O).

Another node's status is written by that node, so it is untrusted input: a newline in a
WireGuard key or an extra "address" would otherwise become a line in this node's files
(``AllowedIPs = 0.0.0.0/0``). The CRD schema and the admission policy refuse such writes; this
is the third lock, for a cluster whose CRD or policy is older or missing. The rules are the
schema's (crds/managednodes.yaml): IP addresses of the right family, interface names, base64
32-byte keys, ports, SSHFP numbers and hex digests, and no control character in any string.
An invalid entry is dropped, the rest of the node stays.
"""

from __future__ import annotations

import base64
import binascii
import ipaddress
import json
import re
from collections.abc import Mapping
from typing import Any

IFNAME = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.:@-]{0,14}")
# A ControllerRevision name (a DNS subdomain) and an RFC 3339 time as Kubernetes writes it
# (upper-case T and Z: Go's time.Parse, the controller's parser, refuses lower case).
REVISION_RE2 = r"^[a-z0-9]([-a-z0-9.]{0,251}[a-z0-9])?$"
TIMESTAMP_RE2 = (
    r"^[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}:[0-9]{2}(\.[0-9]{1,9})?"
    r"(Z|[+-][0-9]{2}:[0-9]{2})$"
)
REVISION, TIMESTAMP = re.compile(REVISION_RE2), re.compile(TIMESTAMP_RE2)
HEX = {1: re.compile(r"[0-9a-f]{40}"), 2: re.compile(r"[0-9a-f]{64}")}
SSHFP_ALGORITHMS = (1, 2, 3, 4, 6)
_WG_KEY = re.compile(r"[A-Za-z0-9+/]{43}=")

# One rule for every string a node writes, in all three locks: Unicode's control characters
# (Cc: C0, DEL, C1 with U+0085 NEXT LINE) and its line and paragraph separators (Zl U+2028,
# Zp U+2029), since YAML and many template consumers break lines at each of them. Python spells
# the set out; the CRD schema and the admission policy use RE2's classes (NO_CONTROL_RE2), and a
# test checks the two agree on every code point.
_CONTROL = re.compile("[\x00-\x1f\x7f-\x9f\u2028\u2029]")
NO_CONTROL_RE2 = r"^[^\p{Cc}\p{Zl}\p{Zp}]*$"
# Bounds the schema sets on node-written status (crds/managednodes.yaml); beyond them a peer's
# whole status is dropped, so no node can make every agent that reads `nodes` hold megabytes.
MAX_STATUS_BYTES = 256 * 1024
MAX_ERROR = 1024
MAX_CONFLICTS = 16
MAX_CONFIGSETS = 256
MAX_MESSAGE = 4096


def has_control(text: str) -> bool:
    return bool(_CONTROL.search(text))


def printable(value: Any) -> Any:
    """``value`` with every control character in every string replaced by a space.

    For the agent's own messages (Ansible errors span lines), so its status passes the schema."""
    if isinstance(value, str):
        return _CONTROL.sub(" ", value)
    if isinstance(value, Mapping):
        return {k: printable(v) for k, v in value.items()}
    if isinstance(value, list):
        return [printable(v) for v in value]
    return value


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _ip(value: Any, version: int) -> bool:
    if not isinstance(value, str):
        return False
    try:
        return ipaddress.ip_address(value).version == version
    except ValueError:
        return False


def wireguard_key(value: Any) -> bool:
    """A base64 Curve25519 key: exactly 32 bytes, canonical padding."""
    if not isinstance(value, str) or not _WG_KEY.fullmatch(value):
        return False
    try:
        raw = base64.b64decode(value, validate=True)
    except binascii.Error:
        return False
    return len(raw) == 32 and base64.b64encode(raw).decode() == value


def interface_name(value: Any) -> bool:
    return isinstance(value, str) and bool(IFNAME.fullmatch(value))


def _interfaces(raw: Any, problems: list[str]) -> dict[str, dict[str, list[str]]]:
    if not isinstance(raw, Mapping):
        problems.append("status.interfaces: not a map")
        return {}
    out: dict[str, dict[str, list[str]]] = {}
    for name, entry in raw.items():
        if not interface_name(name):
            problems.append(f"status.interfaces[{name!r}]: not an interface name")
            continue
        if not isinstance(entry, Mapping):
            problems.append(f"status.interfaces.{name}: not a map")
            continue
        clean: dict[str, list[str]] = {}
        for family, version in (("ipv4", 4), ("ipv6", 6)):
            addresses = entry.get(family) or []
            if not isinstance(addresses, list):
                problems.append(f"status.interfaces.{name}.{family}: not a list")
                continue
            clean[family] = []
            for i, a in enumerate(addresses):
                if _ip(a, version):
                    clean[family].append(a)
                else:
                    problems.append(f"status.interfaces.{name}.{family}[{i}]: not an IPv{version}")
        out[name] = clean
    return out


def _wireguard(raw: Any, problems: list[str]) -> list[dict[str, Any]]:
    if not isinstance(raw, list):
        problems.append("status.wireGuard: not a list")
        return []
    out = []
    for i, w in enumerate(raw):
        where = f"status.wireGuard[{i}]"
        if not isinstance(w, Mapping):
            problems.append(f"{where}: not an object")
        elif not interface_name(w.get("name")):
            problems.append(f"{where}.name: not an interface name")
        elif not wireguard_key(w.get("publicKey")):
            problems.append(f"{where}.publicKey: not a base64 32-byte key")
        elif "listenPort" in w and not (_is_int(w["listenPort"]) and 0 <= w["listenPort"] <= 65535):
            problems.append(f"{where}.listenPort: not a port")
        else:
            out.append({k: w[k] for k in ("name", "publicKey", "listenPort") if k in w})
    return out


def _ssh_keys(raw: Any, problems: list[str]) -> list[dict[str, Any]]:
    if not isinstance(raw, list):
        problems.append("status.sshHostKeys: not a list")
        return []
    out = []
    for i, h in enumerate(raw):
        where = f"status.sshHostKeys[{i}]"
        if not isinstance(h, Mapping):
            problems.append(f"{where}: not an object")
        elif h.get("algorithm") not in SSHFP_ALGORITHMS or not _is_int(h.get("algorithm")):
            problems.append(f"{where}.algorithm: not an SSHFP algorithm number")
        elif not _is_int(h.get("fingerprintType")) or h.get("fingerprintType") not in HEX:
            problems.append(f"{where}.fingerprintType: not an SSHFP type number")
        elif not isinstance(h.get("fingerprint"), str) or not HEX[h["fingerprintType"]].fullmatch(
            h["fingerprint"]
        ):
            problems.append(f"{where}.fingerprint: not a hex digest of its type")
        else:
            out.append({k: h[k] for k in ("algorithm", "fingerprintType", "fingerprint")})
    return out


def _strings_clean(value: Any, where: str, problems: list[str]) -> Any:
    """``value`` without any entry that holds a control character (reported by field path)."""
    if isinstance(value, str):
        if has_control(value):
            problems.append(f"{where}: holds a control character")
            return None
        return value
    if isinstance(value, Mapping):
        out = {}
        for k, v in value.items():
            if not isinstance(k, str) or has_control(k):
                problems.append(f"{where}: a key holds a control character")
                continue
            clean = _strings_clean(v, f"{where}.{k}", problems)
            if clean is not None:
                out[k] = clean
        return out
    if isinstance(value, list):
        items = (_strings_clean(v, f"{where}[{i}]", problems) for i, v in enumerate(value))
        return [v for v in items if v is not None]
    return value


def _configsets(raw: Any, problems: list[str]) -> list[dict[str, Any]]:
    if not isinstance(raw, list):
        problems.append("status.configsets: not a list")
        return []
    out = []
    for i, entry in enumerate(raw):
        where = f"status.configsets[{i}]"
        if not isinstance(entry, Mapping):
            problems.append(f"{where}: not an object")
        elif "revision" in entry and not _matches(REVISION, entry["revision"]):
            problems.append(f"{where}.revision: not a ControllerRevision name")
        elif "lastApplied" in entry and not _matches(TIMESTAMP, entry["lastApplied"]):
            problems.append(f"{where}.lastApplied: not an RFC 3339 time")
        else:
            clean = _strings_clean(entry, where, problems)
            out.append(clean)
    return out


def _matches(pattern: re.Pattern[str], value: Any) -> bool:
    return isinstance(value, str) and bool(pattern.fullmatch(value))


_TYPED = {
    "interfaces": _interfaces,
    "wireGuard": _wireguard,
    "sshHostKeys": _ssh_keys,
    "configsets": _configsets,
}


def within_bounds(status: Mapping[str, Any]) -> dict[str, Any]:
    """This agent's own status cut to the schema's bounds: an Ansible error of 50 KB or a
    hundred conflicts must not make the whole status write fail."""
    out = dict(status)
    entries = []
    for entry in out.get("configsets") or []:
        entry = dict(entry)
        if len(entry.get("error") or "") > MAX_ERROR:
            entry["error"] = entry["error"][: MAX_ERROR - 1] + "…"
        if "conflicts" in entry:
            entry["conflicts"] = list(entry["conflicts"])[:MAX_CONFLICTS]
        entries.append(entry)
    if "configsets" in out:
        out["configsets"] = entries
    return out


def clean_status(status: Any) -> tuple[dict[str, Any], list[str]]:
    """(``status`` without its invalid entries, one problem per dropped entry with its path)."""
    problems: list[str] = []
    if not isinstance(status, Mapping):
        return {}, (["status: not an object"] if status is not None else [])
    size = len(json.dumps(status, ensure_ascii=False, default=str).encode())
    if size > MAX_STATUS_BYTES:
        return {}, [f"status: {size} bytes, more than {MAX_STATUS_BYTES}"]
    out: dict[str, Any] = {}
    for key, value in status.items():
        if key in _TYPED:
            out[key] = _TYPED[key](value, problems)
        else:
            clean = _strings_clean(value, f"status.{key}", problems)
            if clean is not None:
                out[key] = clean
    return out, problems
