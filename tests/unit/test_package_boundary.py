"""farm and the simulator (vphone) are two distributions that meet only at the ADB protocol.

farm's package imports nothing from vphone (`farm virtual` runs vphone's CLI as a program), and
vphone imports nothing from farm. Imports are read from the source with `ast`, every one of
them (module level, inside functions, under TYPE_CHECKING), so a lazy import counts too.
"""

from __future__ import annotations

import ast
from pathlib import Path

import farm
import vphone

FARM_ROOT = Path(farm.__file__).resolve().parent
VPHONE_ROOT = Path(vphone.__file__).resolve().parent


def _top_level_imports(root: Path) -> dict[str, set[str]]:
    """file (relative to root) -> top-level package names it imports (absolute imports only)."""
    found: dict[str, set[str]] = {}
    for path in root.rglob("*.py"):
        names: set[str] = set()
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Import):
                names |= {alias.name.split(".")[0] for alias in node.names}
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                names.add(node.module.split(".")[0])
        found[str(path.relative_to(root.parent))] = names
    return found


def test_farm_imports_nothing_from_the_simulator() -> None:
    offenders = sorted(f for f, names in _top_level_imports(FARM_ROOT).items() if "vphone" in names)
    assert offenders == []


def test_the_simulator_imports_nothing_from_farm() -> None:
    offenders = sorted(f for f, names in _top_level_imports(VPHONE_ROOT).items() if "farm" in names)
    assert offenders == []


def test_the_check_sees_an_import_inside_a_function(tmp_path: Path) -> None:
    package = tmp_path / "pkg"
    package.mkdir()
    (package / "m.py").write_text("def f():\n    from vphone.control import up\n    return up\n")
    assert "vphone" in _top_level_imports(package)["pkg/m.py"]
