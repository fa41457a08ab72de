"""`farm schema`: a JSON Schema that editors can use, consistent with the model."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import yaml
from click.testing import CliRunner

from farm.cli.schema import schema
from farm.spec.model import Experiment
from farm.spec.programs import Program
from farm.spec.schema import json_schema

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
    assert set(document["properties"]) == set(Experiment.model_fields) - {"variant"}


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
