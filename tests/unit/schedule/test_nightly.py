"""Nightly names: one separate stored experiment per slot, parsed back to its base experiment."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from farm.errors import ConfigError
from farm.experiment import load_text
from farm.schedule.nightly import is_nightly_of, nightly_name, parse_nightly, rename_spec

SLOT = datetime(2026, 11, 29, 2, 0, 7, 999, tzinfo=UTC)


def test_name_and_parse_round_trip_with_variant_and_sequence() -> None:
    nightly = nightly_name("lstm-gpu_load", SLOT, "quick", seq=2)
    assert nightly.qualified_name == "lstm-gpu_load--20261129-020007-2.quick"
    parsed = parse_nightly(nightly.qualified_name)
    assert parsed is not None
    assert (parsed.base_name, parsed.variant, parsed.seq) == ("lstm-gpu_load", "quick", 2)
    assert parsed.slot == SLOT.replace(microsecond=0)
    assert is_nightly_of(nightly.qualified_name, "lstm-gpu_load.quick")
    assert not is_nightly_of(nightly.qualified_name, "lstm-gpu_load")


@pytest.mark.parametrize("name", ["smoke", "smoke.quick", "smoke--2026", "smoke--20261129-0200"])
def test_ordinary_names_are_not_nightlies(name: str) -> None:
    assert parse_nightly(name) is None


def test_too_long_a_base_name_is_a_config_error() -> None:
    with pytest.raises(ConfigError, match="too long"):
        nightly_name("x" * 50, SLOT)


def test_rename_spec_keeps_layout_and_the_result_loads_under_the_new_name() -> None:
    text = (
        "# comment\n"
        "name: 'smoke'   # trailing\n"
        "benchmark:\n"
        "  program: lstm\n"
        "  params: {hidden: 8, layers: 1, seq_len: 4, input_dim: 3, classes: 2, batch: 1}\n"
        "variants:\n"
        "  quick: {measurement: {iterations: 2}}\n"
    )
    renamed = rename_spec(text, "smoke.yaml", "smoke--20261129-020007")
    assert renamed.splitlines()[1] == "name: smoke--20261129-020007   # trailing"
    assert len(renamed.splitlines()) == len(text.splitlines())
    assert load_text(renamed, "x.yaml", "quick").qualified_name == "smoke--20261129-020007.quick"
