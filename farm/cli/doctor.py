"""`farm doctor [SELECTOR]`: every capability farm relies on, per phone: ok / degraded / missing,
the evidence read, what farm loses and what to do (farm.doctor.checks decides; farm.doctor.probe
reads)."""

from __future__ import annotations

import contextlib
import logging
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

import click

from farm.cli.json_output import echo_json
from farm.cli.options import adb_port_option, config_option, results_option, store_location
from farm.device.session import DeviceSession
from farm.doctor.checks import Finding, Status, diagnose
from farm.doctor.probe import discharge_trial, read_facts
from farm.engine.lifecycle import probe_phone
from farm.engine.runner import matches_selector
from farm.errors import FarmError
from farm.fleet.hosts import open_fleet
from farm.fleet.inventory import Phone, PhoneState, discover
from farm.safe_text import terminal
from farm.store import Store, ownership

log = logging.getLogger(__name__)
SESSION_TIMEOUT_S = 60.0
# Phones examined at once, as `farm devices` probes them: each has its own adb connection, charging
# switch and gauge, so one phone's trial (4 s, 25 s for a ~10 s gauge) does not wait on another's.
MAX_PARALLEL = 8


@dataclass(frozen=True)
class PhoneReport:
    phone: Phone
    findings: tuple[Finding, ...]
    error: str | None = None

    def to_json(self) -> dict[str, object]:
        return {
            "id": self.phone.device_id,
            "model": self.phone.model,
            "error": self.error,
            "summary": summary(self.findings),
            "checks": [f.to_json() for f in self.findings],
        }


def summary(findings: tuple[Finding, ...]) -> str:
    """`N ok, N degraded (a, b), N missing (c)` (pure)."""
    parts = []
    for status in Status:
        names = [str(f.check) for f in findings if f.status is status]
        if names:
            parts.append(
                f"{len(names)} {status}" + (f" ({', '.join(names)})" if status is not Status.OK else "")
            )
    return ", ".join(parts) or "no checks"


def _examine(phone: Phone, session: DeviceSession, store: Store | None, discharge: bool) -> PhoneReport:
    try:
        caps = probe_phone(session, phone)
        facts = read_facts(session)
        trial = discharge_trial(session, phone.device_id, caps, store) if discharge else None
    except FarmError as error:
        log.debug("doctor on %s failed", phone.device_id, exc_info=True)
        return PhoneReport(phone, (), str(error))
    return PhoneReport(phone, diagnose(caps, facts, trial))


def _print(report: PhoneReport) -> None:
    phone = report.phone
    click.echo(terminal(f"{phone.device_id}  {phone.model or '-'}: {summary(report.findings)}"))
    if report.error:
        click.echo(terminal(f"  error: {report.error}"))
    for f in report.findings:
        click.echo(terminal(f"  {f.status!s:8}  {f.check!s:15}  {f.evidence}"))
        if f.lost:
            click.echo(terminal(f"  {'':8}  {'':15}  loses: {', '.join(f.lost)}"))
        if f.todo and f.status is not Status.OK:
            click.echo(terminal(f"  {'':8}  {'':15}  do: {f.todo}"))


@click.command("doctor")
@click.argument("selector", required=False)
@click.option("--json", "as_json", is_flag=True, help="One JSON object per phone, in a list.")
@click.option(
    "--no-discharge",
    is_flag=True,
    help="Do not switch charging off for the few-second discharge trial (the switch and gauge "
    "are then not proven). Phones a sweep holds are never touched.",
)
@adb_port_option
@results_option
@config_option
def doctor(
    selector: str | None,
    as_json: bool,
    no_discharge: bool,
    adb_port: int | None,
    results: str | None,
    config: Path | None,
) -> None:
    """Check every capability farm relies on, per phone (SELECTOR: host/serial, serial, adb serial
    or model; globs allowed): OpenCL, charging switch and proven discharge, fuel gauge unit/sign/
    update rate, thermal sensors, clock control, screen control, root, SELinux, page size, Android
    version quirks. Each is ok, degraded or missing, with the evidence read, what farm loses and
    what to do. The discharge trial switches charging off for a few seconds (marker in the store
    first, as a run does) and back on.

    \b
    Example:
      farm doctor
      farm doctor 'local/*' --json | jq '.[] | .summary'
    """
    location = store_location(results, config)
    with contextlib.ExitStack() as stack:
        store = None
        leased: dict[str, int] = {}
        if location.url is not None or location.sqlite_path.exists():
            store = stack.enter_context(Store(location))
            leased = ownership.leased_devices(store)
        fleet = stack.enter_context(open_fleet(config, adb_port))
        found = [
            p
            for p in discover(fleet.endpoints, leased=lambda device_id: device_id in leased)
            if selector is None or matches_selector(p, selector)
        ]
        phones = [p for p in found if p.state is PhoneState.ONLINE]
        unauthorized = [p for p in found if p.state is PhoneState.UNAUTHORIZED]

        def examine(phone: Phone) -> PhoneReport:
            device = fleet.endpoint_for(phone.host).device(phone.adb_serial)
            session = DeviceSession(device, phone.device_id, default_timeout_s=SESSION_TIMEOUT_S)
            return _examine(phone, session, store, not no_discharge)

        reports: list[PhoneReport] = []
        if phones:  # reports in the phones' order
            pool = ThreadPoolExecutor(max_workers=min(MAX_PARALLEL, len(phones)))
            try:
                reports = list(pool.map(examine, phones))
            finally:  # Ctrl-C: no new trial starts; each started one switches charging back on
                pool.shutdown(wait=True, cancel_futures=True)
    for phone in unauthorized:  # nothing can be examined: say so and what to do
        click.echo(terminal(f"farm: {phone.device_id}: {phone.error}"), err=True)
    if as_json:
        echo_json([r.to_json() for r in reports])
    elif not reports:
        click.echo("no online phone matches" + (f" {terminal(selector)}" if selector else ""))
    for r in reports:
        if not as_json:
            _print(r)
    if unauthorized or any(r.error for r in reports):
        raise SystemExit(1)
