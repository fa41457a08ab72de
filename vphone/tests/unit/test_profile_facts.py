"""The profiles' device facts against the spec sources checked with the search tool (issue 28,
item 3): RAM and battery are configurations the named device was sold with, and every RAM and
storage figure carries its source or says "unverified" right there.

The table is the independent truth: each row names where it was read."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from vphone.profile import load_profile_file

PROFILES = sorted((Path(__file__).resolve().parents[2] / "src" / "vphone" / "profiles").glob("*.yaml"))

# ro.product.model -> (RAM configurations in MB, battery mAh, where read)
SOLD = {
    "moto g(30)": ((4096, 6144), 5000, "rpp.pe review-motorola-moto-g30 spec table"),
    "Nexus 6P": ((3072,), 3450, "techspot.com/review/1109-google-nexus-6p; betanews.com 2015-09-29"),
    "SM-G991U": ((8192,), 4000, "Geekbench SM-G991U via playfuldroid.com; newsbytesapp.com"),
    "SM-S911B": ((8192,), 3900, "gizchina.com FCC filing; helpmax.net"),
    "Pixel 7": ((8192,), 4355, "makeoverarena.com/google-pixel-7-2"),
    "IN2013": ((8192, 12288), 4300, "toptech.news after GSMArena; bgr.in"),
    "V2241A": ((12288,), 4810, "voonze.com Geekbench V2241A; livemint.com 2022-11-19"),
}
# A Snapdragon-only model number must not be an Exynos one (SM-G99xB: Exynos 2100, phonearena.com).
EXYNOS_MODELS = ("SM-G991B", "SM-G996B", "SM-G998B")
SOURCE = re.compile(r"\[\w+\]|\b[\w-]+\.(com|net|in|pk|pe|mx|news|it|dev|org)\b|unverified", re.IGNORECASE)


@pytest.mark.parametrize("path", PROFILES, ids=[p.stem for p in PROFILES])
def test_ram_and_battery_are_what_the_device_was_sold_with(path: Path) -> None:
    profile = load_profile_file(path)
    model = profile.props["ro.product.model"]
    assert model not in EXYNOS_MODELS or profile.props.get("ro.soc.manufacturer") != "QTI", model
    if model not in SOLD:
        pytest.skip(f"{model}: no spec source checked")
    ram_options, battery_mah, where = SOLD[model]
    assert profile.ram_mb == min(ram_options), f"{path.name}: {model} ships {ram_options} MB ({where})"
    assert profile.battery.capacity_mah == battery_mah, (
        f"{path.name}: {model} has {battery_mah} mAh ({where})"
    )


@pytest.mark.parametrize("path", PROFILES, ids=[p.stem for p in PROFILES])
def test_ram_and_storage_lines_carry_a_source(path: Path) -> None:
    lines = path.read_text().splitlines()
    for key in ("ram_mb:", "storage_mb:"):
        index = next((i for i, line in enumerate(lines) if line.startswith(key)), None)
        if index is None:
            continue
        block = [lines[index]]
        above = index - 1
        while above >= 0 and lines[above].startswith(("#", "ram_mb:")):  # the pair shares its block
            block.append(lines[above])
            above -= 1
        assert any(SOURCE.search(line.partition("#")[2]) for line in block), (
            f"{path.name}: {key} cites nothing"
        )
