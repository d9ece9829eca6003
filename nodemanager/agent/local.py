"""Local mode: ConfigSet files to a plan for this host, with no cluster.

The files become the same ``Snapshot`` the agent builds from its informers, and go through the
same ``plan_node``; ``render`` and ``apply`` share this, so ``render`` shows exactly what
``apply`` runs, and what the agent would run with the same ConfigSets.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from nodemanager.agent.identity import NodeIdentity
from nodemanager.agent.identity import identify as identify
from nodemanager.agent.plan import NodePlan, plan_node
from nodemanager.agent.sources import Loaded, load
from nodemanager.desired.merge import DesiredState
from nodemanager.playbook.build import Plan


@dataclass(frozen=True)
class LocalPlan:
    loaded: Loaded
    planned: NodePlan

    @property
    def desired(self) -> DesiredState:
        """As merged, before templates: every selected resource."""
        return self.planned.desired

    @property
    def plan(self) -> Plan:
        return self.planned.plan

    @property
    def errors(self) -> Mapping[str, str]:
        """Resource id -> why it is not in the plan (template, platform)."""
        return self.planned.errors

    @property
    def load_errors(self) -> list[str]:
        """Unreadable files and invalid ConfigSets (every one: local mode is explicit)."""
        invalid = [f"{bad.origin}: {bad.message}" for bad in self.planned.invalid]
        return self.loaded.errors + invalid


def plan_files(paths: Iterable[str], node: NodeIdentity, *, show_secrets: bool = True) -> LocalPlan:
    """Templates see this node and the Secrets and ConfigMaps given as files; no other nodes."""
    loaded = load(paths, {"metadata": {"name": node.name, "labels": dict(node.labels)}})
    return LocalPlan(loaded, plan_node(loaded.snapshot, node, show_secrets=show_secrets))
