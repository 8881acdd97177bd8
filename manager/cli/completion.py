"""``kfed completion bash|zsh|fish``: the shell completion script (click's), to source."""

from __future__ import annotations

import click
from click.shell_completion import get_completion_class

SHELLS = ("bash", "zsh", "fish")
COMPLETE_VAR = "_KFED_COMPLETE"


@click.command("completion")
@click.argument("shell", type=click.Choice(SHELLS))
@click.pass_context
def command(ctx: click.Context, shell: str) -> None:
    """Print the shell completion script for SHELL (bash, zsh or fish).

    Completes commands, options and choices (such as -o's formats) as you type.

    \b
    Examples:
      source <(kfed completion bash)          # bash, this shell; add to ~/.bashrc to keep it
      kfed completion zsh > "${fpath[1]}/_kfed"   # zsh (or: source <(kfed completion zsh))
      kfed completion fish > ~/.config/fish/completions/kfed.fish
    """
    root = ctx.find_root()  # the kfed group
    cls = get_completion_class(shell)
    if cls is None:  # click knows all three; kept for mypy
        raise click.UsageError(f"no completion for {shell}")
    completer = cls(root.command, {}, "kfed", COMPLETE_VAR)
    click.echo(completer.source())
