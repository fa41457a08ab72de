"""The `farm` group imports a command's module only when that command runs (farm/cli/main.py)."""

from __future__ import annotations

import subprocess
import sys

import click
import pytest

from farm.cli.main import COMMANDS, SUMMARY_CHARS, cli, load_command


@pytest.mark.parametrize("name", sorted(COMMANDS))
def test_each_registered_name_is_the_name_its_command_declares(name: str) -> None:
    command = load_command(name)
    assert isinstance(command, click.Command)
    assert command.name == name


def test_the_group_lists_and_finds_every_command_and_no_other() -> None:
    context = click.Context(cli)
    assert cli.list_commands(context) == sorted(COMMANDS)
    assert cli.get_command(context, "nosuch") is None


def _in_a_fresh_interpreter(probe: str) -> subprocess.CompletedProcess[str]:
    """Run `probe` in a new Python: this test process has imported everything already."""
    return subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, timeout=120, check=True
    )


def test_farm_run_does_not_import_the_report_and_plotting_modules() -> None:
    probe = (
        "import sys\n"
        "from farm.cli.main import main\n"
        "main(['run', '--help'])\n"
        "print(sorted(m for m in ('farm.cli.report', 'farm.report.render', 'matplotlib', 'pandas')"
        " if m in sys.modules))\n"
    )
    done = _in_a_fresh_interpreter(probe)
    assert "Usage: farm run" in done.stdout
    assert done.stdout.strip().splitlines()[-1] == "[]"


@pytest.mark.parametrize("name", sorted(COMMANDS))
def test_each_listed_summary_is_the_commands_own_short_help(name: str) -> None:
    assert COMMANDS[name].summary == load_command(name).get_short_help_str(SUMMARY_CHARS)


def test_farm_help_lists_every_command_and_imports_none() -> None:
    probe = (
        "import sys\n"
        "from farm.cli.main import main\n"
        "main(['--help'])\n"
        "print(sorted(m for m in sys.modules if m.startswith('farm.cli.') and m != 'farm.cli.main'))\n"
    )
    done = _in_a_fresh_interpreter(probe)
    listed = done.stdout.split("Commands:")[1].splitlines()[1:-1]
    assert [line.split()[0] for line in listed] == sorted(COMMANDS)
    assert "Compare B with A per phone and cell" in done.stdout
    assert done.stdout.strip().splitlines()[-1] == "[]"
