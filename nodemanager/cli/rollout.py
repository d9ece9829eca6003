"""`nodemanager rollout`: staged rollouts of ConfigSets, as kubectl rollout."""

from __future__ import annotations

import sys
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

import click

from nodemanager.cli.options import (
    F,
    duration,
    kube_call,
    kubeconfig_option,
    namespace_option,
)

if TYPE_CHECKING:
    from nodemanager.kube.rollouts import RolloutClient


def _configset_ref(ref: str) -> str:
    kind, _, name = ref.partition("/")
    if not name or kind.lower() not in ("configset", "configsets", "cset", "cfs"):
        raise click.BadParameter(f"{ref!r}: expected configset/NAME", param_hint="RESOURCE")
    return name


def _rollout_client(kubeconfig: str, namespace: str) -> RolloutClient:
    from nodemanager.kube.client import ClientFactory
    from nodemanager.kube.rollouts import RolloutClient

    return RolloutClient(ClientFactory(kubeconfig), namespace)


def _rollout_options(f: F) -> F:
    f = namespace_option()(f)
    f = kubeconfig_option("Kubeconfig file.")(f)
    return click.argument("resource")(f)


@click.group()
def rollout() -> None:
    """Staged rollouts of ConfigSets with spec.rollout (like kubectl rollout)."""


@rollout.command("status")
@_rollout_options
@click.option("--watch", "-w", default=True, type=bool, show_default=True)
@click.option(
    "--timeout", default="0s", show_default=True, help="Give up after this; 0 waits forever."
)
def rollout_status(
    resource: str, kubeconfig: str, namespace: str, watch: bool, timeout: str
) -> None:
    """Show the rollout's progress; with --watch, wait until it finished or failed."""
    import time

    from nodemanager.controller.rollout import progress

    name, deadline = _configset_ref(resource), duration(timeout)
    client_ = _rollout_client(kubeconfig, namespace)
    started, last = time.monotonic(), ""
    while True:
        state, message = kube_call(lambda: progress(client_.configset(name)))
        if message != last:
            click.echo(message)
            last = message
        if state == "failed":
            sys.exit(1)
        if state in ("done", "paused") or not watch:
            return
        if deadline and time.monotonic() - started > deadline:
            raise click.ClickException("timed out waiting for the rollout to finish")
        time.sleep(1)


@rollout.command("history")
@_rollout_options
def rollout_history(resource: str, kubeconfig: str, namespace: str) -> None:
    """List the ConfigSet's revisions and which nodes run each."""
    from nodemanager.controller.rollout import CONFIGSET_LABEL

    name = _configset_ref(resource)
    client_ = _rollout_client(kubeconfig, namespace)
    revisions = kube_call(lambda: client_.revisions(name, CONFIGSET_LABEL))
    running: dict[str, list[str]] = {}
    for node in kube_call(client_.nodes):
        for entry in (node.get("status") or {}).get("configsets") or []:
            if entry.get("name") == name and entry.get("revision"):
                running.setdefault(entry["revision"], []).append(node["metadata"]["name"])
    click.echo(f"configset/{name}")
    click.echo(f"{'REVISION':<10}{'NAME':<32}NODES")
    for r in sorted(revisions, key=lambda r: int(r.get("revision") or 0)):
        nodes = ",".join(sorted(running.get(r["metadata"]["name"], [])))
        click.echo(f"{r.get('revision', 0):<10}{r['metadata']['name']:<32}{nodes}")


@rollout.command("pause")
@_rollout_options
def rollout_pause(resource: str, kubeconfig: str, namespace: str) -> None:
    """Stop admitting nodes to new revisions (spec.paused: true)."""
    name = _configset_ref(resource)
    kube_call(lambda: _rollout_client(kubeconfig, namespace).set_paused(name, True))
    click.echo(f"configset/{name} paused")


@rollout.command("resume")
@_rollout_options
def rollout_resume(resource: str, kubeconfig: str, namespace: str) -> None:
    """Admit nodes again (spec.paused: false)."""
    name = _configset_ref(resource)
    kube_call(lambda: _rollout_client(kubeconfig, namespace).set_paused(name, False))
    click.echo(f"configset/{name} resumed")


@rollout.command("undo")
@_rollout_options
@click.option("--to-revision", default=0, type=int, help="Revision to go back to; 0: the previous.")
def rollout_undo(resource: str, kubeconfig: str, namespace: str, to_revision: int) -> None:
    """Put an earlier revision's content back into the ConfigSet; the rollout then applies it."""
    from nodemanager.controller.rollout import CONFIGSET_LABEL, STEERING, revision_name, undo_target

    name = _configset_ref(resource)
    client_ = _rollout_client(kubeconfig, namespace)
    current = kube_call(lambda: client_.configset(name))
    if not isinstance((current.get("spec") or {}).get("rollout"), dict):
        raise click.ClickException(f"configset/{name} has no spec.rollout: it keeps no revisions")
    revisions = kube_call(lambda: client_.revisions(name, CONFIGSET_LABEL))
    try:
        target = undo_target(revisions, revision_name(name, current["spec"]), to_revision)
    except ValueError as e:
        raise click.ClickException(str(e)) from e
    content = (target.get("data") or {}).get("spec") or {}

    def new_spec(spec: Mapping[str, Any]) -> dict[str, Any]:
        return {**content, **{k: spec[k] for k in STEERING if k in spec}}

    kube_call(lambda: client_.replace_spec(name, new_spec))
    click.echo(f"configset/{name} rolled back to revision {target.get('revision')}")
