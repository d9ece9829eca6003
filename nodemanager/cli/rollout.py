"""`nodemanager rollout`: staged rollouts of ConfigSets, as kubectl rollout."""

from __future__ import annotations

import sys
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

import click

from nodemanager.cli.options import F, api_options, duration, pass_down

if TYPE_CHECKING:
    from nodemanager.kube.rollouts import RolloutClient


def _configset_ref(ref: str) -> str:
    kind, _, name = ref.partition("/")
    if not name or kind.lower() not in ("configset", "configsets", "cset", "cfs"):
        raise click.BadParameter(f"{ref!r}: expected configset/NAME", param_hint="RESOURCE")
    return name


def _rollout_client(kubeconfig: str, context: str | None, namespace: str) -> RolloutClient:
    from nodemanager.kube.client import ClientFactory
    from nodemanager.kube.rollouts import RolloutClient

    return RolloutClient(ClientFactory(kubeconfig, context=context), namespace)


def _rollout_options(f: F) -> F:
    f = api_options("Kubeconfig file.")(f)
    return click.argument("resource")(f)


# `rollout status` exit codes, as documented in README "Staged rollouts".
EXIT_FAILED = 1
EXIT_PAUSED = 3
EXIT_UNFINISHED = 4  # --watch=false on a rollout in progress, or --timeout reached


@click.group()
@api_options("Kubeconfig file.")
@click.pass_context
def rollout(ctx: click.Context, /, **_: object) -> None:
    """Staged rollouts of ConfigSets with spec.rollout (like kubectl rollout)."""
    pass_down(ctx)


@rollout.command("status")
@_rollout_options
@click.option("--watch", "-w", default=True, type=bool, show_default=True)
@click.option(
    "--timeout", default="0s", show_default=True, help="Give up after this; 0 waits forever."
)
def rollout_status(
    resource: str, kubeconfig: str, context: str | None, namespace: str, watch: bool, timeout: str
) -> None:
    """Show the rollout's progress; with --watch, wait until it finished or failed.

    Exits 0 only on a finished rollout: 1 failed (a node failed, the rollout halted, or it
    exceeded its progress deadline), 3 paused, 4 unfinished (--watch=false, --timeout)."""
    import time

    from nodemanager.controller.rollout import progress

    name, deadline = _configset_ref(resource), duration(timeout, "--timeout")
    client_ = _rollout_client(kubeconfig, context, namespace)
    started, last = time.monotonic(), ""
    while True:
        cs = client_.configset(name)
        state, message = progress(cs)
        if message != last and state != "failed":
            click.echo(message)
            last = message
        if state == "done":
            return
        if state == "failed":  # as kubectl: one line naming why, exit 1
            click.echo(f"error: {message}", err=True)
            sys.exit(EXIT_FAILED)
        if state == "paused":
            held = {
                c.get("type"): c.get("reason")
                for c in (cs.get("status") or {}).get("conditions") or []
            }
            if held.get("Paused") != "PoolPaused":  # a paused pool is resumed on the pool
                click.echo(f"resume it with: nodemanager rollout resume configset/{name}", err=True)
            sys.exit(EXIT_PAUSED)
        if not watch:
            sys.exit(EXIT_UNFINISHED)
        if deadline and time.monotonic() - started > deadline:
            click.echo("error: timed out waiting for the rollout to finish", err=True)
            sys.exit(EXIT_UNFINISHED)
        time.sleep(1)


@rollout.command("history")
@_rollout_options
def rollout_history(resource: str, kubeconfig: str, context: str | None, namespace: str) -> None:
    """List the ConfigSet's revisions and which nodes run each."""
    from nodemanager.api.nodereport import parse_report
    from nodemanager.controller.rollout import CONFIGSET_LABEL

    name = _configset_ref(resource)
    client_ = _rollout_client(kubeconfig, context, namespace)
    client_.configset(name)  # a name that is not there is an error (as kubectl's), not no revisions
    revisions = client_.revisions(name, CONFIGSET_LABEL)
    running: dict[str, list[str]] = {}
    for node in client_.nodes():
        report = parse_report(node)
        entry = report.entries.get(name)
        if entry is not None and entry.revision:
            running.setdefault(entry.revision, []).append(report.name)
    click.echo(f"configset/{name}")
    click.echo(f"{'REVISION':<10}{'NAME':<32}NODES")
    for r in sorted(revisions, key=lambda r: int(r.get("revision") or 0)):
        nodes = ",".join(sorted(running.get(r["metadata"]["name"], [])))
        click.echo(f"{r.get('revision', 0):<10}{r['metadata']['name']:<32}{nodes}")


def _set_paused(
    resource: str, kubeconfig: str, context: str | None, namespace: str, paused: bool
) -> None:
    name = _configset_ref(resource)
    _rollout_client(kubeconfig, context, namespace).set_paused(name, paused)
    click.echo(f"configset/{name} {'paused' if paused else 'resumed'}")


@rollout.command("pause")
@_rollout_options
def rollout_pause(resource: str, kubeconfig: str, context: str | None, namespace: str) -> None:
    """Stop admitting nodes to new revisions (spec.paused: true)."""
    _set_paused(resource, kubeconfig, context, namespace, True)


@rollout.command("resume")
@_rollout_options
def rollout_resume(resource: str, kubeconfig: str, context: str | None, namespace: str) -> None:
    """Admit nodes again (spec.paused: false)."""
    _set_paused(resource, kubeconfig, context, namespace, False)


@rollout.command("undo")
@_rollout_options
@click.option("--to-revision", default=0, type=int, help="Revision to go back to; 0: the previous.")
def rollout_undo(
    resource: str, kubeconfig: str, context: str | None, namespace: str, to_revision: int
) -> None:
    """Put an earlier revision's content back into the ConfigSet; the rollout then applies it."""
    from nodemanager.controller.rollout import CONFIGSET_LABEL, STEERING, revision_name, undo_target

    name = _configset_ref(resource)
    client_ = _rollout_client(kubeconfig, context, namespace)
    current = client_.configset(name)
    if not isinstance((current.get("spec") or {}).get("rollout"), dict):
        raise click.ClickException(f"configset/{name} has no spec.rollout: it keeps no revisions")
    revisions = client_.revisions(name, CONFIGSET_LABEL)
    try:
        target = undo_target(revisions, revision_name(name, current["spec"]), to_revision)
    except ValueError as e:
        raise click.ClickException(str(e)) from e
    content = (target.get("data") or {}).get("spec") or {}

    def new_spec(spec: Mapping[str, Any]) -> dict[str, Any]:
        return {**content, **{k: spec[k] for k in STEERING if k in spec}}

    client_.replace_spec(name, new_spec)
    click.echo(f"configset/{name} rolled back to revision {target.get('revision')}")
