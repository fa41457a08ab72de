"""Parameter values reach the phone as data, never as shell syntax (property test, real phone).

Every generated value is built around payloads that would create a canary file if any layer
(adb's shell, our wrapper scripts, the detached start) parsed it: quotes, `;`, `$()`, backticks,
newlines, `&`, `|`, redirections, globs. The value must come back byte for byte and the canary
must never appear.
"""

from __future__ import annotations

import time

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from farm.device.session import DeviceSession

pytestmark = pytest.mark.integration

CANARY = "/data/local/tmp/farm/canary"
WORK = "/data/local/tmp/farm/quoting"
PAYLOADS = [
    f"; touch {CANARY}",
    f"$(touch {CANARY})",
    f"`touch {CANARY}`",
    f"\ntouch {CANARY}\n",
    f"' ; touch {CANARY} ; '",
    f'" ; touch {CANARY} ; "',
    f"&& touch {CANARY}",
    f"| touch {CANARY}",
    f"> {CANARY}",
    f"$(IFS=_;cmd=touch_{CANARY};$cmd)",
    "*",
    "-n",
    "",
]
values = st.lists(
    st.one_of(st.sampled_from(PAYLOADS), st.text(alphabet="ab '\"$`;()&|<>\\\n\t*?{}!#~=-", max_size=12)),
    min_size=1,
    max_size=4,
).map("".join)


def test_parameter_values_are_data_on_the_phone(virtual_phones) -> None:  # type: ignore[no-untyped-def]
    # One phone for all examples: hypothesis runs inside the test, not around the fixture.
    phones = virtual_phones(count=1)
    session = DeviceSession(phones[0].device(phones.client()), "local/quoting", default_timeout_s=20)
    session.shell(["mkdir", "-p", WORK], check=True)

    @settings(max_examples=40, deadline=None, suppress_health_check=list(HealthCheck))
    @given(value=values)
    def shell_argument_is_data(value: str) -> None:
        result = session.shell(["printf", "%s", value])
        assert result.stdout == value
        assert not session.shell(["test", "-e", CANARY]).ok

    @settings(max_examples=15, deadline=None, suppress_health_check=list(HealthCheck))
    @given(value=values)
    def detached_program_argument_is_data(value: str) -> None:
        exit_file = f"{WORK}/exit"
        session.shell(["rm", "-f", exit_file, f"{WORK}/out"])
        session.start(
            ["printf", "%s", value],
            workdir=WORK,
            stdout=f"{WORK}/out",
            stderr=f"{WORK}/err",
            exit_file=exit_file,
        )
        deadline = time.monotonic() + 10
        while not session.shell(["test", "-e", exit_file]).ok:
            assert time.monotonic() < deadline, "detached printf never finished"
            time.sleep(0.05)
        assert session.read_text(f"{WORK}/out") == value
        assert not session.shell(["test", "-e", CANARY]).ok

    shell_argument_is_data()
    detached_program_argument_is_data()
    assert session.shell(["test", "-d", WORK]).ok  # the phone was really reached
