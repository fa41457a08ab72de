"""The per-profile power model and the load-following frequency choice (pure)."""

from __future__ import annotations

from vphone.profile import PowerSpec


def power_mw(spec: PowerSpec, cpu_busy_cores: float, gpu_busy: float, screen_on: bool) -> float:
    """power = idle + cpu_core_mw * busy cores + gpu_busy_mw * GPU busy (0..1) + screen."""
    return (
        spec.idle_mw
        + spec.cpu_core_mw * max(0.0, cpu_busy_cores)
        + spec.gpu_busy_mw * max(0.0, min(1.0, gpu_busy))
        + (spec.screen_mw if screen_on else 0.0)
    )


def pick_frequency(freqs: tuple[int, ...], utilisation: float) -> int:
    """The lowest available frequency that covers `utilisation` (0..1) of the top one, as a
    schedutil-like governor would (with 25 % headroom)."""
    need = min(1.0, max(0.0, utilisation) * 1.25) * freqs[-1]
    for f in freqs:
        if f >= need:
            return f
    return freqs[-1]
