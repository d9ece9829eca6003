"""The nodemanager command line: the only package that prints or installs log handlers.

One module per command group; this module holds the root group and registers them. A new
command group is a module here that defines click commands, added to `main` below. Commands
import heavy libraries (kubernetes, ansible_runner, jinja2) inside their bodies, so that
`--help`, `--version` and `completion` start fast (bench/cli_start.py measures it).

Options given before a subcommand hold for it (`nodemanager -n NS rbac`), `-v` counts
wherever it stands, upstream's agent flags are translated (`upstream.py`), and no command
ends in a traceback (`errors.py`)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import click

from nodemanager.cli import access, agent, completion, controller, local, migrate, rollout, upstream
from nodemanager.cli.errors import Root
from nodemanager.cli.options import add_verbose, emit, pass_down
from nodemanager.version import build_info


def show_version(ctx: click.Context, wanted: bool) -> None:
    if wanted:
        click.echo(build_info().line())
        ctx.exit()


class Main(Root):
    def parse_args(self, ctx: click.Context, args: list[str]) -> list[str]:
        return super().parse_args(ctx, upstream.accept(args) if ctx.parent is None else args)


@click.group(cls=Main, invoke_without_command=True)
@click.option(
    "--version",
    is_flag=True,
    expose_value=False,
    is_eager=True,
    help="Show the version, commit and commit date, and exit.",
    callback=lambda ctx, _param, value: show_version(ctx, value),
)
@agent.run_options
@click.pass_context
def main(ctx: click.Context, /, **options: Any) -> None:
    """Keep this host's packages, files, services and commands as ConfigSets declare them.

    Without a command, runs the agent (the same as `nodemanager run`). Options before a
    command hold for it: `nodemanager -n NS --context C rollout status configset/X`."""
    if ctx.invoked_subcommand is None:
        ctx.invoke(agent.run, **options)
    else:
        pass_down(ctx)


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
    info = build_info()
    if output_format == "text":
        click.echo(info.line())
    else:
        emit(
            [{"nodemanagerVersion": info.version, "commit": info.commit, "date": info.date}],
            output_format,
        )


COMMANDS: Sequence[click.Command] = (
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
    completion.completion,
    migrate.migrate,
)
for command in COMMANDS:
    main.add_command(command)
add_verbose(main)

__all__ = ["main"]

if __name__ == "__main__":
    main()
