"""Which build deploy picks for a phone's ABI list (farm.engine.deploy.find_program), on a build
tree of minimal ELF files: no phone, no push."""

from __future__ import annotations

from pathlib import Path

import pytest

from farm.engine.deploy import find_program
from farm.errors import EnvironmentProblem
from tests.fixtures.elf import static_binary_for

ARM64_PHONE = ("arm64-v8a", "armeabi-v7a", "armeabi")  # ro.product.cpu.abi, then abilist
ARM32_PHONE = ("armeabi-v7a", "armeabi")
VIRTUAL_PHONE = ("x86_64",)


def build_tree(root: Path, builds: dict[str, list[str]]) -> Path:
    """device_agents/build/<abi>/<name> for each ABI and name, each an ELF of that ABI."""
    for abi, names in builds.items():
        for name in names:
            path = root / "device_agents" / "build" / abi / name
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_bytes(static_binary_for(abi))
    return root


ALL_AGENTS = {abi: ["farm-probe", "farm-sampler"] for abi in ("x86_64", "arm64-v8a", "armeabi-v7a")}


@pytest.mark.parametrize(
    ("phone", "abi"), [(ARM64_PHONE, "arm64-v8a"), (ARM32_PHONE, "armeabi-v7a"), (VIRTUAL_PHONE, "x86_64")]
)
def test_each_phone_gets_the_agents_of_its_own_abi(tmp_path: Path, phone: tuple[str, ...], abi: str) -> None:
    root = build_tree(tmp_path, ALL_AGENTS)
    for name in ("farm-probe", "farm-sampler"):
        path, picked = find_program(name, phone, root)
        assert picked == abi and path == root / "device_agents" / "build" / abi / name


def test_an_arm64_phone_falls_back_to_the_32_bit_build(tmp_path: Path) -> None:
    root = build_tree(tmp_path, {"armeabi-v7a": ["farm-probe"]})
    path, picked = find_program("farm-probe", ARM64_PHONE, root)
    assert picked == "armeabi-v7a" and path.parent.name == "armeabi-v7a"


def test_no_build_for_the_phone_names_what_was_looked_for(tmp_path: Path) -> None:
    root = build_tree(tmp_path, {"x86_64": ["farm-probe"]})
    with pytest.raises(EnvironmentProblem, match=r"no build of farm-probe for ABI armeabi-v7a/armeabi"):
        find_program("farm-probe", ARM32_PHONE, root)


def test_a_build_of_another_machine_in_an_abi_folder_is_refused(tmp_path: Path) -> None:
    wrong = tmp_path / "device_agents" / "build" / "arm64-v8a" / "farm-probe"
    wrong.parent.mkdir(parents=True)
    wrong.write_bytes(static_binary_for("x86_64"))  # e.g. copied there by hand
    with pytest.raises(
        EnvironmentProblem, match=r"x86-64.* not arm64-v8a.*make -C device_agents ABI=arm64-v8a"
    ):
        find_program("farm-probe", ARM64_PHONE, tmp_path)


def test_a_script_is_taken_as_it_is(tmp_path: Path) -> None:
    script = tmp_path / "kernels" / "build" / "arm64-v8a" / "wrapper"
    script.parent.mkdir(parents=True)
    script.write_text("#!/system/bin/sh\nexec true\n")
    assert find_program("wrapper", ARM64_PHONE, tmp_path) == (script, "arm64-v8a")
