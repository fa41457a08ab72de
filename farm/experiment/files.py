"""Experiment files -> Experiment: read, parse with line marks, apply a variant, validate.

`load(path, variant=None)` is the one entry point the CLI and the engine use. Every mistake
becomes a ConfigError whose text is `FILE:LINE: key.path: what is wrong` (the first problem by
line, with a count of the others). Variants are checked too, even when not selected, so a broken
`quick` variant is found before the long run, not after.

This is also the one place the spec reads the disk: an external program's binaries and assets
(paths relative to the experiment file's folder) must be files, found before any phone is touched.
"""

from __future__ import annotations

from pathlib import Path

from pydantic import ValidationError
from yaml.nodes import MappingNode, ScalarNode

from farm.errors import ConfigError
from farm.experiment.checks import Issue
from farm.experiment.loader import compose, find, line_of, overlay, to_python, without_key
from farm.experiment.messages import Problem, at_path, from_validation_error, problems_error
from farm.experiment.model import Experiment, SpecProblem
from farm.safe_yaml import read_text

VARIANTS_KEY = "variants"
# A variant may change anything but these: they identify the experiment or hold the variants.
_NOT_IN_VARIANTS = ("name", VARIANTS_KEY, "variant", "source_dir")


def load(path: str | Path, variant: str | None = None) -> Experiment:
    """Load and validate an experiment file; `variant` selects one of its `variants:`."""
    path = Path(path)
    return load_text(read_text(path, "experiment file"), str(path), variant, source_dir=path.parent)


def load_text(
    text: str, filename: str = "<experiment>", variant: str | None = None, *, source_dir: Path | None = None
) -> Experiment:
    """Like `load`, for text already in memory (`filename` only names it in messages; relative
    binary and asset paths are taken from `source_dir`, else the current directory)."""
    folder = str((source_dir or Path.cwd()).resolve())
    root = compose(text, filename)
    names = _variant_names(root, filename)
    if variant is not None and variant not in names:
        known = ", ".join(names) if names else "none"
        raise ConfigError(
            f"variant {variant!r} is not defined in variants: (defined: {known})",
            location=f"{filename}:{line_of(root, (VARIANTS_KEY,))}",
        )
    experiment = _validate(root, filename, None, folder)
    for name in names:
        checked = _validate(overlay(root, _variant_node(root, name)), filename, name, folder)
        if name == variant:
            experiment = checked
    return experiment


def _variant_names(root: MappingNode, filename: str) -> list[str]:
    node = find(root, (VARIANTS_KEY,))
    if node is None:
        return []
    if not isinstance(node, MappingNode):
        raise ConfigError(
            f"{VARIANTS_KEY}: expected a mapping of variant name -> overrides",
            location=f"{filename}:{node.start_mark.line + 1}",
        )
    names = []
    for key, value in node.value:
        where = f"{filename}:{key.start_mark.line + 1}"
        if not isinstance(value, MappingNode):
            raise ConfigError(
                f"{VARIANTS_KEY}.{key.value}: expected a mapping of overrides "
                "(e.g. measurement: {repetitions: 1})",
                location=where,
            )
        for inner_key, _ in value.value:
            if isinstance(inner_key, ScalarNode) and inner_key.value in _NOT_IN_VARIANTS:
                raise ConfigError(
                    f"{VARIANTS_KEY}.{key.value}.{inner_key.value}: a variant cannot change this",
                    location=f"{filename}:{inner_key.start_mark.line + 1}",
                )
        names.append(str(key.value))
    return names


def _variant_node(root: MappingNode, name: str) -> MappingNode:
    node = find(root, (VARIANTS_KEY, name))
    assert isinstance(node, MappingNode)
    return node


def _validate(root: MappingNode, filename: str, variant: str | None, folder: str) -> Experiment:
    data = to_python(root)
    if variant is not None:
        data = to_python(without_key(root, VARIANTS_KEY)) | {"variant": variant}
    elif "variant" in data:
        raise ConfigError(
            "variant: unknown key; define variants under variants: and pick one with --variant",
            location=f"{filename}:{line_of(root, ('variant',))}",
        )
    if "source_dir" in data:  # the loader's own field: the file's folder
        raise ConfigError("source_dir: unknown key", location=f"{filename}:{line_of(root, ('source_dir',))}")
    try:
        experiment = Experiment.model_validate(data | {"source_dir": folder})
        problems = [at_path(issue.path, issue.message, root) for issue in _missing_files(experiment)]
        if not problems:
            return experiment
    except ValidationError as error:
        problems = from_validation_error(error, root, Experiment)
    except SpecProblem as problem:
        problems = [at_path(issue.path, issue.message, root) for issue in problem.issues]
    problems.sort(key=lambda p: p.line)
    raise _config_error(problems, filename, variant)


def _missing_files(experiment: Experiment) -> list[Issue]:
    """An external program's binaries and assets that are not files (relative to source_dir)."""
    benchmark = experiment.benchmark
    places: list[tuple[tuple[str | int, ...], str, str]] = [
        (("benchmark", "binary", abi.value), path, f"binary for {abi.value}")
        for abi, path in benchmark.binary.items()
    ]
    places += [(("benchmark", "assets", index), path, "asset") for index, path in enumerate(benchmark.assets)]
    issues = []
    for key_path, path, what in places:
        resolved = experiment.resolve_path(path)
        if not resolved.is_file():
            state = "is a folder, not a file" if resolved.is_dir() else "does not exist"
            issues.append(Issue(key_path, f"{what} {path} {state} (looked at {resolved})"))
    return issues


def _config_error(problems: list[Problem], filename: str, variant: str | None) -> ConfigError:
    return problems_error(problems, filename, f" [in variant {variant}]" if variant else "")
