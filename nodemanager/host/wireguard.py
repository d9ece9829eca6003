"""WireGuard interfaces from `wg show all dump`: name, public key, listen port. Never the
private key: it is dropped while parsing and not kept anywhere."""

from __future__ import annotations

import shutil
import subprocess
from typing import Any


def parse_wg_dump(text: str) -> list[dict[str, Any]]:
    interfaces = []
    for line in text.splitlines():
        fields = line.split("\t")
        # Interface lines have 5 fields (name, private key, public key, port, fwmark); peers have 9.
        if len(fields) == 5:
            name, _private, public, port = fields[:4]
            interfaces.append(
                {
                    "name": name,
                    "publicKey": public,
                    "listenPort": int(port) if port.isdigit() else 0,
                }
            )
    return sorted(interfaces, key=lambda i: i["name"])


def wireguard() -> list[dict[str, Any]]:
    if not shutil.which("wg"):
        return []
    proc = subprocess.run(["wg", "show", "all", "dump"], capture_output=True, text=True)
    return parse_wg_dump(proc.stdout) if proc.returncode == 0 else []
