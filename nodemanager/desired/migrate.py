"""Upstream nodemanager's objects as this project reads them, with what changes (pure, no I/O).

``migrate`` takes the documents of upstream's YAML (or of its cluster) and returns ours plus a
report. Each note names the document and field it is about (the command turns that into a line
number) and is one of three kinds:

- ``edit``: a meaning that cannot be carried over; the object needs a hand edit (exit 1);
- ``changes``: a meaning that differs here, with no edit needed;
- ``note``: something left out or kept as upstream had it, said so it is not a surprise.

The output applies cleanly any number of times: fields the server owns (``resourceVersion``,
``uid``, ``managedFields``, ``status``...) are left out, so ``kubectl apply`` never meets a
stale resourceVersion, and the stored status stays where it is (the status subresource). A
ManagedNode keeps only the labels an administrator chose: those upstream's agent set on itself
are named in the report and left to our agent, which writes the same values (host/labels.py).
Nothing here writes: ``nodemanager migrate`` prints, the user applies.
"""

from __future__ import annotations

import copy
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

from nodemanager.desired.gomplate import translate
from nodemanager.desired.templates import unreadable

GROUP = "common.nodemanager"
UNSUPPORTED_GROUPS = ("freebsd.nodemanager",)  # jails, poudriere: not implemented here
# upstream's agent labels its ManagedNode with these (pkg/common/labels DefaultLabels)
SELF_SET = ("kubernetes.io/hostname", "kubernetes.io/os", "kubernetes.io/arch")
NEVER_WRITTEN = ("nodemanager.io/os",)  # upstream's docs show it; no agent writes it
SERVER_OWNED = (
    "resourceVersion",
    "uid",
    "managedFields",
    "creationTimestamp",
    "generation",
    "selfLink",
    "deletionTimestamp",
    "deletionGracePeriodSeconds",
)
LAST_APPLIED = "kubectl.kubernetes.io/last-applied-configuration"

Kind = Literal["edit", "changes", "note"]
Path = tuple[str | int, ...]


@dataclass(frozen=True)
class Note:
    """One report line: about input document ``doc`` at field ``path`` (and ``line`` of a
    multi-line value such as a template, 0: the field itself)."""

    kind: Kind
    doc: int
    name: str  # "ConfigSet clock"
    path: Path
    text: str
    line: int = 0

    def __str__(self) -> str:
        where = dotted(self.path)
        where = f" {where}" if where else ""
        inner = f" line {self.line}" if self.line else ""
        return f"{self.name}{where}{inner}: {self.text}"


def dotted(path: Path) -> str:
    """``("spec", "files", 0, "template")`` -> ``spec.files[0].template``."""
    out = ""
    for part in path:
        out += f"[{part}]" if isinstance(part, int) else (f".{part}" if out else part)
    return out


@dataclass
class Migrated:
    objects: list[dict[str, Any]] = field(default_factory=list)
    sources: list[int] = field(default_factory=list)  # each object's input document
    notes: list[Note] = field(default_factory=list)

    def of(self, kind: Kind) -> list[str]:
        return [str(n) for n in self.notes if n.kind == kind]

    @property
    def changes(self) -> list[str]:
        return self.of("changes")

    @property
    def flagged(self) -> list[str]:
        return self.of("edit")


class _Report:
    def __init__(self, out: Migrated, doc: int, name: str):
        self.out, self.doc, self.name = out, doc, name

    def __call__(self, kind: Kind, path: Path, text: str, line: int = 0) -> None:
        self.out.notes.append(Note(kind, self.doc, self.name, path, text, line))


def _name(doc: Mapping[str, Any]) -> str:
    return f"{doc.get('kind', '?')} {(doc.get('metadata') or {}).get('name', '?')}"


def _template(f: dict[str, Any], where: Path, report: _Report) -> None:
    """Upstream's gomplate as our Jinja2; left as it was, flagged per line, when it cannot be."""
    template = f.get("template")
    if not isinstance(template, str):
        return
    result = translate(template)
    if result.problems:
        for p in result.problems:
            line, _, why = p.partition(": ")
            number = int(line[5:]) if line.startswith("line ") and line[5:].isdigit() else 0
            report("edit", where, (why if number else p) + ": left as it was, edit by hand", number)
        return
    failing = unreadable(result.text)
    for number, why in failing:
        report("edit", where, f"translated, but it cannot render: {why}; left as it was", number)
    if failing:
        return
    if result.text != template:
        f["template"] = result.text
        report("changes", where, "gomplate translated to Jinja2")


def _mode(mode: object, where: Path, report: _Report) -> None:
    """Upstream parsed ``mode`` with Go's ParseUint(mode, 0, 32): without a leading 0 it is
    decimal ("644" is 0o1204, of which chmod keeps 0204); here it is always octal."""
    text = str(mode) if isinstance(mode, str | int) else ""
    if text.isdigit() and not text.startswith("0") and int(text) > 7:
        upstream = int(text) & 0o777
        report(
            "changes",
            where,
            f'"{text}" was decimal to upstream (mode {upstream:04o}); here it is octal '
            f"0{text}: the file's mode changes at the first apply",
        )


def _selector_notes(doc: Mapping[str, Any], report: _Report) -> None:
    spec = doc.get("spec") or {}
    selector = spec.get("selector")
    path: Path = ("metadata", "labels") if selector is None else ("spec", "selector", "matchLabels")
    selecting = (
        (doc.get("metadata") or {}).get("labels") or {}
        if selector is None
        else (selector or {}).get("matchLabels") or {}
    )
    for key in NEVER_WRITTEN:
        if key in selecting:
            report(
                "note",
                (*path, key),
                "no agent writes this label (upstream's neither, whatever its docs show): it "
                "selects no node, as on upstream; kubernetes.io/os carries the os-release ID",
            )


def _configset(doc: dict[str, Any], report: _Report) -> None:
    spec = doc.get("spec") or {}
    for i, f in enumerate(spec.get("files") or []):
        if isinstance(f, dict):
            _template(f, ("spec", "files", i, "template"), report)
            _mode(f.get("mode"), ("spec", "files", i, "mode"), report)
        refs = (f or {}).get("secretRefs") or [] if isinstance(f, dict) else []
        for j, ref in enumerate(refs):
            if isinstance(ref, str) and "{{" in ref:
                report(
                    "edit",
                    ("spec", "files", i, "secretRefs", j),
                    "upstream rendered a Secret's name as a template; here it is a name: "
                    "write one entry per Secret",
                )
    for i, p in enumerate(spec.get("packages") or []):
        if isinstance(p, dict) and not p.get("ensure"):
            report(
                "changes",
                ("spec", "packages", i),
                f"{p.get('name')} has no ensure, which means installed here; upstream "
                "reported an error and did nothing",
            )
    for i, e in enumerate(spec.get("executions") or []):
        if isinstance(e, dict) and not e.get("subscribe_files"):
            report(
                "changes",
                ("spec", "executions", i),
                "no subscribe_files, so it never runs (as upstream); add onEveryApply: true "
                "to run it at every apply",
            )
    if spec.get("notifies"):
        report(
            "changes",
            ("spec", "notifies"),
            "targets get nodemanager.io/notify-<configset>: <generation> as upstream; the "
            "agent's --notify-on-change adds notified-at/-by on every change",
        )
    _selector_notes(doc, report)


def _managednode(doc: dict[str, Any], report: _Report) -> None:
    spec = doc.get("spec") or {}
    meta = doc.get("metadata") or {}
    labels = meta.get("labels") or {}
    for key in SELF_SET:
        if key in labels:
            report(
                "note",
                ("metadata", "labels", key),
                f"{labels[key]!r} was set by upstream's agent on itself: left out, so it "
                "does not count as an administrator's; our agent writes the same value",
            )
            del labels[key]
    if "labels" in meta and not labels:
        del meta["labels"]
    upgrade = spec.get("upgrade") or {}
    if upgrade.get("schedule") and not upgrade.get("delay"):
        report(
            "changes",
            ("spec", "upgrade"),
            'no delay, so no upgrade (as upstream); the Upgrading condition says so; "0" '
            "means no delay",
        )
    wg = spec.get("wireGuard") or {}
    if wg.get("enabled"):
        iface = wg.get("interface") or "wg0"
        node = meta.get("name", "NODE")
        report(
            "changes",
            ("spec", "wireGuard"),
            f"the private key moves to the host: the agent adopts the running {iface}'s key, "
            f"else Secret wg-{iface}-{node} once (grant it with `nodemanager rbac --hostname "
            f"{node} --upstream-wireguard {iface}`), else makes a new one: then put the old "
            f"one in <state-dir>/wireguard/{iface}.key (0600) before it starts",
        )
    status = doc.get("status") or {}
    if status.get("kubernetesNodeCordoned"):
        report("changes", (), "upstream's cordon is adopted; the agent uncordons the Node")


def _applicable(doc: dict[str, Any]) -> None:
    """Without the fields the server owns: applied again, it never conflicts; status stays."""
    meta = doc.get("metadata") or {}
    for key in SERVER_OWNED:
        meta.pop(key, None)
    annotations = meta.get("annotations") or {}
    annotations.pop(LAST_APPLIED, None)
    if "annotations" in meta and not annotations:
        del meta["annotations"]
    doc.pop("status", None)


def migrate(docs: Iterable[Mapping[str, Any]]) -> Migrated:
    """Ours for upstream's ``docs`` (copies; the input is left alone), with the report. Notes
    refer to ``docs`` by position; ``sources`` maps each output object back."""
    out = Migrated()
    for index, raw in enumerate(docs):
        if not isinstance(raw, Mapping):
            continue
        doc = copy.deepcopy(dict(raw))
        report = _Report(out, index, _name(doc))
        group = str(doc.get("apiVersion", "")).partition("/")[0]
        if group in UNSUPPORTED_GROUPS:
            report("edit", (), f"({doc['apiVersion']}): not implemented here; left out")
            continue
        if group == GROUP and doc.get("kind") == "ConfigSet":
            _configset(doc, report)
        elif group == GROUP and doc.get("kind") == "ManagedNode":
            _managednode(doc, report)
        _applicable(doc)
        out.objects.append(doc)
        out.sources.append(index)
    return out
