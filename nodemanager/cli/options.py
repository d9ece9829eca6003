"""Options and helpers the command modules share: kubeconfig, namespace, output, errors."""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from typing import Any, TypeVar

import click
from click.core import ParameterSource

F = TypeVar("F", bound=Callable[..., Any])


def labels(text: str | None) -> dict[str, str]:
    from nodemanager.host.labels import parse_label_args

    try:
        return parse_label_args(text) if text else {}
    except ValueError as e:
        raise click.BadParameter(str(e), param_hint="--node-labels") from e


def default_kubeconfig() -> str:
    """kubectl's rule: every file named in $KUBECONFIG (a path list, merged), else
    ~/.kube/config."""
    listed = [p for p in os.environ.get("KUBECONFIG", "").split(os.pathsep) if p]
    return os.pathsep.join(listed) if listed else os.path.expanduser("~/.kube/config")


def kubeconfig_option(help_text: str) -> Callable[[F], F]:
    return click.option(
        "--kubeconfig",
        default=default_kubeconfig,
        show_default="$KUBECONFIG (all its files, merged), else ~/.kube/config",
        help=help_text,
    )


def context_option() -> Callable[[F], F]:
    return click.option(
        "--context", default=None, help="Kubeconfig context to use (default: its current)."
    )


def namespace_option() -> Callable[[F], F]:
    return click.option(
        "-n",
        "--namespace",
        default="nodemanager",
        show_default=True,
        help="Namespace of ConfigSets, ManagedNodes and the node's account.",
    )


def api_options(help_text: str) -> Callable[[F], F]:
    """--kubeconfig, --context and -n: what every command that talks to the API takes."""

    def decorate(f: F) -> F:
        return kubeconfig_option(help_text)(context_option()(namespace_option()(f)))

    return decorate


def pass_down(ctx: click.Context) -> None:
    """Options given before a subcommand hold for it as if given after it (`nodemanager -n NS
    rbac`); the subcommand's own flag wins. An option the subcommand has not is an error,
    never silently ignored. Matched by flag, so a flag means the same on both sides."""
    name = ctx.invoked_subcommand
    group = ctx.command
    sub = group.get_command(ctx, name) if name and isinstance(group, click.Group) else None
    if name is None or sub is None:
        return
    by_flag = {o: p.name for p in sub.params if isinstance(p, click.Option) for o in p.opts}
    values: dict[str, Any] = {}
    for param in group.params:
        if not isinstance(param, click.Option) or not param.expose_value or not param.name:
            continue
        if ctx.get_parameter_source(param.name) in (None, ParameterSource.DEFAULT):
            continue
        target = next((by_flag[o] for o in param.opts if o in by_flag), None)
        if target is None:
            raise click.UsageError(
                f"{param.opts[-1]} is not an option of `{ctx.command_path} {name}`", ctx
            )
        values[target] = ctx.params[param.name]
    default_map = dict(ctx.default_map or {})
    default_map[name] = {**(default_map.get(name) or {}), **values}
    ctx.default_map = default_map


def _count_verbose(ctx: click.Context, _: click.Parameter, value: int) -> None:
    if not value:
        return
    root = ctx.find_root()
    level = root.meta["nodemanager.verbose"] = root.meta.get("nodemanager.verbose", 0) + value
    from nodemanager.cli.logs import setup_logging

    setup_logging("text", "debug" if level > 1 else "info")


def add_verbose(command: click.Command) -> None:
    """-v (info logs, a traceback with errors), -vv (debug) on every command and group, so it
    counts wherever it is placed."""
    command.params.append(
        click.Option(
            ["-v", "--verbose"],
            count=True,
            expose_value=False,
            callback=_count_verbose,
            help="More output: -v info logs and a traceback with errors, -vv debug.",
        )
    )
    if isinstance(command, click.Group):
        for sub in command.commands.values():
            add_verbose(sub)


def duration(text: str, flag: str) -> float:
    """``text`` in seconds; bad input is a usage error naming ``flag`` (the option's value is
    parsed here, after click, so click cannot name it)."""
    from nodemanager.api import parse_duration

    try:
        return parse_duration(text)
    except ValueError as e:
        raise click.BadParameter(str(e), param_hint=f"'{flag}'") from None


def output_format_option(default: str = "yaml") -> Callable[[F], F]:
    return click.option(
        "-o",
        "--output",
        "output_format",
        type=click.Choice(["yaml", "json"]),
        default=default,
        show_default=True,
        help="Output format.",
    )


def emit(documents: list[Any], output_format: str) -> None:
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
