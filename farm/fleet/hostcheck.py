"""`farm hosts check NAME`: walk the connection step by step and say which step fails and why.

Steps, in order: name resolution, TCP connection, host key, authentication, adb server (reachable
through the tunnel, and its protocol version). The first failure ends the walk; the later steps
are reported as not tried. The result is a plain list of StepResult, rendered by the CLI.
"""

from __future__ import annotations

import time
from dataclasses import dataclass

import paramiko

from farm.errors import FarmError, HostError
from farm.fleet.farm_yaml import HostConfig
from farm.fleet.hostkeys import HostKeyChanged, HostKeyPolicy, HostKeyUnknown
from farm.fleet.ssh import (
    SshTarget,
    Step,
    StepFailed,
    authenticate,
    handshake,
    resolve,
    tcp_connect,
)
from farm.fleet.tunnel import adb_version_over

STEP_ORDER = (Step.RESOLVE, Step.TCP, Step.HOST_KEY, Step.AUTH, Step.ADB)


@dataclass(frozen=True)
class StepResult:
    step: Step
    ok: bool | None  # None: not tried (an earlier step failed)
    detail: str
    fix: str | None = None
    elapsed_ms: float | None = None


def _failed(step: Step, error: FarmError) -> StepResult:
    detail = error.detail if isinstance(error, StepFailed) else error.message
    if isinstance(error, HostError) and detail.startswith(f"{error.host}: "):
        detail = detail[len(error.host) + 2 :]
    return StepResult(step, False, detail, error.hint)


def check_host(
    host: HostConfig, target: SshTarget, policy: HostKeyPolicy, timeout_s: float = 10.0
) -> list[StepResult]:
    results: list[StepResult] = []

    def passed(step: Step, detail: str, started: float) -> None:
        results.append(StepResult(step, True, detail, elapsed_ms=(time.perf_counter() - started) * 1e3))

    def finish(step: Step, error: FarmError) -> list[StepResult]:
        results.append(_failed(step, error))
        tried = {r.step for r in results}
        results.extend(StepResult(s, None, "not tried") for s in STEP_ORDER if s not in tried)
        return results

    started = time.perf_counter()
    try:
        ip = resolve(target)
    except StepFailed as error:
        return finish(Step.RESOLVE, error)
    passed(Step.RESOLVE, f"{target.hostname} -> {ip}", started)

    started = time.perf_counter()
    try:
        sock = tcp_connect(target, ip, timeout_s)
    except StepFailed as error:
        return finish(Step.TCP, error)
    passed(Step.TCP, f"{ip}:{target.port} accepts connections", started)

    started = time.perf_counter()
    try:
        transport = handshake(target, sock, policy, timeout_s=timeout_s)
    except (StepFailed, HostKeyUnknown, HostKeyChanged) as error:
        sock.close()
        return finish(Step.HOST_KEY, error)
    try:
        key = transport.get_remote_server_key()
        check = policy.check(target.host_id, key)
        passed(Step.HOST_KEY, f"{check.key_type} {check.fingerprint} is known for {target.host_id}", started)

        started = time.perf_counter()
        try:
            authenticate(target, transport)
        except StepFailed as error:
            return finish(Step.AUTH, error)
        passed(Step.AUTH, f"logged in as {target.user}", started)

        started = time.perf_counter()
        try:
            channel = transport.open_channel(
                "direct-tcpip", ("127.0.0.1", host.adb_port), ("127.0.0.1", 0), timeout=timeout_s
            )
        except paramiko.ChannelException as error:
            return finish(
                Step.ADB,
                HostError(
                    host.name,
                    f"nothing accepts connections on 127.0.0.1:{host.adb_port} on the host ({error.text})",
                    retryable=True,
                    hint=f"start the adb server there: `ssh {target.user}@{target.hostname} adb -P "
                    f"{host.adb_port} start-server`, or fix adb_port at {host.location}",
                ),
            )
        except (paramiko.SSHException, OSError) as error:
            return finish(
                Step.ADB,
                HostError(
                    host.name,
                    f"port forwarding refused ({error})",
                    retryable=False,
                    hint="the host's sshd_config must allow it: AllowTcpForwarding yes",
                ),
            )
        try:
            version = adb_version_over(channel)
        except (OSError, paramiko.SSHException, ValueError) as error:
            return finish(
                Step.ADB,
                HostError(
                    host.name,
                    f"127.0.0.1:{host.adb_port} on the host is not an adb server ({error})",
                    retryable=False,
                    hint=f"check adb_port at {host.location}",
                ),
            )
        finally:
            channel.close()
        passed(Step.ADB, f"adb server on port {host.adb_port} answers, protocol version {version}", started)
        return results
    finally:
        transport.close()
