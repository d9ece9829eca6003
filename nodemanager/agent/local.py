"""Local mode: the pipeline from ConfigSet files to a plan for this host, with no cluster.

``render`` and ``apply`` share it, so ``render`` shows exactly what ``apply`` runs.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from nodemanager.agent.sources import Loaded, load
from nodemanager.api import Node
from nodemanager.desired.merge import DesiredState, merge
from nodemanager.desired.select import select
from nodemanager.desired.templates import TemplateData, render_templates
from nodemanager.host import labels as host_labels
from nodemanager.host import osinfo
from nodemanager.playbook import platforms
from nodemanager.playbook.build import Plan, build


@dataclass(frozen=True)
class NodeIdentity:
    """Who this host is for selection: its name, labels and platform family."""

    name: str
    labels: Mapping[str, str]
    family: str


def identify(
    hostname: str | None = None, os_id: str | None = None, custom: Mapping[str, str] | None = None
) -> NodeIdentity:
    """This host's identity; ``os_id`` pretends another OS (``render --os arch`` on Debian)."""
    release = osinfo.read_os_release()
    if os_id:
        release = osinfo.OsRelease(id=os_id, version_id="", pretty_name=os_id, id_like=())
    name = hostname or host_labels.hostname()
    system = "freebsd" if release.id == "freebsd" else osinfo.kube_os()
    node_labels = host_labels.node_labels(name, release, osinfo.kube_arch(), system, custom or {})
    return NodeIdentity(
        name, node_labels, platforms.family_or_unsupported(release.id, release.id_like)
    )


@dataclass(frozen=True)
class LocalPlan:
    loaded: Loaded
    desired: DesiredState  # as merged, before templates: every selected resource
    plan: Plan
    errors: Mapping[str, str]  # resource id -> why it is not in the plan (template, platform)


def plan_files(paths: Iterable[str], node: NodeIdentity, *, show_secrets: bool = True) -> LocalPlan:
    """Templates see this node and the Secrets and ConfigMaps given as files; no other nodes."""
    loaded = load(paths)
    merged = merge(select(loaded.configsets, node.labels))
    data = TemplateData(
        Node(node.name, node.labels), secrets=loaded.secrets, configmaps=loaded.configmaps
    )
    desired, contents, failures = render_templates(merged, data)
    plan = build(desired, node.family, node.name, contents=contents, show_secrets=show_secrets)
    return LocalPlan(loaded, merged, plan, {**failures, **plan.errors})
