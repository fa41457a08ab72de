"""/proc/cpuinfo for a phone (pure): one block per CPU of its profile, as many as
/sys/devices/system/cpu/{possible,present} list, in the host's format.

The phone runs the host's instruction set (`uname -m` and ro.product.cpu.abi say x86_64 on this
host), so the blocks are the host's first CPU's, renumbered: `processor`, `core id`, `apicid`
follow the phone's CPU index, `siblings`/`cpu cores` its CPU count, `cpu MHz` the top clock of
the CPU's cluster (what its cpufreq policy shows as cpuinfo_max_freq). An ARM host's blocks
(CPU part, BogoMIPS...) are kept as they are, renumbered the same way.
"""

from __future__ import annotations

import re

from vphone.profile import Profile

# Fields renumbered per CPU; the rest of the host's block is copied.
_PER_CPU = ("processor", "core id", "apicid", "initial apicid")
_COUNTS = ("siblings", "cpu cores")
# "model\t\t: 2": the key, its padding and the colon as the host's kernel printed them, the value
_FIELD_RE = re.compile(r"^(([^\t:]+?)\s*:) ?(.*)$")


def _first_block(host_text: str) -> list[tuple[str, str, str]]:
    """The host's first `processor` block as (printed key, key, value) (its trailing lines, e.g.
    ARM's `Hardware`, come after the last block and are left out)."""
    fields: list[tuple[str, str, str]] = []
    for line in host_text.split("\n\n", 1)[0].splitlines():
        match = _FIELD_RE.match(line)
        if match:
            fields.append((match.group(1), match.group(2), match.group(3)))
    return fields or [("processor\t:", "processor", "0")]


def cpuinfo_text(profile: Profile, host_text: str) -> str:
    clusters = profile.cpu.clusters
    ncpu = sum(c.cpus for c in clusters)
    template = _first_block(host_text)
    blocks = []
    cpu = 0
    for cluster in clusters:
        top_mhz = max(cluster.freqs_khz) / 1000
        for _ in range(cluster.cpus):
            lines = []
            for printed, key, value in template:
                if key in _PER_CPU:
                    value = str(cpu)
                elif key in _COUNTS:
                    value = str(ncpu)
                elif key == "cpu MHz":
                    value = f"{top_mhz:.3f}"
                lines.append(f"{printed} {value}" if value else printed)
            blocks.append("\n".join(lines) + "\n")
            cpu += 1
    return "\n".join(blocks) + "\n"
