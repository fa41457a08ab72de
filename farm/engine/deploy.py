"""Deploy programs to a phone by (name, ABI): benchmark programs from kernels/build/<abi>/ and
device agents from device_agents/build/<abi>/, content-addressed on the phone under
/data/local/tmp/farm/bin/<sha256 prefix>/<name> (no push when the phone has the same sha256).

An external program (`program: external`) brings its own binary per ABI and its assets:
`deploy_external` pushes the binary for the phone's first ABI that has one (bin/ as above) and
each asset to /data/local/tmp/farm/assets/<sha256 prefix>/<file name>, with the same cache. A
phone none of whose ABIs has a binary raises NoBinaryForAbi: the sweep skips that phone.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

import farm
from farm.device.elf import read_elf_header, runs_on
from farm.device.session import ASSETS_DIR, FARM_ROOT, DeviceSession
from farm.errors import DevicePermanentError, EnvironmentProblem
from farm.experiment.external import Abi
from farm.experiment.model import Experiment

BUILD_DIRS = ("kernels/build", "device_agents/build")


@dataclass(frozen=True)
class Deployed:
    name: str
    abi: str
    phone_path: str
    sha256: str
    pushed: bool


class NoBinaryForAbi(DevicePermanentError):
    """The external program has no binary for any ABI the phone runs: the phone is skipped."""


@dataclass(frozen=True)
class ExternalDeployed:
    """An external program on one phone: its binary and its assets by the path the file lists."""

    binary: Deployed
    assets: Mapping[str, Deployed]

    @property
    def pushed(self) -> tuple[str, ...]:
        """What this deployment copied (the rest the phone already had, same sha256)."""
        items = [self.binary, *self.assets.values()]
        return tuple(item.name for item in items if item.pushed)


def binary_abi(binaries: Mapping[Abi, str], abis: Sequence[str]) -> Abi | None:
    """The phone's first ABI (its preference order, ro.product.cpu.abilist) that has a binary."""
    for abi in abis:
        if abi in binaries:
            return Abi(abi)
    return None


def source_root() -> Path:
    """Where the build folders are: $FARM_HOME, else the checkout this package runs from."""
    env = os.environ.get("FARM_HOME")
    return Path(env) if env else Path(farm.__file__).resolve().parents[1]


def find_program(name: str, abis: Sequence[str], root: Path | None = None) -> tuple[Path, str]:
    """The host binary for `name` built for the first ABI of the phone's list that has one.

    An arm64 phone lists arm64-v8a,armeabi-v7a,armeabi: it gets build/arm64-v8a/ (the device
    agents `make agents` cross-builds), else the 32-bit build. A binary whose ELF machine is not
    its folder's ABI is refused here: on the phone it would fail with an exec error naming nothing."""
    base = root or source_root()
    for abi in abis:
        for build in BUILD_DIRS:
            candidate = base / build / abi / name
            if candidate.is_file():
                header = read_elf_header(candidate)
                if header is not None and not runs_on(header, abi):
                    raise EnvironmentProblem(
                        f"{candidate} is an {header.describe()} binary, not {abi}",
                        hint=f"rebuild it: make -C {build.split('/')[0]} ABI={abi}",
                    )
                return candidate, abi
    looked = ", ".join(f"{b}/{{{','.join(abis)}}}/{name}" for b in BUILD_DIRS)
    raise EnvironmentProblem(
        f"no build of {name} for ABI {'/'.join(abis) or '?'} (looked in {looked})", hint="run `make kernels`"
    )


def deploy(
    session: DeviceSession, names: Iterable[str], abis: Sequence[str], root: Path | None = None
) -> dict[str, Deployed]:
    """Install each program on the phone (cached by content) and check it is executable."""
    if not abis:
        raise DevicePermanentError(session.device_id, "phone reports no ABI (ro.product.cpu.abi)")
    installed: dict[str, Deployed] = {}
    for name in names:
        local, abi = find_program(name, abis, root)
        phone_path, pushed = session.push_cached(local, name=name)
        if not session.shell(["test", "-x", phone_path]).ok:
            raise DevicePermanentError(session.device_id, f"{phone_path} is not executable after deploy")
        installed[name] = Deployed(name, abi, phone_path, session.local_sha256(local), pushed)
    return installed


def _check_machine(local: Path, abi: str, key: str) -> None:
    header = read_elf_header(local)
    if header is not None and not runs_on(header, abi):
        raise EnvironmentProblem(
            f"{local} is an {header.describe()} binary, not {abi}",
            hint=f"give benchmark.binary.{key} a build for {abi}",
        )


class NotEnoughStorage(DevicePermanentError):
    """The assets (a language model) do not fit in the phone's free storage: the phone is skipped."""


def available_kb(df_output: str) -> int | None:
    """Available 1K blocks from `df -k PATH` (toybox and coreutils): the third field from the end
    of the last line, so a file-system name wrapped onto its own line does not shift it."""
    lines = [line.split() for line in df_output.strip().splitlines()[1:] if line.strip()]
    if not lines or len(lines[-1]) < 3 or not lines[-1][-3].isdigit():
        return None
    return int(lines[-1][-3])


def check_storage(session: DeviceSession, files: Sequence[Path]) -> None:
    """Refuse assets larger than the free space where they go (all of them, pushed or not: a phone
    that already holds some has the room; this errs on asking for too much, never too little)."""
    if not files:
        return
    need_bytes = sum(f.stat().st_size for f in files)
    result = session.shell(["df", "-k", FARM_ROOT.rsplit("/", 1)[0]])
    free_kb = available_kb(result.stdout) if result.ok else None
    if free_kb is None:
        return  # a phone without df: the push itself fails with the device's own message
    if need_bytes > free_kb * 1024:
        largest = max(files, key=lambda f: f.stat().st_size)
        raise NotEnoughStorage(
            session.device_id,
            f"the assets need {need_bytes / 1e6:.1f} MB (largest {largest.name}, "
            f"{largest.stat().st_size / 1e6:.1f} MB) but {FARM_ROOT} has {free_kb * 1024 / 1e6:.1f} MB free",
            hint="free space on the phone or use a smaller model",
        )


def deploy_external(session: DeviceSession, experiment: Experiment, abis: Sequence[str]) -> ExternalDeployed:
    """Push the external program's binary for this phone's ABI and its assets (content-cached)."""
    benchmark = experiment.benchmark
    abi = binary_abi(benchmark.binary, abis)
    if abi is None:
        given = ", ".join(a.value for a in benchmark.binary)
        raise NoBinaryForAbi(
            session.device_id,
            f"no binary for its ABI {'/'.join(abis) or '?'} (benchmark.binary has {given})",
            hint="add a build for that ABI to benchmark.binary",
        )
    local = experiment.resolve_path(benchmark.binary[abi])
    _check_machine(local, abi.value, abi.value)
    phone_path, pushed = session.push_cached(local)
    if not session.shell(["test", "-x", phone_path]).ok:
        raise DevicePermanentError(session.device_id, f"{phone_path} is not executable after deploy")
    binary = Deployed(local.name, abi.value, phone_path, session.local_sha256(local), pushed)
    check_storage(session, [experiment.resolve_path(asset) for asset in benchmark.assets])
    assets = {}
    for asset in benchmark.assets:
        file = experiment.resolve_path(asset)
        path, copied = session.push_cached(file, folder=ASSETS_DIR, mode=0o644)
        assets[asset] = Deployed(asset, "any", path, session.local_sha256(file), copied)
    return ExternalDeployed(binary, assets)
