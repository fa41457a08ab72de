"""A fresh Magisk phone (issue 28, audit finding 8): the first `su` waits while Magisk's grant
prompt is on screen (its request timeout is 10 s). The virtual dimensity9200 phone's su waits
8 s before the grant; farm-probe must wait for it and report root, not "no root"."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

import pytest
from telemetry_trees import Agents
from vphone.profiles import load_profile

from farm.telemetry.probe import parse_probe

pytestmark = pytest.mark.integration

BIN_DIR = "/data/local/tmp/farm/bin"


def test_the_probe_waits_for_the_root_prompt_and_finds_root(
    virtual_phones: Callable[..., Any], agents: Agents
) -> None:
    prompt_s = load_profile("dimensity9200").su_prompt_s
    assert prompt_s > 1.0  # longer than the probe used to wait
    phones = virtual_phones(count=1, profiles=["dimensity9200"])
    device = phones[0].device(phones.client())
    device.shell(f"mkdir -p {BIN_DIR}")
    device.sync.push(str(agents.probe), f"{BIN_DIR}/farm-probe", mode=0o755)
    started = time.monotonic()
    caps = parse_probe(device.shell(f"{BIN_DIR}/farm-probe", timeout=30))
    assert time.monotonic() - started >= prompt_s  # it did meet the prompt
    assert caps.root.su_path is not None and caps.root.su_works is True
    assert caps.root.available
