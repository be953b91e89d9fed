"""The ``kerneltune`` command group; each command is a module of its own (docs/cli.md).

Exit status: 0 on success, 1 on failure (one line on stderr), 2 on bad usage.
"""

from __future__ import annotations

import warnings
from typing import Any

import click
from kerneltune import __version__
from kerneltune.cli.cache_commands import cache
from kerneltune.cli.plugins_command import plugins
from kerneltune.cli.portfolio_command import portfolio
from kerneltune.cli.report_command import report
from kerneltune.core import KernelTuneError


class _Group(click.Group):
    """Turns kerneltune's and the system's errors into click's one-line failure (exit 1)."""

    def invoke(self, ctx: click.Context) -> Any:
        with warnings.catch_warnings():
            warnings.showwarning = _note
            try:
                return super().invoke(ctx)
            except BrokenPipeError:
                # A reader that stopped early (`| head`): click's own handling leaves quietly.
                raise
            except (KernelTuneError, OSError) as exc:
                raise click.ClickException(" ".join(str(exc).split()) or type(exc).__name__) from exc


def _note(message: Warning | str, category: type[Warning], *args: Any, **kwargs: Any) -> None:
    """Show a warning as one line on stderr, as the command's own notes are, without Python's source line."""
    text = " ".join(str(message).split())
    click.echo(text if text.startswith("kerneltune:") else f"{category.__name__}: {text}", err=True)


@click.group(cls=_Group, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="kerneltune")
def main() -> None:
    """Autotuning for accelerator kernels: inspect the plugins in force and the picks stored on disk."""


main.add_command(plugins)
main.add_command(cache)
main.add_command(report)
main.add_command(portfolio)
