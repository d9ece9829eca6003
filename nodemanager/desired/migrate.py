"""Upstream nodemanager's objects as this project reads them, with what changes (pure, no I/O).

``migrate`` takes the documents of upstream's YAML (or of its cluster) and returns ours plus a
report: each line names the object and field and says what changes in meaning, or why it needs
a hand edit. Most objects need no edit (the same API group and fields, upstream's label values
still select); gomplate templates are translated (``desired/gomplate.py``) or flagged with the
line. Nothing here writes: ``nodemanager migrate`` prints, the user applies.
"""

from __future__ import annotations

import copy
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from nodemanager.desired.gomplate import translate

GROUP = "common.nodemanager"
UNSUPPORTED_GROUPS = ("freebsd.nodemanager",)  # jails, poudriere: not implemented here
ALIASED = ("kubernetes.io/os", "kubernetes.io/arch")


@dataclass
class Migrated:
    objects: list[dict[str, Any]] = field(default_factory=list)
    changes: list[str] = field(default_factory=list)  # meanings that change (no edit needed)
    flagged: list[str] = field(default_factory=list)  # needs a hand edit


def _name(doc: Mapping[str, Any]) -> str:
    return f"{doc.get('kind', '?')} {(doc.get('metadata') or {}).get('name', '?')}"


def _looks_gomplate(text: str) -> bool:
    return "{{" in text and any(
        w in text for w in ('(ds "data")', "{{ range", "{{ end", "{{ .", "{{ $", "{{- ")
    )


def _configset(doc: dict[str, Any], out: Migrated) -> None:
    name, spec = _name(doc), doc.get("spec") or {}
    for i, f in enumerate(spec.get("files") or []):
        template = f.get("template")
        if not isinstance(template, str) or not _looks_gomplate(template):
            continue
        result = translate(template)
        where = f"{name} spec.files[{i}].template"
        if result.problems:
            out.flagged += [f"{where} {p}: left as it was, edit by hand" for p in result.problems]
        else:
            f["template"] = result.text
            out.changes.append(f"{where}: gomplate translated to Jinja2")
    for i, p in enumerate(spec.get("packages") or []):
        if not p.get("ensure"):
            out.changes.append(
                f"{name} spec.packages[{i}] ({p.get('name')}): no ensure means installed here; "
                "upstream reported an error and did nothing"
            )
    for i, e in enumerate(spec.get("executions") or []):
        if not e.get("subscribe_files"):
            out.changes.append(
                f"{name} spec.executions[{i}]: no subscribe_files, so it never runs (as "
                "upstream); add onEveryApply: true to run it at every apply"
            )
    if spec.get("notifies"):
        out.changes.append(
            f"{name} spec.notifies: targets get nodemanager.io/notify-<configset>: <generation> "
            "as upstream; the agent's --notify-on-change adds notified-at/-by on every change"
        )
    selector = spec.get("selector")
    selecting = (
        (doc.get("metadata") or {}).get("labels") or {}
        if selector is None
        else selector.get("matchLabels") or {}
    )
    for key in ALIASED:
        if key in selecting:
            out.changes.append(
                f"{name} selects {key}={selecting[key]}: the agent writes kubelet's value "
                "(linux/amd64); upstream's value still selects (an alias in selection)"
            )


def _managednode(doc: dict[str, Any], out: Migrated) -> None:
    name, spec = _name(doc), doc.get("spec") or {}
    labels = (doc.get("metadata") or {}).get("labels") or {}
    for key in ALIASED:
        if key in labels:
            out.changes.append(
                f"{name} label {key}={labels[key]}: the agent rewrites it with kubelet's value; "
                "ConfigSets selecting upstream's value still select this node"
            )
    upgrade = spec.get("upgrade") or {}
    if upgrade.get("schedule") and not upgrade.get("delay"):
        out.changes.append(
            f"{name} spec.upgrade: no delay, so no upgrade (as upstream); the Upgrading "
            'condition says so; "0" means no delay'
        )
    wg = spec.get("wireGuard") or {}
    if wg.get("enabled"):
        iface = wg.get("interface") or "wg0"
        node = (doc.get("metadata") or {}).get("name", "NODE")
        out.changes.append(
            f"{name} spec.wireGuard: the private key moves to the host: the agent adopts the "
            f"running {iface}'s key, else Secret wg-{iface}-{node} once (grant it with "
            f"`nodemanager rbac --hostname {node} --upstream-wireguard {iface}`), else makes a "
            f"new one: then put the old one in "
            f"<state-dir>/wireguard/{iface}.key (0600) before it starts"
        )
    status = doc.get("status") or {}
    if status.get("kubernetesNodeCordoned"):
        out.changes.append(f"{name}: upstream's cordon is adopted; the agent uncordons the Node")


def migrate(docs: Iterable[Mapping[str, Any]]) -> Migrated:
    """Ours for upstream's ``docs`` (copies; the input is left alone), with the report."""
    out = Migrated()
    for raw in docs:
        if not isinstance(raw, Mapping):
            continue
        doc = copy.deepcopy(dict(raw))
        group = str(doc.get("apiVersion", "")).partition("/")[0]
        if group in UNSUPPORTED_GROUPS:
            out.flagged.append(
                f"{_name(doc)} ({doc['apiVersion']}): not implemented here; left out"
            )
            continue
        if group == GROUP and doc.get("kind") == "ConfigSet":
            _configset(doc, out)
        elif group == GROUP and doc.get("kind") == "ManagedNode":
            _managednode(doc, out)
        out.objects.append(doc)
    return out
