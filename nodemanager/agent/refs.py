"""Which Secrets and ConfigMaps this node's ConfigSets reference, by name (pure).

The agent fetches, watches and stores only these: a node whose ConfigSets reference no Secret
holds none, in memory or in its state file. Selection is the reconciler's (desired/select.py)
over the node's labels with the managed ones on top, so both agree on what applies.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from nodemanager.api import ConfigSet, InvalidObject
from nodemanager.desired.select import select


def referenced(
    configsets: Iterable[Mapping[str, Any]], labels: Mapping[str, str]
) -> tuple[frozenset[str], frozenset[str]]:
    """(Secret names, ConfigMap names) referenced by the ConfigSets that select ``labels``."""
    parsed = []
    for raw in configsets:
        try:
            parsed.append(ConfigSet.from_dict(raw))
        except InvalidObject:
            continue  # the reconciler reports it; it applies nothing, so it needs nothing
    files = [f for cs in select(parsed, labels) for f in cs.files]
    return (
        frozenset(r.name for f in files for r in f.secret_refs),
        frozenset(r.name for f in files for r in f.configmap_refs),
    )
