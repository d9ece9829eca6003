"""`nodemanager migrate`: upstream nodemanager's objects as this project reads them."""

from __future__ import annotations

import sys

import click

from nodemanager.cli.options import api_options


@click.command()
@click.option(
    "-f",
    "--filename",
    "files",
    multiple=True,
    type=click.Path(exists=True, allow_dash=True),
    help="Upstream YAML (repeatable; - reads standard input). Without it, read the cluster.",
)
@api_options("kubeconfig to read upstream's objects from (without -f).")
def migrate(files: tuple[str, ...], kubeconfig: str, context: str | None, namespace: str) -> None:
    """Print upstream's ConfigSets and ManagedNodes as this project reads them, and a report of
    every meaning that changes (stderr). A dry run: nothing is written; apply the output with
    `kubectl apply -f -` after reading the report. Exit 1 when something needs a hand edit."""
    import yaml

    from nodemanager.desired.migrate import migrate as convert

    if files:
        docs: list[object] = []
        for name in files:
            try:
                with click.open_file(name) as stream:
                    docs += [d for d in yaml.safe_load_all(stream) if d is not None]
            except (OSError, yaml.YAMLError) as e:
                raise click.ClickException(f"{name}: {e}") from e
    else:
        from nodemanager.kube.client import ClientFactory
        from nodemanager.kube.errors import KubeError
        from nodemanager.kube.export import export

        try:
            docs = list(export(ClientFactory(kubeconfig, context=context), namespace))
        except (KubeError, OSError, ValueError) as e:
            raise click.ClickException(f"cannot read namespace {namespace}: {e}") from e
    result = convert(d for d in docs if isinstance(d, dict))
    click.echo(yaml.safe_dump_all(result.objects, sort_keys=False), nl=False)
    for line in result.changes:
        click.echo(f"changes: {line}", err=True)
    for line in result.flagged:
        click.echo(f"edit: {line}", err=True)
    if not result.changes and not result.flagged:
        click.echo("no meaning changes", err=True)
    if result.flagged:
        sys.exit(1)
