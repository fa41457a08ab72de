"""Hostile YAML in a profile file: one ConfigError line naming FILE:LINE, never a crash or a spin."""

from __future__ import annotations

from pathlib import Path

import pytest
from vphone.errors import ConfigError
from vphone.profile import load_profile_file
from vphone.profileyaml import MAX_PROFILE_BYTES


def _laughs() -> str:
    lines = ["props:", "  a: &a [x, x, x, x, x, x, x, x, x]"]
    for previous, name in zip("abcdefgh", "bcdefghi", strict=True):
        lines.append(f"  {name}: &{name} [{', '.join([f'*{previous}'] * 9)}]")
    return "\n".join(lines) + "\n"


# name -> (text after `name: x`, 1-based line the error must name, message piece)
CASES = {
    "recursive alias": ("props: &a [32, *a]\n", 2, "no anchors or aliases"),
    "billion laughs": (_laughs(), 3, "no anchors or aliases"),
    "5,000 nested brackets": (f"props: {'[' * 5000}\n", 2, "nested deeper than 16 levels"),
    "python tag": ("props:\n  - !!python/object/apply:os.system [echo hi]\n", 3, "tag:yaml.org,2002:python"),
    "custom tag": ("props: !mine 3\n", 2, "the tag !mine is not allowed"),
    "unclosed bracket": ("props: [1, 2\n", 3, "invalid YAML"),
}


@pytest.mark.parametrize("case", CASES)
def test_hostile_profile_is_one_line_naming_file_and_line(tmp_path: Path, case: str) -> None:
    body, line, piece = CASES[case]
    path = tmp_path / "x.yaml"
    path.write_text("name: x\n" + body)
    with pytest.raises(ConfigError) as caught:
        load_profile_file(path)
    message = str(caught.value)
    assert message.startswith(f"{path}:{line}: "), message
    assert piece in message and "\n" not in message
    assert caught.value.exit_code == 2


def test_a_file_past_the_size_bound_is_refused_before_it_is_parsed(tmp_path: Path) -> None:
    path = tmp_path / "big.yaml"
    path.write_text("name: x\nprops: [" + "0," * MAX_PROFILE_BYTES + "0]\n")
    with pytest.raises(ConfigError, match=r"big.yaml: larger than 256 KiB"):
        load_profile_file(path)


def test_missing_and_non_utf8_profile_files(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match=r"nope.yaml: no such profile file"):
        load_profile_file(tmp_path / "nope.yaml")
    (tmp_path / "bin.yaml").write_bytes(b"name: \xff\n")
    with pytest.raises(ConfigError, match=r"bin.yaml: not UTF-8 text \(byte 6\)"):
        load_profile_file(tmp_path / "bin.yaml")
