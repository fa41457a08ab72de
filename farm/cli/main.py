"""The `farm` command: a click group that wires command modules together.

Each command group lives in its own module under farm/cli/ and exposes a click command or group;
it is registered by name in COMMANDS below and imported only when that command is invoked (or
`farm --help` lists them all): `farm run` need not import the report, analysis and plotting
modules of `farm report` (seconds per start on a small machine). Errors derived from FarmError
become one line on stderr and the error's exit code; nothing here prints a traceback for a user
mistake.
"""

from __future__ import annotations

import importlib
import sys

import click

from farm import __version__, crashlog
from farm.errors import FarmError
from farm.safe_text import terminal

# name -> (module, attribute) of every top-level command; `farm --help` lists them sorted by name,
# as click does for the commands it holds. tests/unit/cli/test_cli_commands.py checks each name is
# the one its command declares.
COMMANDS: dict[str, tuple[str, str]] = {
    "virtual": ("farm.cli.virtual", "virtual"),
    "schema": ("farm.cli.schema", "schema"),
    "devices": ("farm.cli.devices", "devices"),
    "doctor": ("farm.cli.doctor", "doctor"),
    "hosts": ("farm.cli.hosts", "hosts"),
    "run": ("farm.cli.run", "run"),
    "status": ("farm.cli.status", "status"),
    "report": ("farm.cli.report", "report"),
    "export": ("farm.cli.export", "export"),
    "import": ("farm.cli.importer", "import_"),
    "model": ("farm.cli.model", "model"),
    "schedule": ("farm.cli.schedule", "schedule"),
    "regress": ("farm.cli.regress", "regress"),
    "compare": ("farm.cli.compare", "compare"),
}


def load_command(name: str) -> click.Command:
    module_name, attribute = COMMANDS[name]
    command: click.Command = getattr(importlib.import_module(module_name), attribute)
    return command


class _LazyGroup(click.Group):
    """A group whose commands are imported when asked for by name (see the module docstring)."""

    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted(COMMANDS)

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        return load_command(cmd_name) if cmd_name in COMMANDS else None


@click.group(
    cls=_LazyGroup,
    context_settings={"help_option_names": ["-h", "--help"], "max_content_width": 100},
)
@click.version_option(__version__, prog_name="farm")
@click.option(
    "--debug", is_flag=True, help="on an internal error, print its stack here too (it always goes to the log)"
)
def cli(debug: bool) -> None:
    """farm: run deep-learning benchmarks on a lab of Android phones.

    \b
    Typical session:
      farm virtual up --count 4        # no phones at hand? start virtual ones
      farm devices                     # what phones are there
      farm run experiments/smoke.yaml  # plan, run on all phones in parallel, store
      farm report smoke                # HTML + Markdown report with figures

    Results live in results/farm.db (SQLite) and results/<experiment>/. A bug in farm is one
    line naming the log that holds its stack (results/farm.log); `farm --debug ...` prints it.
    """
    if debug:
        crashlog.echo_stacks()


def main(argv: list[str] | None = None) -> None:
    args = sys.argv[1:] if argv is None else argv
    try:
        cli.main(args=args, prog_name="farm", standalone_mode=False)
    except FarmError as error:
        click.echo(terminal(f"farm: {error}"), err=True)  # it may quote a phone or a file
        sys.exit(error.exit_code)
    except click.exceptions.Abort:
        click.echo("farm: interrupted", err=True)
        sys.exit(130)
    except click.ClickException as error:
        error.show()
        sys.exit(error.exit_code)
    except KeyboardInterrupt:
        click.echo("farm: interrupted", err=True)
        sys.exit(130)
    except Exception as error:  # a bug in farm: one line here, the stack in the log
        stack_at = crashlog.record(error, "farm " + " ".join(args))
        line = f"internal error: {type(error).__name__}: {error} (stack in {stack_at}; --debug prints it)"
        click.echo(terminal(f"farm: {line}"), err=True)
        sys.exit(1)
