"""`farm schema`: a JSON Schema that editors can use, consistent with the model."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import yaml
from click.testing import CliRunner

from farm.cli.schema import schema
from farm.experiment.model import Experiment
from farm.experiment.programs import Program
from farm.experiment.schema import json_schema

EXPERIMENTS = sorted((Path(__file__).parents[3] / "experiments").glob("*.yaml"))


def _refs(node: Any) -> list[str]:
    if isinstance(node, dict):
        found = [node["$ref"]] if "$ref" in node else []
        return found + [ref for value in node.values() for ref in _refs(value)]
    if isinstance(node, list):
        return [ref for value in node for ref in _refs(value)]
    return []


def test_schema_is_a_closed_object_schema_of_the_model() -> None:
    document = json_schema()
    assert document["$schema"].startswith("https://json-schema.org/")
    assert document["type"] == "object"
    assert document["additionalProperties"] is False
    assert set(document["required"]) == {"name", "benchmark"}
    assert set(document["properties"]) == set(Experiment.model_fields) - {"variant", "source_dir"}


def test_every_ref_resolves_and_every_section_is_closed() -> None:
    document = json_schema()
    definitions = document["$defs"]
    for ref in _refs(document):
        assert ref.startswith("#/$defs/") and ref.removeprefix("#/$defs/") in definitions
    for name, definition in definitions.items():
        if definition.get("type") == "object":
            assert definition.get("additionalProperties") is False, name


def test_program_choices_come_from_the_registry() -> None:
    definitions = json_schema()["$defs"]
    assert definitions["Program"]["enum"] == [program.value for program in Program]


def test_shipped_experiments_use_only_schema_keys() -> None:
    document = json_schema()
    definitions = document["$defs"]
    for path in EXPERIMENTS:
        data = yaml.safe_load(path.read_text())
        assert set(data) <= set(document["properties"]), path
        for section in ("measurement", "telemetry", "conditions", "timeouts", "retries", "gpu_load"):
            if section in data:
                ref = document["properties"][section]["$ref"].removeprefix("#/$defs/")
                assert set(data[section]) <= set(definitions[ref]["properties"]), (path, section)


def test_cli_prints_json_and_writes_out(tmp_path: Path) -> None:
    runner = CliRunner()
    printed = runner.invoke(schema, [])
    assert printed.exit_code == 0
    assert json.loads(printed.output) == json_schema()
    out = tmp_path / "sub" / "experiment.schema.json"
    written = runner.invoke(schema, ["--out", str(out)])
    assert written.exit_code == 0
    assert json.loads(out.read_text()) == json_schema()
    assert "farm schema --out" in runner.invoke(schema, ["--help"]).output


def test_schema_is_registered_in_the_farm_command(tmp_path: Path) -> None:
    from farm.cli.main import main

    out = tmp_path / "schema.json"
    main(["schema", "--out", str(out)])
    assert json.loads(out.read_text())["title"] == "farm experiment"


# A small subset of JSON Schema (what pydantic emits for this model), enough to check that the
# schema accepts the shipped files -- an editor using it must not flag a valid experiment.
def _errors(value: Any, node: dict[str, Any], defs: dict[str, Any], path: str = "") -> list[str]:
    if "$ref" in node:
        return _errors(value, defs[node["$ref"].removeprefix("#/$defs/")], defs, path)
    if "anyOf" in node:
        branches = [_errors(value, option, defs, path) for option in node["anyOf"]]
        return [] if any(not b for b in branches) else [f"{path}: no anyOf branch fits {value!r}"]
    if "const" in node and value != node["const"]:
        return [f"{path}: {value!r} != {node['const']!r}"]
    if "enum" in node and value not in node["enum"]:
        return [f"{path}: {value!r} not in {node['enum']}"]
    kind = node.get("type")
    checks = {
        "object": lambda v: isinstance(v, dict),
        "array": lambda v: isinstance(v, list),
        "string": lambda v: isinstance(v, str),
        "integer": lambda v: isinstance(v, int) and not isinstance(v, bool),
        "number": lambda v: isinstance(v, int | float) and not isinstance(v, bool),
        "boolean": lambda v: isinstance(v, bool),
        "null": lambda v: v is None,
    }
    if kind is not None and not checks[kind](value):
        return [f"{path}: expected {kind}, got {value!r}"]
    if "pattern" in node and not re.search(node["pattern"], value):
        return [f"{path}: {value!r} does not match {node['pattern']}"]
    problems: list[str] = []
    if kind == "object":
        properties = node.get("properties", {})
        problems += [f"{path}.{key}: required" for key in node.get("required", []) if key not in value]
        for key, item in value.items():
            if key in properties:
                problems += _errors(item, properties[key], defs, f"{path}.{key}")
            elif node.get("additionalProperties") is False:
                problems.append(f"{path}.{key}: not allowed")
            elif isinstance(node.get("additionalProperties"), dict):
                problems += _errors(item, node["additionalProperties"], defs, f"{path}.{key}")
    if kind == "array" and "items" in node:
        for index, item in enumerate(value):
            problems += _errors(item, node["items"], defs, f"{path}[{index}]")
    return problems


def test_schema_accepts_every_shipped_experiment_and_rejects_a_typo() -> None:
    document = json_schema()
    for path in EXPERIMENTS:
        data = yaml.safe_load(path.read_text())
        assert _errors(data, document, document["$defs"]) == [], path
    typo = {"name": "x", "benchmark": {"program": "lstm"}, "measurement": {"iteration": 3}}
    assert _errors(typo, document, document["$defs"]) == [".measurement.iteration: not allowed"]
    shorthand = {"name": "x", "benchmark": {"program": "lstm"}, "devices": "all"}
    assert _errors(shorthand, document, document["$defs"]) == []


def test_schema_takes_the_clock_shorthands_the_model_takes() -> None:
    document = json_schema()
    base = {"name": "x", "benchmark": {"program": "lstm"}}
    for clocks in ("pin", {"mode": "auto", "cpu": "max", "gpu": 0.5}, {"mode": "pin", "cpu": "1800MHz"}):
        data = {**base, "conditions": {"clocks": clocks}}
        assert _errors(data, document, document["$defs"]) == [], clocks
        Experiment.model_validate(data)
    for clocks in ("fast", {"mode": "pin", "cpu": "fast"}, {"mode": "pin", "gpu": "1800 rpm"}):
        data = {**base, "conditions": {"clocks": clocks}}
        assert _errors(data, document, document["$defs"]) != [], clocks
