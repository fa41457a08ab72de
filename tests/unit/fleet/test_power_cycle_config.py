"""farm.yaml `power_cycle:` (host-wide or per phone) and its placeholders: parsed once, rendered
per phone into argv words (never through a shell), mistakes with FILE:LINE."""

from __future__ import annotations

import pytest

from farm.errors import ConfigError
from farm.fleet.farm_yaml import parse_config
from farm.fleet.powercycle import parse_template, run_local

CONFIG = """\
hosts:
  - name: lab1
    address: lab1.example.org
    power_cycle: uhubctl -l {hub} -p {port} -a cycle
    power_cycle_timeout_s: 30
    phones:
      ZY22: {hub: 1-1, port: 3}
      ZY23: {hub: 1-1, port: 4, power_cycle: "ykushcmd -d {port} --serial {serial}"}
"""


def test_host_and_phone_power_cycles_render_each_phone_its_own_words() -> None:
    lab1 = parse_config(CONFIG, "farm.yaml").host("lab1")
    host_wide, own = lab1.power_cycle_of("ZY22"), lab1.power_cycle_of("ZY23")
    assert host_wide is not None and own is not None
    assert host_wide.timeout_s == 30.0 and host_wide.location == "farm.yaml:4"
    assert host_wide.render({"serial": "ZY22", **lab1.phones["ZY22"]}) == (
        "uhubctl",
        "-l",
        "1-1",
        "-p",
        "3",
        "-a",
        "cycle",
    )
    assert own.render({"serial": "ZY23", **lab1.phones["ZY23"]}) == (
        "ykushcmd",
        "-d",
        "4",
        "--serial",
        "ZY23",
    )
    assert "power_cycle" not in lab1.phones["ZY23"]  # the phone's own line is not a placeholder value
    assert lab1.power_cycle_of("OTHER") is host_wide  # a phone without an entry gets the host's


def test_a_value_is_one_word_never_shell_code() -> None:
    cycle = parse_template("echo {port}", frozenset({"port"}), "f.yaml:1", 5.0)
    assert cycle.render({"port": "3; rm -rf /"}) == ("echo", "3; rm -rf /")


def test_a_phone_without_a_placeholder_value_says_what_to_add_where() -> None:
    lab1 = parse_config(CONFIG, "farm.yaml").host("lab1")
    cycle = lab1.power_cycle_of("NEW1")
    assert cycle is not None
    with pytest.raises(ConfigError) as caught:
        cycle.render({"serial": "NEW1"})
    assert str(caught.value).startswith("farm.yaml:4: power_cycle needs {hub}, {port} for phone NEW1")
    assert caught.value.hint is not None and "NEW1" in caught.value.hint


@pytest.mark.parametrize(
    ("line", "expected"),
    [
        ("uhubctl -p {prot}", "f.yaml:4: hosts.lab1.power_cycle: unknown placeholder {prot}"),
        ("uhubctl -p {port:>3}", "f.yaml:4: hosts.lab1.power_cycle: placeholder {port} must be a plain name"),
        ("'uhubctl -p", "f.yaml:4: hosts.lab1.power_cycle: cannot split the command into words"),
    ],
)
def test_power_cycle_mistakes_name_file_line_and_key(line: str, expected: str) -> None:
    text = (
        f"hosts:\n  - name: lab1\n    address: a\n    power_cycle: {line!r}\n    phones: {{Z: {{port: 3}}}}\n"
    )
    with pytest.raises(ConfigError) as caught:
        parse_config(text, "f.yaml")
    assert str(caught.value).startswith(expected), str(caught.value)


def test_a_phones_entry_must_map_names_to_text_or_numbers() -> None:
    with pytest.raises(ConfigError, match=r"f\.yaml:4: .*phones"):
        parse_config("hosts:\n  - name: lab1\n    address: a\n    phones: {Z: {port: [3]}}\n", "f.yaml")


def test_run_local_reports_exit_code_output_and_a_timeout() -> None:
    done = run_local(("sh", "-c", "echo cycled; exit 3"), 10.0)
    assert (done.exit_code, done.output.strip()) == (3, "cycled")
    stuck = run_local(("sleep", "30"), 0.2)
    assert stuck.exit_code is None and "killed after 0.2 s" in stuck.output
    missing = run_local(("/nonexistent/uhubctl",), 5.0)
    assert missing.exit_code == 127 and "cannot run it" in missing.output
