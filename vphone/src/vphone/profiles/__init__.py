"""The shipped SoC profiles: one YAML file per profile in this folder (see vphone/src/vphone/profile.py)."""

from __future__ import annotations

from pathlib import Path

from vphone.errors import ConfigError
from vphone.profile import Profile, load_profile_file

PROFILES_DIR = Path(__file__).parent


def available_profiles() -> list[str]:
    """Names of the shipped profiles, sorted (the YAML file stems)."""
    return sorted(p.stem for p in PROFILES_DIR.glob("*.yaml"))


def load_profile(name: str) -> Profile:
    """Load a shipped profile by name, or a YAML file when `name` is a path ending in .yaml."""
    if name.endswith((".yaml", ".yml")):
        return load_profile_file(Path(name))
    path = PROFILES_DIR / f"{name}.yaml"
    if not path.is_file():
        raise ConfigError(
            f"unknown virtual phone profile {name!r}",
            hint=f"choose one of: {', '.join(available_profiles())}",
        )
    profile = load_profile_file(path)
    if profile.name != name:
        raise ConfigError(f"name: {profile.name!r} differs from the file name {name!r}", location=f"{path}:1")
    return profile
