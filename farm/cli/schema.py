"""`farm schema`: print the JSON Schema of experiment files (for editors and scripts)."""

from __future__ import annotations

import json
from pathlib import Path

import click

from farm.errors import ConfigError
from farm.experiment.schema import json_schema


@click.command("schema")
@click.option(
    "--out",
    "out_path",
    type=click.Path(dir_okay=False, path_type=Path),
    default=None,
    help="Write the schema to FILE instead of stdout.",
)
def schema(out_path: Path | None) -> None:
    """Print the JSON Schema of experiment files.

    Editors use it to complete keys and flag mistakes while you type. With the YAML language
    server (VS Code, Neovim), save it once and reference it from the experiment:

    \b
      farm schema --out .farm/experiment.schema.json
      # first line of experiments/my_study.yaml:
      # yaml-language-server: $schema=../.farm/experiment.schema.json
    """
    text = json.dumps(json_schema(), indent=2, sort_keys=False) + "\n"
    if out_path is None:
        click.echo(text, nl=False)
        return
    try:
        out_path.parent.mkdir(parents=True, exist_ok=True)
        out_path.write_text(text, encoding="utf-8")
    except OSError as error:
        raise ConfigError(f"--out {out_path}: cannot write: {error.strerror}") from None
    click.echo(f"wrote {out_path}", err=True)
