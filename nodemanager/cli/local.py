"""Local mode: `render` and `apply` ConfigSet files on this host, `restore` a backed-up file."""

from __future__ import annotations

import os
import sys
from collections.abc import Sequence
from typing import TYPE_CHECKING

import click

from nodemanager.cli.options import labels

if TYPE_CHECKING:
    from nodemanager.agent.local import LocalPlan
    from nodemanager.executor.events import TaskResult
    from nodemanager.playbook.plan import Plan


def _local_plan(
    files: Sequence[str],
    node_labels: str | None,
    os_id: str | None,
    hostname: str | None,
    show_secrets: bool,
) -> LocalPlan:
    from nodemanager.agent.local import identify, plan_files
    from nodemanager.playbook.errors import PlaybookError

    try:
        node = identify(hostname, os_id, labels(node_labels))
        local = plan_files(files, node, show_secrets=show_secrets)
    except (PlaybookError, ValueError) as e:
        raise click.ClickException(str(e)) from e
    for skipped in local.loaded.skipped:
        click.echo(f"note: skipped {skipped}: not a ConfigSet", err=True)
    for error in local.load_errors:
        click.echo(f"error: {error}", err=True)
    for resource, message in local.errors.items():
        click.echo(f"error: {resource}: {message}", err=True)
    for conflict in local.desired.conflicts:
        click.echo(f"conflict: {conflict.message()}; applied from neither", err=True)
    from nodemanager.api import Execution, File

    for r in local.desired.resources:
        spec = r.spec
        where = f"{r.configsets[0]} {r.fields[0] if r.fields else ''}"
        if isinstance(spec, Execution) and not (spec.subscribe_files or spec.on_every_apply):
            click.echo(
                f"note: {where}: no subscribe_files, so it never runs (as upstream); "
                "onEveryApply: true runs it on every apply",
                err=True,
            )
        if (
            isinstance(spec, File)
            and spec.ensure == "file"
            and not (spec.template or spec.content or spec.create_only)
        ):
            click.echo(
                f"note: {where}: {spec.path} has no content, so it is left alone (as upstream)",
                err=True,
            )
    if not local.loaded.snapshot.configsets and not local.load_errors:
        click.echo("note: no ConfigSet in the files given", err=True)
    elif not local.desired.configsets and not local.load_errors:
        click.echo(f"note: no ConfigSet matches this node's labels {dict(node.labels)}", err=True)
        from nodemanager.desired.select import explain, missing_values, selector_only

        for raw in local.loaded.snapshot.configsets:
            configset = selector_only(raw)
            why = configset and explain(
                missing_values(configset, [node.labels]), "this node's labels"
            )
            if configset and why:
                click.echo(f"note: ConfigSet {configset.name}: {why}", err=True)
    return local


_files_option = click.option(
    "-f",
    "--filename",
    "files",
    multiple=True,
    required=True,
    type=click.Path(exists=True, allow_dash=True),
    help="ConfigSet file or directory (repeatable); - reads standard input.",
)
_labels_option = click.option("--node-labels", help="Extra node labels, k=v,k2=v2.")
_os_option = click.option(
    "--os",
    "os_id",
    help="Render for this os-release ID instead of this host's "
    "(arch, alpine, freebsd, debian, fedora...).",
)
_hostname_option = click.option("--hostname", help="Node name (default: this host's name).")


@click.command()
@_files_option
@_labels_option
@_os_option
@_hostname_option
@click.option(
    "--show-secrets",
    is_flag=True,
    help="Print content that came from Secrets instead of redacting it.",
)
@click.option(
    "-o",
    "--output",
    "output_format",
    default="yaml",
    show_default=True,
    help="yaml (any other value is taken as a file name, as before: use --out).",
)
@click.option(
    "--out",
    "output",
    type=click.Path(dir_okay=False),
    help="Write the playbook here (atomically) instead of stdout.",
)
@click.option(
    "--role",
    "role_dir",
    type=click.Path(file_okay=False),
    help="Write a standard Ansible role to this directory instead (tasks/, handlers/, meta/, "
    "files/, README.md); Secret-fed content becomes a role argument, never written.",
)
def render(
    files: tuple[str, ...],
    node_labels: str | None,
    os_id: str | None,
    hostname: str | None,
    show_secrets: bool,
    output_format: str,
    output: str | None,
    role_dir: str | None,
) -> None:
    """Print the Ansible playbook that `apply` would run; it runs as is with ansible-playbook."""
    if output_format == "json":
        # JSON cannot carry Ansible's !unsafe tag: ansible-playbook would evaluate the templates
        # in file contents. The playbook is YAML only.
        raise click.BadParameter("the playbook is printed as YAML only", param_hint="-o")
    if output_format != "yaml":
        click.echo(f"note: -o {output_format} is taken as --out {output_format}", err=True)
        output = output or output_format
    if role_dir and (show_secrets or output):
        raise click.BadParameter("a role is written to its directory, never with secrets")
    local = _local_plan(files, node_labels, os_id, hostname, show_secrets)
    refused = bool(local.load_errors or local.errors)
    if refused and not local.plan.steps:
        click.echo("error: no playbook written: fix the errors above", err=True)
        sys.exit(1)
    if role_dir:
        _write_role(local.plan, role_dir)
        if refused:
            click.echo("error: the role leaves out what the errors above name", err=True)
            sys.exit(1)
        return
    from nodemanager.playbook.dump import to_yaml

    # What `apply` would run: the resources it refuses (each named above) are left out, the
    # rest is written, and the exit status says something was refused, as `apply`'s does.
    text = to_yaml(local.plan.exported, pretty=True)
    if output:
        from nodemanager.fsutil import write_atomic

        write_atomic(output, text.encode(), mode=0o600 if local.plan.has_secrets else 0o644)
    else:
        click.echo(text, nl=False)
    if refused:
        click.echo("error: the playbook leaves out what the errors above name", err=True)
        sys.exit(1)


def _write_role(plan: Plan, where: str) -> None:
    from nodemanager.fsutil import write_atomic
    from nodemanager.playbook.role import role

    for f in role(plan):
        path = os.path.join(where, f.path)
        os.makedirs(os.path.dirname(path), exist_ok=True)
        write_atomic(path, f.data)
    click.echo(f"role written to {where}", err=True)


_MARK = {"ok": "ok", "changed": "changed", "failed": "FAILED", "skipped": "skipped"}


def _progress(result: TaskResult) -> None:
    click.echo(f"  {_MARK[result.status]:<8} {result.task}", err=True)
    if result.diff:
        click.echo(result.diff, err=True)


@click.command()
@_files_option
@_labels_option
@_os_option
@_hostname_option
@click.option("--check", is_flag=True, help="Report what would change; change nothing.")
@click.option("--diff", is_flag=True, help="Show file differences (never for Secret-fed files).")
@click.option(
    "--fast-path/--no-fast-path",
    default=True,
    show_default=True,
    help="Skip tasks a plain-Python check proves converged; "
    "--no-fast-path sends every task to Ansible.",
)
@click.option(
    "--state-dir",
    default="/var/lib/nodemanager",
    show_default=True,
    help="Where file backups go (as the agent's): `nodemanager restore PATH` puts one back.",
)
def apply(
    files: tuple[str, ...],
    node_labels: str | None,
    os_id: str | None,
    hostname: str | None,
    check: bool,
    diff: bool,
    fast_path: bool,
    state_dir: str,
) -> None:
    """Apply ConfigSet files to this host now (local mode, no cluster)."""
    from nodemanager.agent.hostfeatures import HostFeatures
    from nodemanager.executor.errors import ExecutorError
    from nodemanager.executor.run import apply as apply_plan
    from nodemanager.executor.summary import summarize

    local = _local_plan(files, node_labels, os_id, hostname, show_secrets=True)
    show_progress = sys.stderr.isatty() or diff
    try:
        run = apply_plan(
            local.plan,
            fast=fast_path,
            check=check,
            diff=diff,
            on_result=_progress if show_progress else None,
            # The agent's backups, one pipeline: what a replace or purge removes is saved first.
            before_change=HostFeatures(state_dir).before_change(local.plan, local.planned.contents),
        )
    except ExecutorError as e:
        raise click.ClickException(str(e)) from e
    summaries = summarize(local.desired, run.results, local.errors)
    for s in summaries.values():
        verb = "would change" if check else "changed"
        click.echo(
            f"{s.name}: {s.ok} ok, {s.changed} {verb}, {s.failed} failed"
            + (f", {len(s.conflicts)} conflicts" if s.conflicts else "")
        )
        for failure in s.failures:
            click.echo(f"  failed {failure}")
        for resource in s.conflicts:
            click.echo(f"  conflict {resource}: declared differently elsewhere; not applied")
    if run.status != "successful" and not any(r.status == "failed" for r in run.results):
        click.echo(run.breakdown(), err=True)
    if run.failed or local.load_errors or local.errors or local.desired.conflicts:
        sys.exit(1)


@click.command()
@click.argument("path")
@click.option("--hash", "sha", help="sha256 (or a unique prefix) of the version to restore.")
@click.option("--list", "list_", is_flag=True, help="List the saved versions instead.")
@click.option("--state-dir", default="/var/lib/nodemanager", show_default=True)
@click.option(
    "--filebucket-path",
    help="Upstream nodemanager's file backups (its -configset.file-bucket.path), read beside "
    "ours.  [default: <state-dir>/filebucket]",
)
def restore(
    path: str, sha: str | None, list_: bool, state_dir: str, filebucket_path: str | None
) -> None:
    """Put back a version of PATH that the agent (or upstream's, from its filebucket) saved
    before replacing or removing it (the newest by default). What PATH holds now is saved
    first."""
    from nodemanager.host.backups import BackupError, BackupStore

    store = BackupStore(state_dir, filebucket=filebucket_path)
    path = os.path.abspath(path)
    try:
        if list_:
            versions = store.versions(path)
            if not versions:
                raise BackupError(f"{path}: no backup")
            for v in versions:
                click.echo(
                    f"{v.sha256}  {v.saved_at_text}  {v.mode:04o} {v.owner or v.uid}:"
                    f"{v.group or v.gid}"
                )
            return
        version = store.restore(path, sha)
    except (BackupError, OSError, ValueError) as e:
        raise click.ClickException(str(e)) from e
    click.echo(
        f"restored {path}: {version.sha256[:12]}, saved {version.saved_at_text}, "
        f"mode {version.mode:04o}, owner {version.owner or version.uid}:"
        f"{version.group or version.gid}",
        err=True,
    )
