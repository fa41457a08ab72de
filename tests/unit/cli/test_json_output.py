"""`--json` output is strict JSON: no NaN or Infinity, and every command's --json goes through it."""

from __future__ import annotations

import ast
import json
import math
from pathlib import Path

import pytest

import farm.cli
from farm.cli.json_output import json_text


def strict_loads(text: str) -> object:
    """json.loads that refuses NaN / Infinity as a strict parser (jq, JavaScript) does."""

    def refuse(constant: str) -> object:
        raise ValueError(f"{constant} is not JSON")

    return json.loads(text, parse_constant=refuse)


def test_non_finite_floats_become_null_at_any_depth() -> None:
    document = {
        "a": math.nan,
        "b": [1.5, math.inf, (-math.inf, 2)],
        "c": {"d": {"e": float("1e309")}},
        "f": "nan",
    }
    assert strict_loads(json_text(document)) == {
        "a": None,
        "b": [1.5, None, [None, 2]],
        "c": {"d": {"e": None}},
        "f": "nan",
    }
    with pytest.raises(ValueError, match="Infinity is not JSON"):
        strict_loads(json.dumps({"x": math.inf}))  # what the commands printed before


CLI_DIR = Path(farm.cli.__file__).parent


def _modules_with_a_json_option() -> list[Path]:
    found = []
    for path in sorted(CLI_DIR.glob("*.py")):
        tree = ast.parse(path.read_text())
        options = [
            node
            for node in ast.walk(tree)
            if isinstance(node, ast.Call)
            and any(isinstance(a, ast.Constant) and a.value == "--json" for a in node.args)
        ]
        if options:
            found.append(path)
    return found


def test_every_command_with_json_output_prints_through_the_strict_helper() -> None:
    modules = _modules_with_a_json_option()
    assert len(modules) >= 9  # devices, hosts, import, model, regress, run, schedule, status, virtual
    for path in modules:
        tree = ast.parse(path.read_text())
        calls = {
            node.func.id
            for node in ast.walk(tree)
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Name)
        }
        assert "echo_json" in calls, f"{path.name} has a --json option but does not print with echo_json"
        for node in ast.walk(tree):  # no click.echo(json.dumps(...)) left beside it
            if (
                isinstance(node, ast.Call)
                and isinstance(node.func, ast.Attribute)
                and node.func.attr == "echo"
            ):
                for arg in node.args:
                    dumped = (
                        isinstance(arg, ast.Call)
                        and isinstance(arg.func, ast.Attribute)
                        and arg.func.attr == "dumps"
                    )
                    assert not dumped, f"{path.name}:{node.lineno}: prints json.dumps instead of echo_json"
