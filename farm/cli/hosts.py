"""`farm hosts`: the adb servers with phones (this machine's and lab hosts' over SSH)."""

from __future__ import annotations

import sys
import time
from pathlib import Path
from typing import Any

import click

from farm.cli.json_output import echo_json
from farm.errors import FarmError, HostError
from farm.fleet.endpoint import AdbState, LocalAdbEndpoint, adb_port_from_env
from farm.fleet.farm_yaml import FarmConfig, HostConfig, load_config
from farm.fleet.hostcheck import check_host
from farm.fleet.hostkeys import Verdict, fingerprint
from farm.fleet.hosts import Fleet, default_policy
from farm.fleet.ssh import load_ssh_config, resolve_target, server_key
from farm.fleet.ssh_endpoint import SshAdbEndpoint
from farm.safe_text import terminal

_CONFIG_HELP = "farm config file (default ./farm.yaml, then ~/.config/farm/farm.yaml)."
_ADB_PORT_HELP = "local adb server port (default: the config's, $ANDROID_ADB_SERVER_PORT or 5037)."


def _config(config: Path | None, adb_port: int | None) -> FarmConfig:
    return load_config(config, local_adb_port=adb_port_from_env(adb_port))


def _host_row(host: HostConfig, fleet: Fleet) -> dict[str, Any]:
    row: dict[str, Any] = {
        "name": host.name,
        "address": host.address or "this machine",
        "adb_port": host.adb_port,
        "tags": list(host.tags),
        "state": "down",
        "rtt_ms": None,
        "phones": None,
        "error": None,
    }
    endpoint = fleet.by_host.get(host.name)
    tunnel = fleet.tunnels.get(host.name)
    try:
        if endpoint is None:
            raise (
                tunnel.down_error()
                if tunnel is not None
                else HostError(host.name, "not reachable", retryable=True)
            )
        if isinstance(endpoint, SshAdbEndpoint):
            _version, rtt_s = endpoint.tunnel.adb_round_trip_s()
        else:
            started = time.perf_counter()
            endpoint.list()
            rtt_s = time.perf_counter() - started
        listed = endpoint.list()
        row.update(
            state="up",
            rtt_ms=round(rtt_s * 1e3, 2),
            phones=sum(1 for item in listed if item.state is AdbState.DEVICE),
        )
    except FarmError as error:
        row["error"] = str(error)
    return row


@click.group("hosts", invoke_without_command=True)
@click.option("--json", "as_json", is_flag=True, help="One JSON object per host, in a list.")
@click.option("--config", type=click.Path(path_type=Path), default=None, help=_CONFIG_HELP)
@click.option("--adb-port", type=int, default=None, help=_ADB_PORT_HELP)
@click.pass_context
def hosts(ctx: click.Context, as_json: bool, config: Path | None, adb_port: int | None) -> None:
    """The hosts whose adb servers farm uses: this machine and lab hosts reached over SSH
    (`hosts:` in farm.yaml), each with its state, adb round-trip time and online phone count.

    \b
    farm.yaml:
      hosts:
        - name: lab1
          address: lab1.example.org     # or a ~/.ssh/config alias
          user: farm
          identity_file: ~/.ssh/farm_ed25519
          adb_port: 5037                # the adb server port on lab1
    \b
    Example:
      farm hosts                        # NAME  STATE  RTT  PHONES
      farm hosts check lab1             # which connection step fails, and what to do
      farm hosts trust lab1             # accept lab1's host key (shows its fingerprint)
    """
    ctx.obj = {"config": config, "adb_port": adb_port}
    if ctx.invoked_subcommand is not None:
        return
    farm_config = _config(config, adb_port)
    fleet = Fleet(farm_config, local_adb_port=adb_port, require_local=False, strict_keys=False)
    with fleet:
        rows = [_host_row(host, fleet) for host in farm_config.hosts]
    if as_json:
        echo_json(rows)
        return
    table = [("NAME", "ADDRESS", "STATE", "RTT", "PHONES")] + [
        (
            r["name"],
            r["address"],
            r["state"],
            "-" if r["rtt_ms"] is None else f"{r['rtt_ms']:.1f} ms",
            "-" if r["phones"] is None else str(r["phones"]),
        )
        for r in rows
    ]
    widths = [max(len(row[i]) for row in table) for i in range(len(table[0]))]
    for line in table:
        click.echo("  ".join(cell.ljust(w) for cell, w in zip(line, widths, strict=True)).rstrip())
    for r in rows:
        if r["error"]:
            click.echo(terminal(f"farm: {r['error']}"), err=True)


@hosts.command("check")
@click.argument("name")
@click.pass_context
def check(ctx: click.Context, name: str) -> None:
    """Diagnose one host step by step: name resolution, TCP, host key, authentication, adb server.

    \b
    Example:
      farm hosts check lab1
    Exit code 0 when every step passes, 1 when one fails (it is named, with what to do).
    """
    host = _config(ctx.obj["config"], ctx.obj["adb_port"]).host(name)
    if host.is_local:
        endpoint = LocalAdbEndpoint(host.adb_port, host=host.name)
        try:
            endpoint.check_server()
            count = sum(1 for item in endpoint.list() if item.state is AdbState.DEVICE)
        except FarmError as error:
            click.echo(terminal(f"FAIL  adb server: {error}"))
            sys.exit(1)
        click.echo(f"ok    adb server: 127.0.0.1:{endpoint.port} answers, {count} phone(s) online")
        return
    target = resolve_target(host, load_ssh_config())
    results = check_host(host, target, default_policy())
    for result in results:
        mark = {True: "ok  ", False: "FAIL", None: "-   "}[result.ok]
        click.echo(terminal(f"{mark}  {result.step}: {result.detail}"))
        if result.ok is False and result.fix:
            click.echo(f"      what to do: {result.fix}")
    failed = [r for r in results if r.ok is False]
    if failed:
        click.echo(f"farm: {name}: {failed[0].step} failed", err=True)
        sys.exit(1)
    click.echo(f"{name}: all steps passed")


@hosts.command("trust")
@click.argument("name")
@click.option("--replace", is_flag=True, help="Replace a changed key (after checking it out of band).")
@click.option(
    "--fingerprint",
    "expected",
    metavar="SHA256:...",
    default=None,
    help="Trust only if the host presents this fingerprint (as `ssh-keygen -lf` on the host prints).",
)
@click.pass_context
def trust(ctx: click.Context, name: str, replace: bool, expected: str | None) -> None:
    """Record a lab host's SSH host key in farm's known_hosts (~/.config/farm/known_hosts).

    Shows the fingerprint it trusts. Compare it with the host's own
    (`ssh-keygen -lf /etc/ssh/ssh_host_ed25519_key.pub` on the host), or pass --fingerprint to
    have farm compare. A key that changed is only replaced with --replace.

    \b
    Example:
      farm hosts trust lab1
      farm hosts trust lab1 --fingerprint SHA256:3pJ2...
      farm hosts trust lab1 --replace   # the host was reinstalled
    """
    host = _config(ctx.obj["config"], ctx.obj["adb_port"]).host(name)
    if host.is_local:
        raise HostError(name, "the local adb server needs no SSH host key", retryable=False)
    target = resolve_target(host, load_ssh_config())
    key = server_key(target)
    presented = fingerprint(key)
    if expected is not None and expected.strip() != presented:
        raise HostError(
            name,
            f"{target.host_id} presents {key.get_name()} {presented}, not {expected}; not trusted",
            retryable=False,
            hint="someone may be intercepting the connection, or the fingerprint was mistyped",
        )
    policy = default_policy()
    before = policy.trust(name, target.host_id, key, replace=replace)
    if before.verdict is Verdict.TRUSTED:
        click.echo(f"{name}: {target.host_id} {key.get_name()} {presented} was already trusted")
        return
    verb = "replaced the changed key with" if before.verdict is Verdict.CHANGED else "trusted"
    click.echo(f"{name}: {verb} {target.host_id} {key.get_name()} {presented} (in {policy.farm_file})")
