"""The nodemanager command line. The only module that prints or installs log handlers."""

from __future__ import annotations

import sys

import click

from nodemanager import __version__
from nodemanager.executor.errors import ExecutorError
from nodemanager.executor.events import TaskResult
from nodemanager.executor.summary import summarize
from nodemanager.playbook.dump import to_yaml
from nodemanager.playbook.errors import PlaybookError


def _labels(text: str | None) -> dict[str, str]:
    from nodemanager.host.labels import parse_label_args

    try:
        return parse_label_args(text) if text else {}
    except ValueError as e:
        raise click.BadParameter(str(e), param_hint="--node-labels") from e


def _local_plan(files, node_labels, os_id, hostname, show_secrets):
    from nodemanager.agent.local import identify, plan_files

    try:
        node = identify(hostname, os_id, _labels(node_labels))
        local = plan_files(files, node, show_secrets=show_secrets)
    except (PlaybookError, ValueError) as e:
        raise click.ClickException(str(e)) from e
    for error in local.loaded.errors:
        click.echo(f"error: {error}", err=True)
    for conflict in local.desired.conflicts:
        click.echo(f"conflict: {conflict.message()}; applied from neither", err=True)
    if not local.desired.configsets:
        click.echo(f"note: no ConfigSet matches this node's labels {dict(node.labels)}", err=True)
    return local


_files_option = click.option("-f", "--filename", "files", multiple=True, required=True, type=click.Path(exists=True),
                             help="ConfigSet file or directory (repeatable).")
_labels_option = click.option("--node-labels", help="Extra node labels, k=v,k2=v2.")
_os_option = click.option("--os", "os_id", help="Render for this os-release ID instead of this host's (arch, alpine, freebsd, debian, fedora...).")
_hostname_option = click.option("--hostname", help="Node name (default: this host's name).")


@click.group(invoke_without_command=True)
@click.pass_context
def main(ctx: click.Context) -> None:
    """Keep this host's packages, files, services and commands as ConfigSets declare them."""
    if ctx.invoked_subcommand is None:
        click.echo(ctx.get_help())


@main.command()
def version() -> None:
    """Print the version."""
    click.echo(f"nodemanager {__version__}")


@main.command()
@_files_option
@_labels_option
@_os_option
@_hostname_option
@click.option("--show-secrets", is_flag=True, help="Print content that came from Secrets instead of redacting it.")
@click.option("-o", "--output", type=click.Path(dir_okay=False), help="Write the playbook here (atomically) instead of stdout.")
def render(files, node_labels, os_id, hostname, show_secrets, output) -> None:
    """Print the Ansible playbook that `apply` would run; it runs as is with ansible-playbook."""
    local = _local_plan(files, node_labels, os_id, hostname, show_secrets)
    text = to_yaml(local.plan.playbook)
    if output:
        from nodemanager.fsutil import write_atomic

        write_atomic(output, text.encode(), mode=0o600 if local.plan.has_secrets else 0o644)
    else:
        click.echo(text, nl=False)
    if local.loaded.errors:
        sys.exit(1)


_MARK = {"ok": "ok", "changed": "changed", "failed": "FAILED", "skipped": "skipped"}


def _progress(result: TaskResult) -> None:
    click.echo(f"  {_MARK[result.status]:<8} {result.task}", err=True)
    if result.diff:
        click.echo(result.diff, err=True)


@main.command()
@_files_option
@_labels_option
@_os_option
@_hostname_option
@click.option("--check", is_flag=True, help="Report what would change; change nothing.")
@click.option("--diff", is_flag=True, help="Show file differences (never for Secret-fed files).")
def apply(files, node_labels, os_id, hostname, check, diff) -> None:
    """Apply ConfigSet files to this host now (local mode, no cluster)."""
    from nodemanager.executor.run import execute

    local = _local_plan(files, node_labels, os_id, hostname, show_secrets=True)
    show_progress = sys.stderr.isatty() or diff
    try:
        run = execute(local.plan, check=check, diff=diff, on_result=_progress if show_progress else None)
    except ExecutorError as e:
        raise click.ClickException(str(e)) from e
    summaries = summarize(local.desired, run.results)
    for s in summaries.values():
        verb = "would change" if check else "changed"
        click.echo(f"{s.name}: {s.ok} ok, {s.changed} {verb}, {s.failed} failed"
                   + (f", {len(s.conflicts)} conflicts" if s.conflicts else ""))
        for resource, message in s.failures:
            click.echo(f"  failed {resource}: {message}")
        for resource in s.conflicts:
            click.echo(f"  conflict {resource}: declared differently elsewhere; not applied")
    if run.status != "successful" and not any(r.status == "failed" for r in run.results):
        click.echo(f"ansible-runner ended {run.status} (rc {run.rc})", err=True)
    if run.failed or local.loaded.errors or local.desired.conflicts:
        sys.exit(1)


if __name__ == "__main__":
    main()
