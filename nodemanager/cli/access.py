"""Admitting nodes: `rbac` objects to apply, `token` and `bootstrap` credentials, `revoke`."""

from __future__ import annotations

import sys

import click

from nodemanager.cli.options import (
    api_options,
    context_option,
    duration,
    emit,
    labels,
    namespace_option,
    output_format_option,
)


def _default_node_kubeconfig() -> str:
    return (
        "/usr/local/etc/nodemanager/kubeconfig"
        if sys.platform.startswith("freebsd")
        else "/etc/nodemanager/kubeconfig"
    )


@click.command()
@click.option(
    "--hostname", help="Print this node's objects, after the Namespace and its guard of it."
)
@click.option(
    "--shared",
    is_flag=True,
    help="Print the objects every node shares: the Namespace and the admission policies.",
)
@namespace_option()
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
    "--upstream-wireguard",
    default="",
    help="Comma-separated WireGuard interfaces whose key upstream kept in the Secret "
    "wg-<interface>-<host>: the node may read that Secret once, to keep its key (migration).",
)
@click.option(
    "--drain",
    is_flag=True,
    help="Also let the node cordon and drain the Kubernetes Node of its name before upgrades "
    "(cluster-wide: list pods, create evictions).",
)
@click.option(
    "--certificate",
    is_flag=True,
    help="Also bind every grant to the node's client certificate (user "
    "nodemanager:node:<namespace>:<host>) and let it ask for one (`bootstrap --certificate`).",
)
@output_format_option()
def rbac(
    hostname: str | None,
    shared: bool,
    namespace: str,
    node_labels: str | None,
    lease_groups: str,
    upstream_wireguard: str,
    drain: bool,
    certificate: bool,
    output_format: str,
) -> None:
    """Print RBAC objects to apply yourself: `--shared` once, then `--hostname H` per node.

    The per-node output applies on a fresh cluster: it starts with the Namespace and the node's
    guard of it (a ValidatingAdmissionPolicy refusing to delete the Namespace), so piping it
    to `kubectl delete -f -` removes that node and keeps the Namespace (kubectl reports the
    refusal). The admission policies that isolate nodes are in `--shared` only: kubectl could
    not be kept from deleting them with one node. It grants no Secret or ConfigMap: the fleet
    controller (`nodemanager controller`, deploy/controller.yaml) grants each node exactly those its
    ConfigSets reference, so ConfigSets with secretRefs or configMapRefs need it running."""
    from nodemanager.bootstrap.rbac import manifests, name_problems, shared_manifests

    groups = [g.strip() for g in lease_groups.split(",") if g.strip()]
    if not hostname and not shared:
        raise click.UsageError("give --hostname H (one node's objects) and/or --shared")
    problems = name_problems(hostname, groups)
    if problems:
        raise click.UsageError("; ".join(problems))
    wireguard = [i.strip() for i in upstream_wireguard.split(",") if i.strip()]
    host = (
        manifests(hostname, namespace, labels(node_labels), groups, drain, wireguard, certificate)
        if hostname
        else []
    )
    # Both outputs start with the same Namespace document: print it once.
    docs = [*shared_manifests(namespace), *host[1:]] if shared else host
    if hostname and output_format != "json":
        click.echo(SECRETS_NOTE)
    emit(docs, output_format)


SECRETS_NOTE = """\
# Apply `nodemanager rbac --shared` once too: the admission policies that keep each node to its
# own objects are there (this output holds the Namespace, guarded against `kubectl delete -f`).
# No Secret or ConfigMap is granted here. The fleet controller (nodemanager controller,
# deploy/controller.yaml) keeps the Role nodemanager-refs-<node> naming exactly those the node's
# ConfigSets reference: run it when ConfigSets use secretRefs or configMapRefs."""


def _ttl(text: str, flag: str) -> int:
    from nodemanager.bootstrap.credentials import check_ttl

    try:
        return check_ttl(duration(text, flag), flag)
    except ValueError as e:
        raise click.UsageError(str(e)) from None  # the message names the flag


@click.command()
@click.option("--hostname", required=True, help="Target node name.")
@api_options("Admin kubeconfig.")
@click.option(
    "--ttl",
    default="1h",
    show_default=True,
    help="Lifetime of the temporary credential (at most 720h).",
)
@click.option(
    "--out",
    type=click.Path(dir_okay=False),
    help="Write the kubeconfig here (0600, atomically) instead of stdout.",
)
@click.option(
    "--revoke-earlier",
    is_flag=True,
    help="Revoke every earlier token of the node first (a running agent's too: it stops "
    "until bootstrapped again). Without it, re-running `token` cuts nobody off.",
)
def token(
    hostname: str,
    kubeconfig: str,
    context: str | None,
    namespace: str,
    ttl: str,
    out: str | None,
    revoke_earlier: bool,
) -> None:
    """Issue a short-lived bootstrap kubeconfig for a node. Safe to re-run: earlier tokens stay
    valid unless --revoke-earlier (or `revoke`)."""
    from nodemanager.bootstrap.credentials import node_kubeconfig, write_kubeconfig

    seconds = _ttl(ttl, "--ttl")
    text, granted = node_kubeconfig(
        kubeconfig, hostname, namespace, seconds, context, revoke_earlier
    )
    if out:
        write_kubeconfig(out, text)
        click.echo(f"wrote {out} (valid {granted / 3600:.2f} h)", err=True)
    else:
        click.echo(text, nl=False)


@click.command()
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
@context_option()
@namespace_option()
@click.option(
    "--hostname", help="Node name (default: this host's name; must match the one used in `token`)."
)
@click.option(
    "--token-ttl",
    default="168h",
    show_default=True,
    help="Lifetime of the node's token (at most 720h); the agent renews it at about 80%.",
)
@click.option(
    "--certificate",
    is_flag=True,
    help="Make a key on this host and ask for a client certificate (a CSR the fleet "
    "controller approves) instead of a token; needs `rbac --certificate`.",
)
@click.option(
    "--cert-ttl",
    default="24h",
    show_default=True,
    help="With --certificate: the certificate's lifetime (10m to 168h; it cannot be revoked). "
    "The agent renews it at about 80%.",
)
@click.option(
    "--approval-timeout",
    default="15m",
    show_default=True,
    help="With --certificate: how long to wait for the request to be approved and signed.",
)
def bootstrap(
    bootstrap_kubeconfig: str,
    kubeconfig: str,
    context: str | None,
    namespace: str,
    hostname: str | None,
    token_ttl: str,
    certificate: bool,
    cert_ttl: str,
    approval_timeout: str,
) -> None:
    """Exchange a bootstrap kubeconfig for this node's own, renewable kubeconfig."""
    from nodemanager.bootstrap.credentials import node_kubeconfig, write_kubeconfig
    from nodemanager.host.labels import hostname as this_host

    if certificate:
        _bootstrap_certificate(
            bootstrap_kubeconfig,
            kubeconfig,
            context,
            namespace,
            hostname or this_host(),
            cert_ttl,
            approval_timeout,
        )
        return
    seconds = _ttl(token_ttl, "--token-ttl")
    text, granted = node_kubeconfig(
        bootstrap_kubeconfig, hostname or this_host(), namespace, seconds, context
    )
    write_kubeconfig(kubeconfig, text)
    click.echo(
        f"wrote {kubeconfig} (valid {granted / 86400:.1f} days); "
        "the bootstrap kubeconfig can be deleted",
        err=True,
    )


def _bootstrap_certificate(
    bootstrap_kubeconfig: str,
    kubeconfig: str,
    context: str | None,
    namespace: str,
    hostname: str,
    cert_ttl: str,
    approval_timeout: str,
) -> None:
    from nodemanager.bootstrap.certificate import check_lifetime, credential_path, obtain
    from nodemanager.kube.csr import NotIssued

    try:
        seconds = check_lifetime(duration(cert_ttl, "--cert-ttl"), "--cert-ttl")
    except ValueError as e:
        raise click.UsageError(str(e)) from None  # the message names the flag
    timeout = duration(approval_timeout, "--approval-timeout")

    def submitted(name: str) -> None:
        click.echo(
            f"submitted CertificateSigningRequest {name}; waiting up to {approval_timeout} for "
            f"the fleet controller to approve it (or: kubectl certificate approve {name})",
            err=True,
        )

    try:
        issued = obtain(
            bootstrap_kubeconfig,
            kubeconfig,
            hostname,
            namespace,
            seconds,
            timeout,
            context,
            submitted=submitted,
        )
    except NotIssued as e:  # denied, failed or late: the API server answered, no hint
        raise click.ClickException(str(e)) from None
    click.echo(
        f"wrote {kubeconfig} and {credential_path(kubeconfig)} (certificate for "
        f"{issued.common_name}, valid "
        f"{(issued.not_after - issued.not_before) / 3600:.1f} h); "
        "the bootstrap kubeconfig can be deleted",
        err=True,
    )


@click.command()
@click.option("--hostname", required=True, help="The node to revoke.")
@api_options("Admin kubeconfig.")
def revoke(hostname: str, kubeconfig: str, context: str | None, namespace: str) -> None:
    """Revoke a node now: every token of it, and every grant of its client certificate.

    Tokens are revoked themselves (their binding Secret is deleted; the ServiceAccount and RBAC
    stay, `token` re-admits the node). A certificate cannot be: it is valid until it expires,
    so its user is taken out of the node's bindings and can do nothing, not even renew
    (`rbac --certificate` applied again re-admits it)."""
    from nodemanager.bootstrap.certificate import revoke as revoke_certificate
    from nodemanager.bootstrap.credentials import revoke as revoke_tokens

    had_tokens = revoke_tokens(kubeconfig, hostname, namespace, context)
    if had_tokens:
        click.echo(f"revoked every token of node {hostname}", err=True)
    changed = revoke_certificate(kubeconfig, hostname, namespace, context)
    for binding in changed:
        click.echo(f"took node {hostname}'s certificate out of {binding}", err=True)
    if not had_tokens and not changed:
        raise click.ClickException(
            f"node {hostname} has no token binding Secret in {namespace} and its certificate "
            "is in no binding: nothing to revoke (tokens made before bindings end only with "
            "their ServiceAccount)"
        )
