"""`nodemanager completion bash|zsh|fish`: the shell's completion script, from click's."""

from __future__ import annotations

import click
from click.shell_completion import get_completion_class

SHELLS = ("bash", "zsh", "fish")


@click.command()
@click.argument("shell", type=click.Choice(SHELLS))
@click.pass_context
def completion(ctx: click.Context, shell: str) -> None:
    """Print the completion script for SHELL.

    \b
    bash: source <(nodemanager completion bash)   (or save it in /etc/bash_completion.d/)
    zsh:  nodemanager completion zsh > "${fpath[1]}/_nodemanager"
    fish: nodemanager completion fish > ~/.config/fish/completions/nodemanager.fish"""
    cls = get_completion_class(shell)
    if cls is None:  # click knows all three; guard against a click without one
        raise click.ClickException(f"no completion for {shell} in this click")
    root = ctx.find_root()
    script = cls(root.command, {}, "nodemanager", "_NODEMANAGER_COMPLETE").source()
    click.echo(script)
