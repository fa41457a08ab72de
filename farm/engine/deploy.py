"""Deploy programs to a phone by (name, ABI): benchmark programs from kernels/build/<abi>/ and
device agents from device_agents/build/<abi>/, content-addressed on the phone under
/data/local/tmp/farm/bin/<sha256 prefix>/<name> (no push when the phone has the same sha256).
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

import farm
from farm.device.elf import read_elf_header, runs_on
from farm.device.session import DeviceSession
from farm.errors import DevicePermanentError, EnvironmentProblem

BUILD_DIRS = ("kernels/build", "device_agents/build")


@dataclass(frozen=True)
class Deployed:
    name: str
    abi: str
    phone_path: str
    sha256: str
    pushed: bool


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
