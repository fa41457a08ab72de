"""`vphone up|list|down|fault` (also `farm virtual ...`): phones that real adb and farm treat as phones.

farm runs this program for `farm virtual ...` (it imports nothing from the simulator), so the
name shown in help and errors is `farm virtual` when VPHONE_PROG_NAME says so. A VphoneError is
one line on stderr and its exit code; any other exception is a bug: one line naming the log
file, and the stack in that file.
"""

from __future__ import annotations

import json
import logging
import os
import sys
import tempfile
import traceback
from dataclasses import asdict
from pathlib import Path

import click

from vphone import control
from vphone.adb.link import LinkKind
from vphone.calibration import speed_plans
from vphone.cgroup import budget_warnings
from vphone.daemon import DEFAULT_WORLD_FACTORY
from vphone.errors import VphoneError
from vphone.profiles import load_profile

STATE_DIR_HELP = "state directory (default: $FARM_VIRTUAL_DIR or .farm/virtual/)"


def _state_dir(value: Path | None) -> Path:
    return value if value is not None else control.default_state_dir()


def _adb_port(value: int | None) -> int:
    return value if value is not None else control.default_adb_port()


def format_table(phones: list[dict[str, object]]) -> str:
    rows = [("SERIAL", "ADB SERIAL", "PORT", "PROFILE", "STATE")]
    rows += [
        (str(p["serial"]), str(p["adb_serial"]), str(p["port"]), str(p["profile"]), str(p["state"]))
        for p in phones
    ]
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
    return "\n".join(
        "  ".join(cell.ljust(w) for cell, w in zip(row, widths, strict=True)).rstrip() for row in rows
    )


@click.group(context_settings={"help_option_names": ["-h", "--help"], "max_content_width": 100})
def virtual() -> None:
    """Virtual phones: real ADB protocol on TCP ports, real processes in an Android-like sandbox.

    \b
    Example:
      farm virtual up --count 4 --profile adreno-sd8gen2 --profile mali-tensor
      adb devices -l                  # 127.0.0.1:6520 ... device product:... model:...
      farm virtual fault VP6520 offline 5
      farm virtual down
    """


@virtual.command()
@click.option("--count", "-n", type=int, default=1, show_default=True, help="number of phones")
@click.option(
    "--profile",
    "profiles",
    multiple=True,
    help="SoC profile (vphone/src/vphone/profiles/NAME.yaml, e.g. adreno-sd8gen2); repeat it, it is cycled "
    "over --count; default: the first profile by name",
)
@click.option(
    "--adb-port", type=int, default=None, help="adb server port (default: $ANDROID_ADB_SERVER_PORT or 5037)"
)
@click.option(
    "--port", type=int, default=None, help="TCP port of the first phone (default: free ports from 6520)"
)
@click.option("--state-dir", type=click.Path(path_type=Path), default=None, help=STATE_DIR_HELP)
@click.option(
    "--keep-data",
    is_flag=True,
    help="keep each phone's /data and /sdcard even if it last ran with another profile "
    "(default: only the same serial and profile keep them)",
)
@click.option(
    "--link",
    type=click.Choice([LinkKind.USB2.value, LinkKind.USB3.value]),
    default=None,
    help="model every phone's cable: per-packet latency and bandwidth of adb over USB 2 or USB 3 "
    "(default: each profile's own `link:`; the shipped profiles are as fast as loopback)",
)
@click.option(
    "--adb-key",
    "adb_keys",
    multiple=True,
    type=click.Path(path_type=Path, dir_okay=False),
    help="a host's adb public key (adbkey.pub) or private key the phones trust, as if USB debugging "
    "had been allowed for it once; repeat it (default: the adb server's own keys, "
    "$ADB_VENDOR_KEYS and ~/.android/adbkey.pub). Phones of user builds (ro.adb.secure=1) show "
    "`unauthorized` to any other key",
)
@click.option("--world-factory", default=DEFAULT_WORLD_FACTORY, hidden=True)
def up(
    count: int,
    profiles: tuple[str, ...],
    adb_port: int | None,
    port: int | None,
    state_dir: Path | None,
    keep_data: bool,
    link: str | None,
    adb_keys: tuple[Path, ...],
    world_factory: str,
) -> None:
    """Start --count virtual phones in a background daemon and connect them to the adb server.

    Returns once every phone shows `device` in `adb devices`. The daemon keeps running after the
    terminal closes; stop it with `farm virtual down`. Needs root: each phone runs as its own
    range of host uids.

    A phone is its serial (VP<port>) plus its profile: its /data and /sdcard survive `down` and a
    later `up` with the same port and profile. Another profile on that port is another phone and
    starts with empty storage, unless --keep-data.

    Each phone runs in its own host cgroups, with the profile's cpu.budget_cores +
    gpu.budget_cores host cores at top clocks. With VPHONE_SOC_SPEEDS=1 a profile that states its
    SoC's throughput gets host budgets in those proportions instead (fastest core, all cores,
    GPU), slowed by one factor that this host's calibration sets (the phone's
    ro.vphone.slowdown); `up` says on stderr which ratio this host cannot hold, and why.
    Budgets scale with the clocks a phone is pinned or throttled to. When they add up to more
    than this host's cores, `up` says so: phones then slow each other.

    \b
    Example:
      farm virtual up --count 3 --profile adreno-nexus6p
      farm virtual up --port 6520 --profile adreno-sd865 --keep-data
      farm virtual up --count 4 --link usb2     # round trips and pushes as slow as a USB 2 cable
    """
    if world_factory == DEFAULT_WORLD_FACTORY:
        names = control.resolve_profiles(count, profiles)
        plans, speed_lines = speed_plans([load_profile(n) for n in names])
        for line in [*speed_lines, *budget_warnings(names, [p.host_cores for p in plans])]:
            click.echo(f"{click.get_current_context().command_path}: {line}", err=True)
    state = control.up(
        _state_dir(state_dir),
        count,
        profiles,
        adb_port=_adb_port(adb_port),
        first_port=port,
        world_factory=world_factory,
        keep_data=keep_data,
        link=LinkKind(link) if link is not None else None,
        adb_key_paths=adb_keys,
    )
    for phone in state.phones:
        click.echo(f"{phone.adb_serial}  {phone.serial}  {phone.profile}  {phone.state}")


@virtual.command(name="list")
@click.option("--json", "as_json", is_flag=True, help="print JSON (a list of phones) for scripts")
@click.option("--state-dir", type=click.Path(path_type=Path), default=None, help=STATE_DIR_HELP)
def list_(as_json: bool, state_dir: Path | None) -> None:
    """List the running virtual phones: serial, adb serial, port, profile, state (and with
    --json the daemon's CPU seconds spent on each phone, charged to it, and its wait for that).

    \b
    Example:
      farm virtual list --json | jq '.[].adb_serial'
    """
    state = control.running_state(_state_dir(state_dir))
    phones = [] if state is None else [asdict(phone) for phone in state.phones]
    if as_json:
        click.echo(json.dumps(phones, indent=2))
        return
    if not phones:
        click.echo("no virtual phones running (start some: farm virtual up)")
        return
    click.echo(format_table(phones))


@virtual.command()
@click.option(
    "--adb-port", type=int, default=None, help="adb server to disconnect them from (default: the one of `up`)"
)
@click.option("--state-dir", type=click.Path(path_type=Path), default=None, help=STATE_DIR_HELP)
def down(adb_port: int | None, state_dir: Path | None) -> None:
    """Disconnect the virtual phones from adb and stop them (every phone process ends).

    \b
    Example:
      farm virtual down
    """
    state = control.down(_state_dir(state_dir), adb_port)
    if state is None:
        click.echo("no virtual phones were running")
    else:
        click.echo(f"stopped {len(state.phones)} virtual phone(s)")


@virtual.command()
@click.argument("serial")
@click.argument("kind", type=click.Choice(["disconnect", "offline", "hang", "reboot", "recover"]))
@click.argument("seconds", type=float, required=False)
@click.option("--state-dir", type=click.Path(path_type=Path), default=None, help=STATE_DIR_HELP)
def fault(serial: str, kind: str, seconds: float | None, state_dir: Path | None) -> None:
    """Inject a fault into one phone (SERIAL is VP6520 or 127.0.0.1:6520).

    \b
    disconnect   drop its TCP connections now; the adb server reconnects by itself
    offline N    drop connections and refuse new ones for N seconds
    hang [N]     stop answering packets until the next fault or `recover`, or for N seconds
    reboot       like `adb reboot`: offline ~3 s, processes killed, then back
    recover      end a hang or offline period now

    \b
    Example:
      farm virtual fault VP6520 offline 5
    """

    def phone_state(state: control.DaemonState | None) -> str:
        phone = next((p for p in state.phones if serial in (p.serial, p.adb_serial)), None) if state else None
        return phone.state if phone else "?"

    # The state before, so the line says what changed ("online -> offline"), not the fault's name twice.
    before = phone_state(control.running_state(_state_dir(state_dir)))
    after = phone_state(control.fault(_state_dir(state_dir), serial, kind, seconds))
    lasting = f" for {seconds:g} s" if seconds is not None else ""
    click.echo(f"{serial}: {kind}{lasting}: {before} -> {after}")


def _crash_log_path() -> Path:
    return Path(tempfile.gettempdir()) / f"vphone-cli-{os.getuid()}.log"


def main() -> None:
    """Entry point of `vphone` and `python -m vphone` (and so of `farm virtual`)."""
    prog_name = os.environ.get("VPHONE_PROG_NAME", "vphone")
    try:
        virtual.main(prog_name=prog_name, standalone_mode=False)
    except click.exceptions.Abort:
        click.echo("stopped", err=True)
        sys.exit(130)
    except click.ClickException as error:
        error.show()
        sys.exit(error.exit_code)
    except VphoneError as error:
        logging.getLogger("vphone.cli").debug("%s", error, exc_info=True)
        click.echo(f"{prog_name}: {error}", err=True)
        sys.exit(error.exit_code)
    except Exception as error:
        log = _crash_log_path()
        with log.open("a", encoding="utf-8") as out:
            out.write("".join(traceback.format_exception(error)))
        click.echo(f"{prog_name}: internal error: {type(error).__name__}: {error} (stack in {log})", err=True)
        sys.exit(1)
