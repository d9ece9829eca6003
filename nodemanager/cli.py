"""The nodemanager command line. The only module that prints or installs log handlers."""

from __future__ import annotations

import datetime
import json
import logging
import os
import sys
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, TypeVar

import click

from nodemanager import __version__
from nodemanager.api import parse_duration
from nodemanager.executor.errors import ExecutorError
from nodemanager.executor.events import TaskResult
from nodemanager.executor.summary import summarize
from nodemanager.playbook.dump import to_yaml
from nodemanager.playbook.errors import PlaybookError

if TYPE_CHECKING:
    from nodemanager.agent.local import LocalPlan

F = TypeVar("F", bound=Callable[..., Any])


def _labels(text: str | None) -> dict[str, str]:
    from nodemanager.host.labels import parse_label_args

    try:
        return parse_label_args(text) if text else {}
    except ValueError as e:
        raise click.BadParameter(str(e), param_hint="--node-labels") from e


def _local_plan(
    files: Sequence[str],
    node_labels: str | None,
    os_id: str | None,
    hostname: str | None,
    show_secrets: bool,
) -> LocalPlan:
    from nodemanager.agent.local import identify, plan_files

    try:
        node = identify(hostname, os_id, _labels(node_labels))
        local = plan_files(files, node, show_secrets=show_secrets)
    except (PlaybookError, ValueError) as e:
        raise click.ClickException(str(e)) from e
    for error in local.load_errors:
        click.echo(f"error: {error}", err=True)
    for resource, message in local.errors.items():
        click.echo(f"error: {resource}: {message}", err=True)
    for conflict in local.desired.conflicts:
        click.echo(f"conflict: {conflict.message()}; applied from neither", err=True)
    if not local.desired.configsets and not local.load_errors:
        click.echo(f"note: no ConfigSet matches this node's labels {dict(node.labels)}", err=True)
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


def _timestamp(record: logging.LogRecord) -> str:
    """RFC 3339 with the zone, so lines from hosts in different zones sort and compare."""
    return (
        datetime.datetime.fromtimestamp(record.created)
        .astimezone()
        .isoformat(timespec="milliseconds")
    )


class JsonFormatter(logging.Formatter):
    """One JSON object per line: what log collectors on hosts ingest best."""

    def format(self, record: logging.LogRecord) -> str:
        entry = {
            "time": _timestamp(record),
            "level": record.levelname.lower(),
            "logger": record.name,
            "msg": record.getMessage(),
        }
        if record.exc_info:
            entry["error"] = self.formatException(record.exc_info)
        return json.dumps(entry)


class TextFormatter(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        line = f"{_timestamp(record)} {record.levelname} {record.name}: {record.getMessage()}"
        if record.exc_info:
            line += "\n" + self.formatException(record.exc_info)
        return line


LOG_LEVELS = {"debug": logging.DEBUG, "info": logging.INFO, "warn": logging.WARNING,
              "warning": logging.WARNING, "error": logging.ERROR}  # fmt: skip


def setup_logging(log_format: str, log_level: str) -> None:
    """Install the one handler. urllib3 logs a WARNING per retried request while the API server
    is away (most of the lines of an outage); the client's own error says the same once, so
    urllib3 speaks only at debug level."""
    handler = logging.StreamHandler()
    handler.setFormatter(JsonFormatter() if log_format == "json" else TextFormatter())
    level = LOG_LEVELS[log_level.lower()]
    logging.basicConfig(level=level, handlers=[handler], force=True)
    logging.getLogger("urllib3").setLevel(
        logging.DEBUG if level <= logging.DEBUG else logging.ERROR
    )


def default_kubeconfig() -> str:
    """kubectl's rule: the first file named in $KUBECONFIG (a path list), else ~/.kube/config."""
    for entry in os.environ.get("KUBECONFIG", "").split(os.pathsep):
        if entry:
            return entry
    return os.path.expanduser("~/.kube/config")


def _kubeconfig_option(help_text: str) -> Callable[[F], F]:
    return click.option(
        "--kubeconfig",
        default=default_kubeconfig,
        show_default="$KUBECONFIG, else ~/.kube/config",
        help=help_text,
    )


def _namespace_option() -> Callable[[F], F]:
    return click.option(
        "-n",
        "--namespace",
        default="nodemanager",
        show_default=True,
        help="Namespace of ConfigSets, ManagedNodes and the node's account.",
    )


def _duration(text: str) -> float:
    try:
        return parse_duration(text)
    except ValueError as e:
        raise click.BadParameter(str(e)) from None


def _run_options(f: F) -> F:
    options = [
        _kubeconfig_option("Kubeconfig file; in a pod without it, the in-cluster service account."),
        _namespace_option(),
        click.option(
            "--leader-elect",
            is_flag=False,
            flag_value=True,  # a bare --leader-elect, as upstream's manifests pass it
            default=False,
            type=bool,
            show_default=True,
            help="Accepted for compatibility (bare, or =true/false): each agent manages only "
            "its own host, so there is no leader to elect.",
        ),
        click.option(
            "--metrics-bind-address",
            default=":8080",
            show_default=True,
            help="Prometheus endpoint; 0 disables.",
        ),
        click.option(
            "--health-probe-bind-address",
            default=":8081",
            show_default=True,
            help="/healthz and /readyz; 0 disables.",
        ),
        click.option("--hostname", help="ManagedNode name (default: this host's name)."),
        click.option("--node-labels", help="Custom node labels, k=v,k2=v2."),
        click.option(
            "--state-dir",
            default="/var/lib/nodemanager",
            show_default=True,
            help="Where the last applied state is kept.",
        ),
        click.option(
            "--drift-check-interval",
            default="30m",
            show_default=True,
            help="Full re-check of the host (with 10% jitter); 0 means event-driven only.",
        ),
        click.option(
            "--peer-min-interval",
            default="10s",
            show_default=True,
            help="At most one reconcile per this interval for changes of other nodes "
            "(templates reading `nodes`).",
        ),
        click.option(
            "--reconcile-timeout",
            default="30m",
            show_default=True,
            help="A reconcile running longer fails /healthz and stops the Lease renewal; 0: never.",
        ),
        click.option(
            "--backup-max-age",
            default="720h",
            show_default=True,
            help="File backups older than this are removed with each drift check; 0 keeps all.",
        ),
        click.option(
            "--reboot-command",
            default="",
            help="Run this (split on spaces) to reboot after an upgrade that needs it "
            "(default: systemctl reboot, or shutdown -r now).",
        ),
        click.option(
            "--drain-timeout",
            default="10m",
            show_default=True,
            help="Before an upgrade, wait this long for the pods of the Kubernetes Node of this "
            "host's name to be evicted (`rbac --drain`); then upgrade anyway.",
        ),
        click.option(
            "--log-format", type=click.Choice(["json", "text"]), default="json", show_default=True
        ),
        click.option(
            "--log-level",
            type=click.Choice(list(LOG_LEVELS), case_sensitive=False),
            default="info",
            show_default=True,
        ),
    ]
    for option in reversed(options):
        f = option(f)
    return f


@click.group(invoke_without_command=True)
@click.version_option(
    __version__, "--version", prog_name="nodemanager", message="%(prog)s %(version)s"
)
@_run_options
@click.pass_context
def main(ctx: click.Context, /, **options: Any) -> None:
    """Keep this host's packages, files, services and commands as ConfigSets declare them.

    Without a command, runs the agent (the same as `nodemanager run`)."""
    if ctx.invoked_subcommand is None:
        ctx.invoke(run, **options)


@main.command()
@_run_options
def run(
    kubeconfig: str,
    namespace: str,
    leader_elect: bool,
    metrics_bind_address: str,
    health_probe_bind_address: str,
    hostname: str | None,
    node_labels: str | None,
    state_dir: str,
    drift_check_interval: str,
    peer_min_interval: str,
    reconcile_timeout: str,
    backup_max_age: str,
    reboot_command: str,
    drain_timeout: str,
    log_format: str,
    log_level: str,
) -> None:
    """Run the agent: keep this host in the state its ConfigSets declare."""
    from nodemanager.agent.daemon import Daemon, Options

    setup_logging(log_format, log_level)
    from nodemanager.bootstrap.credentials import TokenRenewer
    from nodemanager.host.labels import hostname as this_host

    renewer = (
        TokenRenewer(kubeconfig, hostname or this_host(), namespace)
        if os.path.exists(kubeconfig)
        else None
    )
    options = Options(
        kubeconfig=kubeconfig,
        namespace=namespace,
        hostname=hostname,
        node_labels=_labels(node_labels),
        state_dir=state_dir,
        drift_check_interval=_duration(drift_check_interval),
        backup_max_age=_duration(backup_max_age) if backup_max_age != "0" else None,
        peer_min_interval=_duration(peer_min_interval),
        reconcile_timeout=_duration(reconcile_timeout),
        reboot_command=reboot_command.split() or None,
        drain_timeout=_duration(drain_timeout),
        metrics_bind_address=metrics_bind_address,
        health_probe_bind_address=health_probe_bind_address,
        token_renewer=renewer,
    )
    try:
        daemon = Daemon(options)
    except (PlaybookError, ValueError, OSError) as e:
        raise click.ClickException(str(e)) from e
    daemon.run()
    if daemon.fatal:
        raise click.ClickException(daemon.fatal)


def _output_format_option(default: str = "yaml") -> Callable[[F], F]:
    return click.option(
        "-o",
        "--output",
        "output_format",
        type=click.Choice(["yaml", "json"]),
        default=default,
        show_default=True,
        help="Output format.",
    )


def _emit(documents: list[Any], output_format: str) -> None:
    """Data on stdout as kubectl prints it: YAML documents, or JSON (a List for several)."""
    import yaml

    if output_format == "json":
        body = (
            documents[0]
            if len(documents) == 1
            else {"apiVersion": "v1", "kind": "List", "items": documents}
        )
        click.echo(json.dumps(body, indent=2))
    else:
        click.echo(yaml.safe_dump_all(documents, sort_keys=False), nl=False)


@main.command()
@_kubeconfig_option("Kubeconfig file; in a pod without it, the in-cluster service account.")
@_namespace_option()
@click.option(
    "--leader-elect",
    default=False,
    type=bool,
    show_default=True,
    help="Elect one active replica through the Lease nodemanager-controller.",
)
@click.option(
    "--leader-elect-identity", default="", help="This replica's name (default: host_pid)."
)
@click.option("--leader-elect-lease-duration", default="15s", show_default=True)
@click.option("--leader-elect-renew-deadline", default="10s", show_default=True)
@click.option("--leader-elect-retry-period", default="2s", show_default=True)
@click.option(
    "--sync-period",
    default="1s",
    show_default=True,
    help="At most one sync (and one status write per ConfigSet) per period.",
)
@click.option(
    "--manage-access",
    default=True,
    type=bool,
    show_default=True,
    help="Keep one Role per node granting read of the Secrets/ConfigMaps its ConfigSets name.",
)
@click.option("--metrics-bind-address", default=":8082", show_default=True)
@click.option("--health-probe-bind-address", default=":8083", show_default=True)
@click.option(
    "--log-format", type=click.Choice(["json", "text"]), default="json", show_default=True
)
@click.option(
    "--log-level",
    type=click.Choice(sorted(LOG_LEVELS), case_sensitive=False),
    default="info",
    show_default=True,
)
def controller(
    kubeconfig: str,
    namespace: str,
    leader_elect: bool,
    leader_elect_identity: str,
    leader_elect_lease_duration: str,
    leader_elect_renew_deadline: str,
    leader_elect_retry_period: str,
    sync_period: str,
    manage_access: bool,
    metrics_bind_address: str,
    health_probe_bind_address: str,
    log_format: str,
    log_level: str,
) -> None:
    """Run the fleet controller: ConfigSet status, stale nodes, Secret access, rollouts."""
    import signal

    from nodemanager.controller.manager import Controller, Options

    setup_logging(log_format, log_level)
    options = Options(
        kubeconfig=kubeconfig,
        namespace=namespace,
        leader_elect=leader_elect,
        identity=leader_elect_identity,
        sync_period=_duration(sync_period),
        manage_access=manage_access,
        metrics_bind_address=metrics_bind_address,
        health_probe_bind_address=health_probe_bind_address,
        lease_duration=_duration(leader_elect_lease_duration),
        renew_deadline=_duration(leader_elect_renew_deadline),
        retry_period=_duration(leader_elect_retry_period),
    )
    if options.renew_deadline >= options.lease_duration:
        raise click.BadParameter(
            "must be shorter than --leader-elect-lease-duration",
            param_hint="--leader-elect-renew-deadline",
        )
    try:
        ctl = Controller(options)
    except (ValueError, OSError) as e:
        raise click.ClickException(str(e)) from e
    signal.signal(signal.SIGTERM, lambda *_: ctl.shutdown())
    signal.signal(signal.SIGINT, lambda *_: ctl.shutdown())
    sys.exit(ctl.run())


def _configset_ref(ref: str) -> str:
    kind, _, name = ref.partition("/")
    if not name or kind.lower() not in ("configset", "configsets", "cset", "cfs"):
        raise click.BadParameter(f"{ref!r}: expected configset/NAME", param_hint="RESOURCE")
    return name


if TYPE_CHECKING:
    from nodemanager.kube.rollouts import RolloutClient

T = TypeVar("T")


def _rollout_client(kubeconfig: str, namespace: str) -> RolloutClient:
    from nodemanager.kube.client import ClientFactory
    from nodemanager.kube.rollouts import RolloutClient

    return RolloutClient(ClientFactory(kubeconfig), namespace)


def _kube_call(call: Callable[[], T]) -> T:
    from nodemanager.kube.errors import KubeError

    try:
        return call()
    except KubeError as e:
        raise click.ClickException(str(e)) from e
    except OSError as e:
        raise click.ClickException(f"{e.filename or ''}: {e.strerror or e}") from e


def _rollout_options(f: F) -> F:
    f = _namespace_option()(f)
    f = _kubeconfig_option("Kubeconfig file.")(f)
    return click.argument("resource")(f)


@main.group()
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

    name, deadline = _configset_ref(resource), _duration(timeout)
    client_ = _rollout_client(kubeconfig, namespace)
    started, last = time.monotonic(), ""
    while True:
        state, message = _kube_call(lambda: progress(client_.configset(name)))
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
    revisions = _kube_call(lambda: client_.revisions(name, CONFIGSET_LABEL))
    running: dict[str, list[str]] = {}
    for node in _kube_call(client_.nodes):
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
    _kube_call(lambda: _rollout_client(kubeconfig, namespace).set_paused(name, True))
    click.echo(f"configset/{name} paused")


@rollout.command("resume")
@_rollout_options
def rollout_resume(resource: str, kubeconfig: str, namespace: str) -> None:
    """Admit nodes again (spec.paused: false)."""
    name = _configset_ref(resource)
    _kube_call(lambda: _rollout_client(kubeconfig, namespace).set_paused(name, False))
    click.echo(f"configset/{name} resumed")


@rollout.command("undo")
@_rollout_options
@click.option("--to-revision", default=0, type=int, help="Revision to go back to; 0: the previous.")
def rollout_undo(resource: str, kubeconfig: str, namespace: str, to_revision: int) -> None:
    """Put an earlier revision's content back into the ConfigSet; the rollout then applies it."""
    from nodemanager.controller.rollout import CONFIGSET_LABEL, STEERING, revision_name, undo_target

    name = _configset_ref(resource)
    client_ = _rollout_client(kubeconfig, namespace)
    current = _kube_call(lambda: client_.configset(name))
    if not isinstance((current.get("spec") or {}).get("rollout"), dict):
        raise click.ClickException(f"configset/{name} has no spec.rollout: it keeps no revisions")
    revisions = _kube_call(lambda: client_.revisions(name, CONFIGSET_LABEL))
    try:
        target = undo_target(revisions, revision_name(name, current["spec"]), to_revision)
    except ValueError as e:
        raise click.ClickException(str(e)) from e
    content = (target.get("data") or {}).get("spec") or {}

    def new_spec(spec: Mapping[str, Any]) -> dict[str, Any]:
        return {**content, **{k: spec[k] for k in STEERING if k in spec}}

    _kube_call(lambda: client_.replace_spec(name, new_spec))
    click.echo(f"configset/{name} rolled back to revision {target.get('revision')}")


@main.command()
@click.argument("path")
@click.option("--hash", "sha", help="sha256 (or a unique prefix) of the version to restore.")
@click.option("--list", "list_", is_flag=True, help="List the saved versions instead.")
@click.option("--state-dir", default="/var/lib/nodemanager", show_default=True)
def restore(path: str, sha: str | None, list_: bool, state_dir: str) -> None:
    """Put back a version of PATH that the agent saved before replacing or removing it
    (the newest by default). What PATH holds now is saved first."""
    from nodemanager.host.backups import BackupError, BackupStore

    store = BackupStore(state_dir)
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
    click.echo(f"restored {path}: {version.sha256[:12]}, saved {version.saved_at_text}", err=True)


@main.command()
@click.option(
    "-o",
    "--output",
    "output_format",
    type=click.Choice(["text", "yaml", "json"]),
    default="text",
    show_default=True,
)
def version(output_format: str) -> None:
    """Print the version."""
    if output_format == "text":
        click.echo(f"nodemanager {__version__}")
    else:
        _emit([{"nodemanagerVersion": __version__}], output_format)


@main.command()
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
def render(
    files: tuple[str, ...],
    node_labels: str | None,
    os_id: str | None,
    hostname: str | None,
    show_secrets: bool,
    output_format: str,
    output: str | None,
) -> None:
    """Print the Ansible playbook that `apply` would run; it runs as is with ansible-playbook."""
    if output_format == "json":
        # JSON cannot carry Ansible's !unsafe tag: ansible-playbook would evaluate the templates
        # in file contents. The playbook is YAML only.
        raise click.BadParameter("the playbook is printed as YAML only", param_hint="-o")
    if output_format != "yaml":
        click.echo(f"note: -o {output_format} is taken as --out {output_format}", err=True)
        output = output or output_format
    local = _local_plan(files, node_labels, os_id, hostname, show_secrets)
    text = to_yaml(local.plan.playbook)
    if output:
        from nodemanager.fsutil import write_atomic

        write_atomic(output, text.encode(), mode=0o600 if local.plan.has_secrets else 0o644)
    else:
        click.echo(text, nl=False)
    if local.load_errors or local.errors:
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
@click.option(
    "--fast-path/--no-fast-path",
    default=True,
    show_default=True,
    help="Skip tasks a plain-Python check proves converged; "
    "--no-fast-path sends every task to Ansible.",
)
def apply(
    files: tuple[str, ...],
    node_labels: str | None,
    os_id: str | None,
    hostname: str | None,
    check: bool,
    diff: bool,
    fast_path: bool,
) -> None:
    """Apply ConfigSet files to this host now (local mode, no cluster)."""
    from nodemanager.executor.run import apply as apply_plan

    local = _local_plan(files, node_labels, os_id, hostname, show_secrets=True)
    show_progress = sys.stderr.isatty() or diff
    try:
        run = apply_plan(
            local.plan,
            fast=fast_path,
            check=check,
            diff=diff,
            on_result=_progress if show_progress else None,
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


def _default_node_kubeconfig() -> str:
    return (
        "/usr/local/etc/nodemanager/kubeconfig"
        if sys.platform.startswith("freebsd")
        else "/etc/nodemanager/kubeconfig"
    )


@main.command()
@click.option("--hostname", help="Print the objects of this node only.")
@click.option(
    "--shared",
    is_flag=True,
    help="Print the objects every node shares: the Namespace and the admission policies.",
)
@_namespace_option()
@click.option(
    "--node-labels",
    help="Custom labels k=v,k2=v2 this node may carry (`run --node-labels`); the node cannot "
    "set any other.",
)
@click.option(
    "--lease-groups",
    default="",
    help="Comma-separated services[].lock_group and spec.upgrade.group names the node may lock.",
)
@click.option(
    "--drain",
    is_flag=True,
    help="Also let the node cordon and drain the Kubernetes Node of its name before upgrades "
    "(cluster-wide: list pods, create evictions).",
)
@_output_format_option()
def rbac(
    hostname: str | None,
    shared: bool,
    namespace: str,
    node_labels: str | None,
    lease_groups: str,
    drain: bool,
    output_format: str,
) -> None:
    """Print RBAC objects to apply yourself: `--shared` once, then `--hostname H` per node.

    The per-node output holds only that node's objects, so piping it to `kubectl delete -f -`
    removes that node and nothing else. It grants no Secret or ConfigMap: the fleet controller
    (`nodemanager controller`, deploy/controller.yaml) grants each node exactly those its
    ConfigSets reference, so ConfigSets with secretRefs or configMapRefs need it running."""
    from nodemanager.bootstrap.rbac import manifests, shared_manifests

    groups = [g.strip() for g in lease_groups.split(",") if g.strip()]
    if not hostname and not shared:
        raise click.UsageError("give --hostname H (one node's objects) and/or --shared")
    docs = (shared_manifests(namespace) if shared else []) + (
        manifests(hostname, namespace, _labels(node_labels), groups, drain) if hostname else []
    )
    if hostname and output_format != "json":
        click.echo(SECRETS_NOTE)
    _emit(docs, output_format)


SECRETS_NOTE = """\
# No Secret or ConfigMap is granted here. The fleet controller (nodemanager controller,
# deploy/controller.yaml) keeps the Role nodemanager-refs-<node> naming exactly those the node's
# ConfigSets reference: run it when ConfigSets use secretRefs or configMapRefs."""


def _ttl(text: str, flag: str) -> int:
    from nodemanager.bootstrap.credentials import check_ttl

    try:
        return check_ttl(_duration(text), flag)
    except ValueError as e:
        raise click.BadParameter(str(e), param_hint=flag) from None


def _kube_errors(f: F) -> F:
    import functools

    @functools.wraps(f)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        from nodemanager.kube.errors import KubeError

        try:
            return f(*args, **kwargs)
        except (KubeError, ValueError) as e:
            raise click.ClickException(str(e)) from e
        except OSError as e:
            raise click.ClickException(f"{e.filename or ''}: {e.strerror or e}") from e

    return wrapper  # type: ignore[return-value]  # same signature, by functools.wraps


@main.command()
@click.option("--hostname", required=True, help="Target node name.")
@_kubeconfig_option("Admin kubeconfig.")
@_namespace_option()
@click.option(
    "--ttl",
    default="1h",
    show_default=True,
    help="Lifetime of the temporary credential (at most 720h). Revokes the node's earlier tokens.",
)
@click.option(
    "--out",
    type=click.Path(dir_okay=False),
    help="Write the kubeconfig here (0600, atomically) instead of stdout.",
)
@_kube_errors
def token(hostname: str, kubeconfig: str, namespace: str, ttl: str, out: str | None) -> None:
    """Issue a short-lived bootstrap kubeconfig for a node; every earlier token of it is revoked."""
    from nodemanager.bootstrap.credentials import node_kubeconfig, write_kubeconfig

    seconds = _ttl(ttl, "--ttl")
    text, granted = node_kubeconfig(kubeconfig, hostname, namespace, seconds)
    if out:
        write_kubeconfig(out, text)
        click.echo(f"wrote {out} (valid {granted / 3600:.2f} h)", err=True)
    else:
        click.echo(text, nl=False)


@main.command()
@click.option(
    "--bootstrap-kubeconfig",
    required=True,
    type=click.Path(exists=True, dir_okay=False),
    help="Short-lived (from `token`) or admin kubeconfig.",
)
@click.option(
    "--kubeconfig",
    default=_default_node_kubeconfig,
    show_default="/etc/nodemanager/kubeconfig; FreeBSD /usr/local/etc/nodemanager/kubeconfig",
    help="Where to write the permanent kubeconfig.",
)
@_namespace_option()
@click.option(
    "--hostname", help="Node name (default: this host's name; must match the one used in `token`)."
)
@click.option(
    "--token-ttl",
    default="168h",
    show_default=True,
    help="Lifetime of the node's token (at most 720h); the agent renews it at about 80%.",
)
@_kube_errors
def bootstrap(
    bootstrap_kubeconfig: str,
    kubeconfig: str,
    namespace: str,
    hostname: str | None,
    token_ttl: str,
) -> None:
    """Exchange a bootstrap kubeconfig for this node's own, renewable kubeconfig."""
    from nodemanager.bootstrap.credentials import node_kubeconfig, write_kubeconfig
    from nodemanager.host.labels import hostname as this_host

    seconds = _ttl(token_ttl, "--token-ttl")
    text, granted = node_kubeconfig(
        bootstrap_kubeconfig, hostname or this_host(), namespace, seconds
    )
    write_kubeconfig(kubeconfig, text)
    click.echo(
        f"wrote {kubeconfig} (valid {granted / 86400:.1f} days); "
        "the bootstrap kubeconfig can be deleted",
        err=True,
    )


@main.command()
@click.option("--hostname", required=True, help="The node whose tokens to revoke.")
@click.option(
    "--kubeconfig",
    default=os.path.expanduser("~/.kube/config"),
    show_default=True,
    help="Admin kubeconfig.",
)
@click.option("--namespace", default="nodemanager", show_default=True)
@_kube_errors
def revoke(hostname: str, kubeconfig: str, namespace: str) -> None:
    """Revoke every token of a node now (its ServiceAccount and RBAC stay; `token` re-admits it)."""
    from nodemanager.bootstrap.credentials import revoke as revoke_tokens

    if revoke_tokens(kubeconfig, hostname, namespace):
        click.echo(f"revoked every token of node {hostname}", err=True)
    else:
        raise click.ClickException(
            f"node {hostname} has no token binding Secret in {namespace}: nothing to revoke "
            "(tokens made before bindings end only with their ServiceAccount)"
        )


if __name__ == "__main__":
    main()
