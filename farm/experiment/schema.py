"""JSON Schema of experiment files, for editors (YAML language servers) and other tools (pure)."""

from __future__ import annotations

from typing import Any

from farm.experiment.model import Experiment

_FREQUENCY_PATTERN = r"^\s*[0-9]+(\.[0-9]+)?\s*([GgMmKk][Hh][Zz])\s*$"
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
    # A clock level is written `max`, `nominal`, `min`, a fraction `0.5` or a frequency `1800MHz`
    # (ClockLevel's shorthands), and `clocks: pin` is `clocks: {mode: pin}`.
    definitions = schema["$defs"]
    definitions["ClockLevel"] = {
        "anyOf": [
            {"enum": ["max", "nominal", "min"]},
            {"type": "number", "exclusiveMinimum": 0, "maximum": 1},
            {"type": "string", "pattern": _FREQUENCY_PATTERN},
            definitions["ClockLevel"],
        ],
        "description": definitions["ClockLevel"].get("description", ""),
    }
    definitions["ClockLevelObject"] = definitions["ClockLevel"]["anyOf"][-1]
    definitions["ClockLevel"]["anyOf"][-1] = {"$ref": "#/$defs/ClockLevelObject"}
    conditions_clocks = definitions["Conditions"]["properties"]["clocks"]
    conditions_clocks["anyOf"] = [{"$ref": "#/$defs/ClockMode"}, {"$ref": conditions_clocks.pop("$ref")}]
    return {
        "$schema": SCHEMA_DIALECT,
        "$id": "https://farm.invalid/schemas/experiment.json",
        **schema,
        "title": "farm experiment",
    }
