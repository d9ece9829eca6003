"""`nodemanager run`: the agent, and the options the bare `nodemanager` shares with it."""

from __future__ import annotations

import os

import click

from nodemanager.cli.errors import verbosity
from nodemanager.cli.logs import LOG_LEVELS, setup_logging
from nodemanager.cli.options import F, api_options, duration, labels


def run_options(f: F) -> F:
    options = [
        api_options("Kubeconfig file; in a pod without it, the in-cluster service account."),
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
            "--reconcile-failing-timeout",
            default="5m",
            show_default=True,
            help="Reconciles that cannot complete (Ready=False, reason ReconcileError) for this "
            "long fail /healthz; 0: never.",
        ),
        click.option(
            "--backup-max-age",
            default="720h",
            show_default=True,
            help="File backups older than this are removed with each drift check; 0 keeps all.",
        ),
        click.option(
            "--filebucket-path",
            default=None,
            help="Upstream nodemanager's file backups (its -configset.file-bucket.path), listed "
            "and restored by `restore`, collected by --backup-max-age. [default: "
            "<state-dir>/filebucket, upstream's default]",
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
            "--notify-on-change",
            is_flag=True,
            help="Also annotate spec.notifies[] targets with nodemanager.io/notified-at and "
            "notified-by each time a ConfigSet changed this host (upstream's "
            "nodemanager.io/notify-<configset>: <generation> is always written).",
        ),
        click.option(
            "--memory-pressure-threshold",
            type=click.FloatRange(0, 100),
            default=10.0,
            show_default=True,
            help="Set the MemoryPressure condition while memory PSI some avg10 (percent of the "
            "last 10 s a task waited for memory) is at or above this; the ManagedNode's "
            "spec.pressure.memoryThreshold overrides it.",
        ),
        click.option(
            "--cert-renew-fraction",
            type=click.FloatRange(0.01, 0.95),
            default=0.8,
            show_default=True,
            help="With a client certificate (`bootstrap --certificate`): renew it when this "
            "fraction of its lifetime has passed (counted from its notBefore, which the signer "
            "backdates five minutes).",
        ),
        click.option(
            "--pressure-dir",
            default="/proc/pressure",
            hidden=True,  # tests drive the thresholds through a directory they write
            help="Where to read PSI from.",
        ),
        click.option(
            "--watchdog-device",
            default="/dev/watchdog",
            show_default=True,
            help="The watchdog armed while the ManagedNode has spec.fencing.enabled (a host "
            "that stops petting it is reset).",
        ),
        click.option(
            "--watchdog-timeout",
            # at most api.fencing.MAX_DEVICE_TIMEOUT, checked in run: the group parses this
            # option for every command, and the resource model is not loaded for `--version`
            type=click.IntRange(min=2),
            default=20,
            show_default=True,
            help="Seconds without a keepalive before the device resets the host (set on the "
            "device, which must keep it; a keepalive every quarter of it).",
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


@click.command()
@run_options
def run(
    kubeconfig: str,
    context: str | None,
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
    reconcile_failing_timeout: str,
    backup_max_age: str,
    filebucket_path: str | None,
    reboot_command: str,
    drain_timeout: str,
    notify_on_change: bool,
    memory_pressure_threshold: float,
    pressure_dir: str,
    cert_renew_fraction: float,
    watchdog_device: str,
    watchdog_timeout: int,
    log_format: str,
    log_level: str,
) -> None:
    """Run the agent: keep this host in the state its ConfigSets declare."""
    from nodemanager.api.fencing import MAX_DEVICE_TIMEOUT

    if watchdog_timeout > MAX_DEVICE_TIMEOUT:
        raise click.BadParameter(
            f"{watchdog_timeout} is not in the range 2<=x<={MAX_DEVICE_TIMEOUT}",
            param_hint="'--watchdog-timeout'",
        )
    from nodemanager.agent.daemon import Daemon, Options
    from nodemanager.playbook.errors import PlaybookError

    setup_logging(log_format, "debug" if verbosity(click.get_current_context()) else log_level)
    from nodemanager.bootstrap.credentials import renewer
    from nodemanager.host.labels import hostname as this_host
    from nodemanager.kube.kubeconfig import exists, loader

    if exists(kubeconfig):
        loader(kubeconfig, context)  # a broken kubeconfig fails now, not in every thread later
    # The renewer rewrites the node's own kubeconfig: one file, its current context.
    own = (
        renewer(kubeconfig, hostname or this_host(), namespace, cert_renew_fraction)
        if os.path.isfile(kubeconfig) and not context
        else None
    )
    options = Options(
        kubeconfig=kubeconfig,
        context=context,
        namespace=namespace,
        hostname=hostname,
        node_labels=labels(node_labels),
        state_dir=state_dir,
        drift_check_interval=duration(drift_check_interval, "--drift-check-interval"),
        backup_max_age=duration(backup_max_age, "--backup-max-age")
        if backup_max_age != "0"
        else None,
        filebucket_path=filebucket_path,
        peer_min_interval=duration(peer_min_interval, "--peer-min-interval"),
        reconcile_timeout=duration(reconcile_timeout, "--reconcile-timeout"),
        reconcile_failing_timeout=duration(
            reconcile_failing_timeout, "--reconcile-failing-timeout"
        ),
        reboot_command=reboot_command.split() or None,
        drain_timeout=duration(drain_timeout, "--drain-timeout"),
        notify_on_change=notify_on_change,
        memory_pressure_threshold=memory_pressure_threshold,
        pressure_dir=pressure_dir,
        watchdog_device=watchdog_device,
        watchdog_timeout=watchdog_timeout,
        metrics_bind_address=metrics_bind_address,
        health_probe_bind_address=health_probe_bind_address,
        token_renewer=own,
    )
    try:
        daemon = Daemon(options)
    except (PlaybookError, ValueError, OSError) as e:
        raise click.ClickException(str(e)) from e
    daemon.run()
    if daemon.fatal:
        raise click.ClickException(daemon.fatal)
