"""The phone's tools (vphone/src/vphone/tools/*.py) as its init imports them, for pure unit tests."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

TOOLS = Path(__file__).resolve().parents[1] / "tools"


def load_tool(name: str) -> ModuleType:
    """tools/NAME.py with its directory on sys.path while it imports (its siblings are plain
    top-level modules there). Registered under its name, as an import would: dataclasses look
    their module up in sys.modules."""
    if name in sys.modules:
        return sys.modules[name]
    sys.path.insert(0, str(TOOLS))
    try:
        spec = importlib.util.spec_from_file_location(name, TOOLS / f"{name}.py")
        assert spec is not None and spec.loader is not None
        module = importlib.util.module_from_spec(spec)
        sys.modules[name] = module
        try:
            spec.loader.exec_module(module)
        except BaseException:
            del sys.modules[name]
            raise
        return module
    finally:
        sys.path.remove(str(TOOLS))
