"""The `farm` command: a click group that wires command modules together.

Each command group lives in its own module under farm/cli/ and exposes a click command or group;
it is registered by name in COMMANDS below, with the summary `farm --help` lists, and imported
only when that command is invoked: `farm run` need not import the report, analysis and plotting
modules of `farm report` (seconds per start on a small machine). Errors derived from FarmError
become one line on stderr and the error's exit code; nothing here prints a traceback for a user
mistake.
"""

from __future__ import annotations

import importlib
import sys
from dataclasses import dataclass

import click

from farm import __version__, crashlog
from farm.errors import FarmError
from farm.safe_text import terminal


@dataclass(frozen=True)
class Entry:
    """Where a command lives, and its summary for `farm --help` (so that listing the commands
    imports none of them: the report's, for one, takes seconds to import on a small machine)."""

    module: str
    attribute: str
    summary: str  # click's short help of the command at SUMMARY_CHARS; a test keeps them equal


SUMMARY_CHARS = 90
# name -> where every top-level command lives and its summary; `farm --help` lists them sorted by
# name, as click does. tests/unit/cli/test_cli_commands.py checks each name is the one its command
# declares and each summary the command's own.
COMMANDS: dict[str, Entry] = {
    "virtual": Entry(
        "farm.cli.virtual",
        "virtual",
        "Virtual phones (up, list, down, fault): real ADB on TCP ports, an Android-shaped sandbox.",
    ),
    "schema": Entry("farm.cli.schema", "schema", "Print the JSON Schema of experiment files."),
    "devices": Entry(
        "farm.cli.devices",
        "devices",
        "List every phone the adb server sees: identity host/serial, state (online, offline,...",
    ),
    "doctor": Entry(
        "farm.cli.doctor",
        "doctor",
        "Check every capability farm relies on, per phone (SELECTOR: host/serial, serial, adb...",
    ),
    "hosts": Entry(
        "farm.cli.hosts",
        "hosts",
        "The hosts whose adb servers farm uses: this machine and lab hosts reached over SSH...",
    ),
    "run": Entry(
        "farm.cli.run",
        "run",
        "Run an experiment on every eligible phone, in parallel, and store the results.",
    ),
    "status": Entry(
        "farm.cli.status",
        "status",
        "Progress of experiments in the store: runs per state and per phone, failures, recent...",
    ),
    "report": Entry(
        "farm.cli.report",
        "report",
        "Write the report of EXPERIMENT: a single-file HTML page (figures inline, opens...",
    ),
    "export": Entry(
        "farm.cli.export",
        "export",
        "Export the metrics of EXPERIMENT as tidy data: one row per run and metric.",
    ),
    "import": Entry(
        "farm.cli.importer", "import_", "Bring measurements made outside farm into farm's metrics and store."
    ),
    "model": Entry(
        "farm.cli.model",
        "model",
        "Latency and memory predictors, fitted per phone: on sampled kernels...",
    ),
    "schedule": Entry(
        "farm.cli.schedule",
        "schedule",
        "Nightly sweeps: re-run chosen experiments on a cron schedule and flag regressions.",
    ),
    "regress": Entry(
        "farm.cli.regress",
        "regress",
        "Compare the newest nightly of EXPERIMENT (its name, or name.variant) with the previous...",
    ),
    "compare": Entry(
        "farm.cli.compare",
        "compare",
        "Compare B with A per phone and cell: two experiments (EXPERIMENT_A EXPERIMENT_B), or...",
    ),
}


def load_command(name: str) -> click.Command:
    entry = COMMANDS[name]
    command: click.Command = getattr(importlib.import_module(entry.module), entry.attribute)
    return command


class _LazyGroup(click.Group):
    """A group whose commands are imported when asked for by name (see the module docstring)."""

    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted(COMMANDS)

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        return load_command(cmd_name) if cmd_name in COMMANDS else None

    def format_commands(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        # click's own layout, from the summaries: no command module is imported to list them.
        names = self.list_commands(ctx)
        limit = formatter.width - 6 - max(len(name) for name in names)
        rows = [
            (name, click.Command(name, help=COMMANDS[name].summary).get_short_help_str(limit))
            for name in names
        ]
        with formatter.section("Commands"):
            formatter.write_dl(rows)


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
