"""Pressure stall information (PSI) from ``/proc/pressure/{cpu,memory,io}``.

Each file has a ``some`` line (at least one task stalled) and, for memory and io (cpu since
Linux 5.13), a ``full`` line (every non-idle task stalled), each with the share of wall time
stalled over the last 10, 60 and 300 seconds, in percent. A kernel without PSI (or booted with
``psi=0``) has no such directory: ``read_pressure`` returns None for it and callers publish
nothing rather than zeros, which would read as "no pressure".
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

PROC_PRESSURE = Path("/proc/pressure")
RESOURCES = ("cpu", "memory", "io")


@dataclass(frozen=True)
class Averages:
    """Percent of wall time stalled over 10, 60 and 300 seconds."""

    avg10: float
    avg60: float
    avg300: float


@dataclass(frozen=True)
class Pressure:
    """One resource's stall averages; ``full`` is None where the kernel has no such line."""

    resource: str
    some: Averages
    full: Averages | None


class PressureError(ValueError):
    """A pressure file that is not in the kernel's format (path and line in the message)."""


def parse(resource: str, text: str, path: str = "") -> Pressure:
    """A Pressure from the text of one ``/proc/pressure/<resource>`` file."""
    lines: dict[str, Averages] = {}
    for line in text.splitlines():
        kind, _, rest = line.partition(" ")
        try:
            fields = dict(f.split("=", 1) for f in rest.split())
            lines[kind] = Averages(
                float(fields["avg10"]), float(fields["avg60"]), float(fields["avg300"])
            )
        except (KeyError, ValueError) as e:
            raise PressureError(f"{path or resource}: not a PSI line: {line!r}") from e
    if "some" not in lines:
        raise PressureError(f"{path or resource}: no 'some' line")
    return Pressure(resource, lines["some"], lines.get("full"))


def read_pressure(directory: Path = PROC_PRESSURE) -> dict[str, Pressure] | None:
    """Every resource's pressure under ``directory``; None when the kernel has no PSI."""
    if not directory.is_dir():
        return None
    found: dict[str, Pressure] = {}
    for resource in RESOURCES:
        path = directory / resource
        try:
            text = path.read_text()
        except FileNotFoundError:
            continue
        except OSError as e:  # psi=0: the files exist but reading them fails (EOPNOTSUPP)
            raise PressureError(f"{path}: {e.strerror or e}") from e
        found[resource] = parse(resource, text, str(path))
    return found or None
