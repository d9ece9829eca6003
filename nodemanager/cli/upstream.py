"""Upstream's agent flags (zachfi/nodemanager, Go), so an upstream unit file starts unchanged.

Go's flag package takes `-name` and `--name`, `-name=value` and `-name value`, and a bare
boolean. Each upstream flag is rewritten to ours where it has a meaning here, or dropped; the
dropped ones are named in one warning. Flags upstream does not have are left to click.
The table is README "Compatibility with upstream" in code; keep the two together."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

import click


@dataclass(frozen=True)
class Flag:
    ours: str | None  # our option, or None: accepted and ignored
    boolean: bool = False  # a Go bool: bare, or =true/false; never takes the next argument
    value: Callable[[str], str | None] | None = None  # ours' value; None: dropped after all
    why: str = ""  # why it is ignored (README)


def _log_level(text: str) -> str | None:
    level = text.lower()
    return level if level in ("debug", "info", "warn", "warning", "error") else None


def _encoder(text: str) -> str | None:
    return {"json": "json", "console": "text"}.get(text.lower())


_VALUE = Flag(None)
_BOOL = Flag(None, boolean=True)
UPSTREAM: dict[str, Flag] = {
    "kubeconfig": Flag("--kubeconfig"),
    "namespace": Flag("--namespace"),
    "metrics-bind-address": Flag("--metrics-bind-address"),
    "health-probe-bind-address": Flag("--health-probe-bind-address"),
    "leader-elect": Flag("--leader-elect", boolean=True),
    "log-level": Flag("--log-level", value=_log_level),
    "zap-log-level": Flag("--log-level", value=_log_level),
    "zap-encoder": Flag("--log-format", value=_encoder),
    "managednode.drain-timeout": Flag("--drain-timeout"),
    "configset.reconcile-period": Flag("--drift-check-interval"),
    "configset.file-bucket.max-age": Flag("--backup-max-age"),
    "configset.file-bucket.path": Flag("--filebucket-path"),
    # Accepted and ignored: no meaning here, or ours always on (README says which).
    "config.file": _VALUE,
    "config.expand-env": _BOOL,
    "config.verify": _BOOL,
    "metrics-secure": _BOOL,
    "enable-http2": _BOOL,
    "gomplate-path": _VALUE,
    "managednode.forgiveness-period": _VALUE,
    "configset.file-bucket.enabled": _BOOL,
    "configset.file-bucket.max-file-size-bytes": _VALUE,
    "locker.backoff-min-period": _VALUE,
    "locker.backoff-max-period": _VALUE,
    "locker.backoff-max-retries": _VALUE,
    "locker.lease-duration": _VALUE,
    "notification.enabled": _BOOL,
    "notification.socket-path": _VALUE,
    "freebsd.allow-in-jail": _BOOL,
    "jail.data-path": _VALUE,
    "zap-devel": _BOOL,
    "zap-stacktrace-level": _VALUE,
    "zap-time-encoding": _VALUE,
}


def _split(arg: str) -> tuple[str, str | None] | None:
    """(name, value or None) of a flag upstream has, else None."""
    if not arg.startswith("-") or arg in ("-", "--"):
        return None
    name, eq, value = arg.lstrip("-").partition("=")
    if name not in UPSTREAM:
        return None
    return name, (value if eq else None)


def translate(args: Sequence[str]) -> tuple[list[str], list[str]]:
    """(our arguments, the upstream flags dropped)."""
    out: list[str] = []
    dropped: list[str] = []
    rest = list(args)
    while rest:
        arg = rest.pop(0)
        if arg == "--":  # everything after is an argument, never a flag
            out += [arg, *rest]
            break
        found = _split(arg)
        if found is None:
            out.append(arg)
            continue
        name, value = found
        flag = UPSTREAM[name]
        if value is None and not flag.boolean and rest:
            value = rest.pop(0)
        if flag.boolean and value is None and rest and rest[0].lower() in ("true", "false"):
            value = rest.pop(0)  # click took `--leader-elect true` before; keep it working
        if flag.boolean:
            value = "true" if value is None else value
        converted = flag.value(value or "") if flag.value else value
        if flag.ours is None or converted is None:
            dropped.append(arg.partition("=")[0])
            continue
        out.append(f"{flag.ours}={converted}")
    return out, dropped


def accept(args: Sequence[str]) -> list[str]:
    """Our arguments for ``args``; one warning on stderr names the upstream flags dropped."""
    ours, dropped = translate(args)
    if dropped:
        click.echo(
            "warning: ignoring upstream nodemanager flags without a meaning here: "
            + ", ".join(dropped)
            + ' (README "Compatibility with upstream")',
            err=True,
        )
    return ours
