"""The nodemanager command line: the only package that prints or installs log handlers.

One module per command group; this module holds the root group and registers them. A new
command group is a module here that defines click commands, added to `main` below. Commands
import heavy libraries (kubernetes, ansible_runner, jinja2) inside their bodies, so that
`--help`, `--version` and `completion` start fast."""

from __future__ import annotations

from typing import Any

import click

from nodemanager import __version__
from nodemanager.cli import access, agent, controller, local, rollout
from nodemanager.cli.options import emit


@click.group(invoke_without_command=True)
@click.version_option(
    __version__, "--version", prog_name="nodemanager", message="%(prog)s %(version)s"
)
@agent.run_options
@click.pass_context
def main(ctx: click.Context, /, **options: Any) -> None:
    """Keep this host's packages, files, services and commands as ConfigSets declare them.

    Without a command, runs the agent (the same as `nodemanager run`)."""
    if ctx.invoked_subcommand is None:
        ctx.invoke(agent.run, **options)


@click.command()
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
        emit([{"nodemanagerVersion": __version__}], output_format)


for command in (
    agent.run,
    controller.controller,
    rollout.rollout,
    local.restore,
    version,
    local.render,
    local.apply,
    access.rbac,
    access.token,
    access.bootstrap,
    access.revoke,
):
    main.add_command(command)

__all__ = ["main"]

if __name__ == "__main__":
    main()
