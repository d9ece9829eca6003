"""Options and helpers the command modules share: kubeconfig, namespace, output, errors."""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from typing import Any, TypeVar

import click

from nodemanager.api import parse_duration

F = TypeVar("F", bound=Callable[..., Any])
T = TypeVar("T")


def labels(text: str | None) -> dict[str, str]:
    from nodemanager.host.labels import parse_label_args

    try:
        return parse_label_args(text) if text else {}
    except ValueError as e:
        raise click.BadParameter(str(e), param_hint="--node-labels") from e


def default_kubeconfig() -> str:
    """kubectl's rule: the first file named in $KUBECONFIG (a path list), else ~/.kube/config."""
    for entry in os.environ.get("KUBECONFIG", "").split(os.pathsep):
        if entry:
            return entry
    return os.path.expanduser("~/.kube/config")


def kubeconfig_option(help_text: str) -> Callable[[F], F]:
    return click.option(
        "--kubeconfig",
        default=default_kubeconfig,
        show_default="$KUBECONFIG, else ~/.kube/config",
        help=help_text,
    )


def namespace_option() -> Callable[[F], F]:
    return click.option(
        "-n",
        "--namespace",
        default="nodemanager",
        show_default=True,
        help="Namespace of ConfigSets, ManagedNodes and the node's account.",
    )


def duration(text: str) -> float:
    try:
        return parse_duration(text)
    except ValueError as e:
        raise click.BadParameter(str(e)) from None


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


def kube_call(call: Callable[[], T]) -> T:
    from nodemanager.kube.errors import KubeError

    try:
        return call()
    except KubeError as e:
        raise click.ClickException(str(e)) from e
    except OSError as e:
        raise click.ClickException(f"{e.filename or ''}: {e.strerror or e}") from e


def kube_errors(f: F) -> F:
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
