"""`nodemanager controller`: the fleet controller."""

from __future__ import annotations

import sys

import click

from nodemanager.cli.errors import verbosity
from nodemanager.cli.logs import LOG_LEVELS, setup_logging
from nodemanager.cli.options import api_options, duration


@click.command()
@api_options("Kubeconfig file; in a pod without it, the in-cluster service account.")
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
@click.option(
    "--trust-node-labels",
    is_flag=True,
    help="Grant Secret/ConfigMap references through the labels nodes set on themselves "
    "(kubernetes.io/os, kubernetes.io/arch; nodemanager.io/os from earlier agents): any node "
    "can then claim them.",
)
@click.option(
    "--disruption-grant-timeout",
    default="1h",
    show_default=True,
    help="A disruption grant (OS upgrade, lock_group) a node holds longer is taken back; 0: never.",
)
@click.option(
    "--approve-node-certificates",
    is_flag=True,
    help="Approve nodes' client certificate requests (`bootstrap --certificate`) that are "
    "exactly what the node may have; needs the ClusterRole in deploy/controller.yaml.",
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
    context: str | None,
    namespace: str,
    leader_elect: bool,
    leader_elect_identity: str,
    leader_elect_lease_duration: str,
    leader_elect_renew_deadline: str,
    leader_elect_retry_period: str,
    sync_period: str,
    manage_access: bool,
    trust_node_labels: bool,
    disruption_grant_timeout: str,
    approve_node_certificates: bool,
    metrics_bind_address: str,
    health_probe_bind_address: str,
    log_format: str,
    log_level: str,
) -> None:
    """Run the fleet controller: ConfigSet status, stale nodes, Secret access, rollouts."""
    import signal

    from nodemanager.controller.manager import Controller, Options

    setup_logging(log_format, "debug" if verbosity(click.get_current_context()) else log_level)
    options = Options(
        kubeconfig=kubeconfig,
        context=context,
        namespace=namespace,
        leader_elect=leader_elect,
        identity=leader_elect_identity,
        sync_period=duration(sync_period, "--sync-period"),
        manage_access=manage_access,
        trust_node_labels=trust_node_labels,
        disruption_grant_timeout=duration(disruption_grant_timeout, "--disruption-grant-timeout"),
        approve_node_certificates=approve_node_certificates,
        metrics_bind_address=metrics_bind_address,
        health_probe_bind_address=health_probe_bind_address,
        lease_duration=duration(leader_elect_lease_duration, "--leader-elect-lease-duration"),
        renew_deadline=duration(leader_elect_renew_deadline, "--leader-elect-renew-deadline"),
        retry_period=duration(leader_elect_retry_period, "--leader-elect-retry-period"),
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
