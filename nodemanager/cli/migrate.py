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
    every meaning that changes (stderr), each line with where it is: FILE:LINE in the input
    with -f, output:LINE in what is printed when read from the cluster. A dry run: nothing is
    written; apply the output with `kubectl apply -f -` (any number of times) after reading the
    report. Exit 1 when something needs a hand edit."""
    import yaml

    from nodemanager.cli.yamlpos import Spots, dump_all, line_of, positions
    from nodemanager.desired.migrate import migrate as convert

    docs: list[object] = []
    where: list[tuple[str, Spots]] = []  # per input document: its file and field lines
    if files:
        for name in files:
            try:
                with click.open_file(name) as stream:
                    text = stream.read()
                loaded = list(yaml.safe_load_all(text))
                per_doc = positions(text)
            except (OSError, yaml.YAMLError) as e:
                raise click.ClickException(f"{name}: {e}") from e
            for doc, spot in zip(loaded, per_doc, strict=True):
                if doc is not None:
                    docs.append(doc)
                    where.append(("<stdin>" if name == "-" else name, spot))
    else:
        from nodemanager.kube.client import ClientFactory
        from nodemanager.kube.errors import KubeError
        from nodemanager.kube.export import export

        try:
            docs = list(export(ClientFactory(kubeconfig, context=context), namespace))
        except (KubeError, OSError, ValueError) as e:
            raise click.ClickException(f"cannot read namespace {namespace}: {e}") from e
    result = convert(d if isinstance(d, dict) else {} for d in docs)
    output = dump_all(result.objects)
    if not files:  # the cluster has no lines: point into what is printed
        printed = positions(output)
        by_input = {src: printed[i] for i, src in enumerate(result.sources)}
        where = [("output", by_input.get(i, {})) for i in range(len(docs))]
    click.echo(output, nl=False)
    for kind in ("note", "changes", "edit"):
        for note in (n for n in result.notes if n.kind == kind):
            source, spots = where[note.doc]
            line = line_of(spots, note.path, note.line)
            at = f"{source}:{line}: " if line else ""
            click.echo(f"{kind}: {at}{note}", err=True)
    if not result.changes and not result.flagged:
        click.echo("no meaning changes", err=True)
    if result.flagged:
        sys.exit(1)
