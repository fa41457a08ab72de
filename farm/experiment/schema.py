"""JSON Schema of experiment files, for editors (YAML language servers) and other tools (pure)."""

from __future__ import annotations

from typing import Any

from farm.experiment.model import Experiment

SCHEMA_DIALECT = "https://json-schema.org/draft/2020-12/schema"


def json_schema() -> dict[str, Any]:
    """The schema of an experiment file; point `# yaml-language-server: $schema=FILE` at it."""
    schema = Experiment.model_json_schema(mode="validation")
    # The file also accepts the shorthands `devices: all` and `devices: [serial, ...]`.
    devices = schema["properties"]["devices"]
    schema["properties"]["devices"] = {
        "anyOf": [
            {"const": "all"},
            {"type": "array", "items": {"type": "string"}},
            {key: value for key, value in devices.items() if key != "default"},
        ],
        "default": "all",
    }
    # `output: jsonl` is the shorthand of `output: {adapter: jsonl}`.
    output = schema["$defs"]["Benchmark"]["properties"]["output"]
    output["anyOf"].insert(0, {"$ref": "#/$defs/AdapterName"})
    return {
        "$schema": SCHEMA_DIALECT,
        "$id": "https://farm.invalid/schemas/experiment.json",
        **schema,
        "title": "farm experiment",
    }
