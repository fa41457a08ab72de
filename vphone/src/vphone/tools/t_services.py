"""dumpsys services other than battery, power, meminfo and thermalservice (t_dumpsys): window
and package, as their services dump them.

* `dumpsys window displays` (WindowManagerService "WINDOW MANAGER DISPLAY CONTENTS", then
  DisplayContent.dump): "  Display: mDisplayId=0" and the size line
  "    init=WxH DENSITYdpi [base=WxH DENSITYdpi] cur=WxH app=WxH", where base appears once `wm size`
  or `wm density` overrode the initial values and cur is the size in force.
* `dumpsys display` (DisplayManagerService.dumpInternal): "DISPLAY MANAGER (dumpsys display)" and
  "  mViewports=" + the list of DisplayViewport.toString, "DisplayViewport{type=INTERNAL,
  valid=true, [isActive=true, from Android 12] displayId=0, uniqueId='local:ID', physicalPort=P,
  orientation=R, logicalFrame=Rect(0, 0 - W, H), physicalFrame=..., deviceWidth=W,
  deviceHeight=H}" (what adbutils' rotation() and AndroidViewClient read).
* `dumpsys package PKG`: the package's entry (t_pm.dump_package).
"""

from __future__ import annotations

import sys

import ctlstore
import t_pm

PHYSICAL_SIZE = "1080x2400"
PHYSICAL_DENSITY = "420"
NAV_BAR_PX = 126  # the app area is the display less the navigation bar (48dp at 420dpi)


def display() -> tuple[str, str, str | None, str | None]:
    """Physical size and density, and the `wm` overrides (None when not overridden)."""
    state = ctlstore.read_json(ctlstore.WM_FILE, {})
    return PHYSICAL_SIZE, PHYSICAL_DENSITY, state.get("size"), state.get("density")


def window(args: list[str]) -> int:
    size, density, size_override, density_override = display()
    cur = size_override or size
    width, _, height = cur.partition("x")
    base = ""
    if size_override or density_override:
        base = f" base={cur} {density_override or density}dpi"
    sys.stdout.write(
        "WINDOW MANAGER DISPLAY CONTENTS (dumpsys window displays)\n"
        "  Display: mDisplayId=0 rootTasks=1\n"
        f"    init={size} {density}dpi{base} cur={cur} app={width}x{int(height) - NAV_BAR_PX}\n"
    )
    return 0


def package(args: list[str]) -> int:
    names = [a for a in args if not a.startswith("-")]
    for name in names or sorted(t_pm.apks()):
        sys.stdout.write(t_pm.dump_package(name))
    return 0


IS_ACTIVE_SDK = 31  # DisplayViewport.isActive: in Android 12+ sources, absent in 10 (11 not checked)
PANEL_ID = "local:4619827259835644672"  # SurfaceFlinger's id of the built-in panel, port 0


def _sdk() -> int:
    try:
        return int(ctlstore.read_json("props/ro.json", {}).get("ro.build.version.sdk", "34"))
    except ValueError:
        return 34


def display_(args: list[str]) -> int:
    size, _density, size_override, _density_override = display()
    width, _, height = size.partition("x")
    logical_w, _, logical_h = (size_override or size).partition("x")
    active = "isActive=true, " if _sdk() >= IS_ACTIVE_SDK else ""
    viewport = (
        f"DisplayViewport{{type=INTERNAL, valid=true, {active}displayId=0, uniqueId='{PANEL_ID}', "
        f"physicalPort=0, orientation=0, logicalFrame=Rect(0, 0 - {logical_w}, {logical_h}), "
        f"physicalFrame=Rect(0, 0 - {width}, {height}), deviceWidth={width}, deviceHeight={height}}}"
    )
    sys.stdout.write(f"DISPLAY MANAGER (dumpsys display)\n  mOnlyCore=false\n  mViewports=[{viewport}]\n")
    return 0


DUMPERS = {"window": window, "package": package, "display": display_}
