"""Host-key policy: a lab host's key must already be known, in ~/.ssh/known_hosts or in farm's own
known-hosts file ($FARM_CONFIG_DIR/known_hosts, default ~/.config/farm/known_hosts).

Nothing is ever accepted silently (no AutoAddPolicy): an unknown key is refused with its SHA256
fingerprint and the command that trusts it (`farm hosts trust NAME`), a key that differs from the
known one is refused loudly, as a possible man-in-the-middle. Both files use OpenSSH's format
(hashed names included), so entries can be moved between them by hand.
"""

from __future__ import annotations

import base64
import enum
import hashlib
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import paramiko

from farm.errors import HostError

KNOWN_HOSTS_FILE_NAME = "known_hosts"


class Verdict(enum.StrEnum):
    TRUSTED = "trusted"
    UNKNOWN = "unknown"
    CHANGED = "changed"


@dataclass(frozen=True)
class KnownKey:
    source: Path
    key_type: str
    fingerprint: str


@dataclass(frozen=True)
class KeyCheck:
    host_id: str
    key_type: str
    fingerprint: str
    verdict: Verdict
    known: tuple[KnownKey, ...] = ()


class HostKeyUnknown(HostError):
    """The host presented a key nobody has trusted yet."""

    def __init__(self, host: str, check: KeyCheck) -> None:
        super().__init__(
            host,
            f"unknown host key {check.key_type} {check.fingerprint} for {check.host_id}; refused",
            retryable=False,
            hint=f"if that fingerprint is the host's, trust it with `farm hosts trust {host}`",
        )
        self.check = check


class HostKeyChanged(HostError):
    """The host presented a key different from the known one: possibly someone in the middle."""

    def __init__(self, host: str, check: KeyCheck) -> None:
        known = "; ".join(f"{k.key_type} {k.fingerprint} in {k.source}" for k in check.known)
        super().__init__(
            host,
            f"HOST KEY CHANGED for {check.host_id}: it now presents {check.key_type} "
            f"{check.fingerprint}, known: {known}; refused (someone may be intercepting the "
            "connection)",
            retryable=False,
            hint=f"if the host was reinstalled, verify the new fingerprint out of band, then "
            f"`farm hosts trust {host} --replace`",
        )
        self.check = check


def host_id(hostname: str, port: int) -> str:
    """The name OpenSSH files a key under: `host` on port 22, `[host]:port` otherwise."""
    return hostname if port == 22 else f"[{hostname}]:{port}"


def fingerprint(key: paramiko.PKey) -> str:
    """`SHA256:...` as `ssh-keygen -l` prints it."""
    digest = hashlib.sha256(key.asbytes()).digest()
    return "SHA256:" + base64.b64encode(digest).decode().rstrip("=")


def default_known_hosts_files() -> tuple[Path, ...]:
    return (Path.home() / ".ssh" / "known_hosts",)


def _names_match(names_field: str, wanted: str) -> bool:
    for name in names_field.split(","):
        if name.startswith("|1|"):
            if paramiko.HostKeys.hash_host(wanted, name) == name:
                return True
        elif name == wanted:
            return True
    return False


def _known_in(path: Path, wanted: str) -> list[tuple[KnownKey, str]]:
    """(known key, base64 blob) entries for `wanted` in one known_hosts file; none if no file."""
    try:
        lines = path.read_text(encoding="utf-8", errors="replace").splitlines()
    except FileNotFoundError:
        return []
    found = []
    for line in lines:
        fields = line.split()
        if len(fields) < 3 or line.lstrip().startswith("#"):
            continue
        if fields[0].startswith("@"):  # @revoked / @cert-authority: not handled, never a match
            continue
        if not _names_match(fields[0], wanted):
            continue
        try:
            blob = base64.b64decode(fields[2])
        except ValueError:
            continue
        digest = "SHA256:" + base64.b64encode(hashlib.sha256(blob).digest()).decode().rstrip("=")
        found.append((KnownKey(path, fields[1], digest), fields[2]))
    return found


class HostKeyPolicy:
    """Verify and trust host keys against the user's and farm's known-hosts files."""

    def __init__(self, farm_file: Path, system_files: Sequence[Path] | None = None) -> None:
        self.farm_file = farm_file
        self.system_files = tuple(default_known_hosts_files() if system_files is None else system_files)

    @property
    def files(self) -> tuple[Path, ...]:
        return (*self.system_files, self.farm_file)

    def known_types(self, wanted: str) -> list[str]:
        """Key types already known for this host, so the handshake asks for one of those first."""
        types = [k.key_type for path in self.files for k, _ in _known_in(path, wanted)]
        return list(dict.fromkeys(types))

    def check(self, wanted: str, key: paramiko.PKey) -> KeyCheck:
        presented = fingerprint(key)
        known = [k for path in self.files for k, _ in _known_in(path, wanted)]
        if any(k.key_type == key.get_name() and k.fingerprint == presented for k in known):
            verdict = Verdict.TRUSTED
        elif known:
            verdict = Verdict.CHANGED
        else:
            verdict = Verdict.UNKNOWN
        return KeyCheck(wanted, key.get_name(), presented, verdict, tuple(known))

    def require_trusted(self, host: str, wanted: str, key: paramiko.PKey) -> KeyCheck:
        result = self.check(wanted, key)
        if result.verdict is Verdict.UNKNOWN:
            raise HostKeyUnknown(host, result)
        if result.verdict is Verdict.CHANGED:
            raise HostKeyChanged(host, result)
        return result

    def trust(self, host: str, wanted: str, key: paramiko.PKey, *, replace: bool = False) -> KeyCheck:
        """Record `key` for `wanted` in farm's file; a changed key only with `replace`.

        A conflicting key in a file farm does not own (~/.ssh/known_hosts) is never edited: the
        user removes it with ssh-keygen -R, so farm never rewrites the user's SSH trust.
        """
        result = self.check(wanted, key)
        if result.verdict is Verdict.TRUSTED:
            return result
        if result.verdict is Verdict.CHANGED:
            if not replace:
                raise HostKeyChanged(host, result)
            foreign = [k for k in result.known if k.source != self.farm_file]
            if foreign:
                raise HostError(
                    host,
                    f"the old key of {wanted} is in {foreign[0].source}, which farm does not edit",
                    retryable=False,
                    hint=f"remove it with `ssh-keygen -R '{wanted}' -f {foreign[0].source}`, then trust "
                    "again",
                )
            self._remove(wanted)
        self.farm_file.parent.mkdir(parents=True, exist_ok=True)
        with self.farm_file.open("a", encoding="utf-8") as out:
            out.write(f"{wanted} {key.get_name()} {key.get_base64()}\n")
        return result

    def _remove(self, wanted: str) -> None:
        lines = self.farm_file.read_text(encoding="utf-8").splitlines(keepends=True)
        kept = [
            line for line in lines if not (len(line.split()) >= 3 and _names_match(line.split()[0], wanted))
        ]
        self.farm_file.write_text("".join(kept), encoding="utf-8")
