"""The `farm` command: a click group that wires command modules together.

Each command group lives in its own module under farm/cli/ and exposes a click command or group;
it is registered in COMMANDS below. Errors derived from FarmError become one line on stderr and the
error's exit code; nothing here prints a traceback for a user mistake.
"""

from __future__ import annotations

import importlib
import sys

import click

from farm import __version__
from farm.errors import FarmError
from farm.safe_text import terminal

# (module, attribute) of every top-level command, in the order `farm --help` lists them.
COMMANDS: tuple[tuple[str, str], ...] = (
    ("farm.cli.virtual", "virtual"),
    ("farm.cli.schema", "schema"),
    ("farm.cli.devices", "devices"),
    ("farm.cli.hosts", "hosts"),
    ("farm.cli.run", "run"),
    ("farm.cli.status", "status"),
    ("farm.cli.report", "report"),
    ("farm.cli.export", "export"),
    ("farm.cli.importer", "import_"),
    ("farm.cli.model", "model"),
    ("farm.cli.schedule", "schedule"),
    ("farm.cli.regress", "regress"),
    ("farm.cli.compare", "compare"),
)


@click.group(context_settings={"help_option_names": ["-h", "--help"], "max_content_width": 100})
@click.version_option(__version__, prog_name="farm")
def cli() -> None:
    """farm: run deep-learning benchmarks on a lab of Android phones.

    \b
    Typical session:
      farm virtual up --count 4        # no phones at hand? start virtual ones
      farm devices                     # what phones are there
      farm run experiments/smoke.yaml  # plan, run on all phones in parallel, store
      farm report smoke                # HTML + Markdown report with figures

    Results live in results/farm.db (SQLite) and results/<experiment>/.
    """


def _register() -> None:
    for module_name, attribute in COMMANDS:
        module = importlib.import_module(module_name)
        cli.add_command(getattr(module, attribute))


def main(argv: list[str] | None = None) -> None:
    _register()
    try:
        cli.main(args=argv, prog_name="farm", standalone_mode=False)
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
