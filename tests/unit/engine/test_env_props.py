"""env.json records the identity properties farm names and whole families of what a phone states
about its SoC, whatever the phone: a simulator's slow-motion factor arrives the same way."""

from __future__ import annotations

from farm.engine.collect import ENV_PROPS, env_props


def test_env_props_keep_the_named_keys_and_the_soc_families() -> None:
    getprop = {
        "ro.product.model": "Mi 10",
        "ro.soc.model": "SM8250",
        "ro.soc.manufacturer": "QTI",
        "ro.vphone.slowdown": "20.4",
        "ro.vphone.unheld_ratios": "gpu_per_big_core",
        "persist.sys.locale": "en-US",
        "ro.build.date": "Sun Nov  1 00:00:00 UTC 2026",
    }
    props = env_props(getprop)
    assert props["ro.vphone.slowdown"] == "20.4" and props["ro.vphone.unheld_ratios"] == "gpu_per_big_core"
    assert props["ro.soc.manufacturer"] == "QTI" and props["ro.product.model"] == "Mi 10"
    assert "persist.sys.locale" not in props and "ro.build.date" not in props
    assert set(ENV_PROPS) <= set(props) and props["ro.serialno"] is None  # named but absent
