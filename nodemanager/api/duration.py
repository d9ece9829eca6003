"""Durations as Kubernetes writes them (Go's time.ParseDuration).

Examples: "30m", "1h30m", "1.5h", "250ms"."""

from __future__ import annotations

import re

# The longest a node holds a Lease: an upgrade's reboot (agent/upgrade.py REBOOT_LEASE). The
# admission policy refuses a longer one from a node, and lock takers never wait longer.
MAX_LEASE_SECONDS = 1800

_UNITS = {"ns": 1e-9, "us": 1e-6, "µs": 1e-6, "ms": 1e-3, "s": 1.0, "m": 60.0, "h": 3600.0}
_PART = re.compile(
    r"(\d+(?:\.\d+)?)(ns|us|µs|ms|s|m|h)"
)  # longer units first: "ms" is not "m" + "s"


def parse_duration(text: str) -> float:
    """Seconds in ``text``; ValueError naming the text when it is not a duration."""
    if text == "0":  # Go accepts a bare zero too
        return 0.0
    parts = _PART.findall(text)
    if not parts or "".join(n + u for n, u in parts) != text:
        raise ValueError(f"{text!r} is not a duration such as 30m, 1h30m or 45s")
    return sum(float(n) * _UNITS[u] for n, u in parts)
