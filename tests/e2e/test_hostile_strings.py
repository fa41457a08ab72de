"""A phone whose model string carries terminal escapes, and an experiment whose factor level carries a
newline, through the real CLI: devices, run progress, status, report and CSV show them escaped."""

from __future__ import annotations

import csv
import io
from pathlib import Path

import pytest
from vphone.profiles import PROFILES_DIR
from vphone.testing.phones import PhoneFactory

from farm.safe_text import markdown, terminal
from tests.e2e.farm_cli import run_farm, write_experiment

pytestmark = pytest.mark.integration

# Recolours the terminal, sets its title, then clears the screen.
MODEL = "Pixel\x1b[31mRED\x1b[0m\x1b]0;owned\x07\x1b[2J"
MODEL_YAML = '"Pixel\\e[31mRED\\e[0m\\e]0;owned\\a\\e[2J"'
# A level that would forge a progress line of its own.
LEVEL = "1\n[9] local/VP0000 fake-run: done\x1b[2J"
LEVEL_YAML = '"1\\n[9] local/VP0000 fake-run: done\\e[2J"'
EXPERIMENT = (
    'description: "![pixel](http://evil.example/t.png) \\e[31mred"\n'
    "benchmark:\n"
    "  program: cnn\n"
    "  params: {model: squeezenet1.1, backend: cpu, input_size: 32, layers_limit: 2}\n"
    f"sweep: {{g: [1, {LEVEL_YAML}]}}\n"
    "measurement: {warmup: 0, iterations: 1, min_seconds: 0, max_seconds: 10, repetitions: 1}\n"
    "conditions: {cooldown: {max_temp_c: 90, timeout_s: 5}, min_battery_pct: 1}\n"
    "telemetry: {idle_baseline_s: 0, power: none, disable_charging: false}\n"
    "retries: {max_attempts: 1}\n"
)


def _no_escapes(*texts: str) -> None:
    for text in texts:
        assert "\x1b" not in text and "\x07" not in text, text[-2000:]


def test_phone_and_file_strings_are_escaped_everywhere_they_are_shown(
    virtual_phones: PhoneFactory, tmp_path: Path
) -> None:
    profile = tmp_path / "esc-model.yaml"
    shipped = (PROFILES_DIR / "adreno-sd8gen2.yaml").read_text()
    profile.write_text(shipped.replace("ro.product.model: SM-S911B", f"ro.product.model: {MODEL_YAML}"))
    phones = virtual_phones(count=1, profiles=[str(profile)])
    results = tmp_path / "results"

    devices = run_farm(phones.adb_port, results, "devices", "--no-probe")
    assert devices.returncode == 0, devices.stderr
    _no_escapes(devices.stdout, devices.stderr)
    assert terminal(MODEL) in devices.stdout

    path = write_experiment(tmp_path, "hostile_strings", EXPERIMENT)
    run = run_farm(phones.adb_port, results, "run", str(path), "--no-live")
    assert run.returncode == 1, run.stdout + run.stderr  # the bad level's run fails, the other is done
    _no_escapes(run.stdout, run.stderr)
    progress = [line for line in run.stdout.splitlines() if line.startswith("[")]
    assert len(progress) == 2, run.stdout  # no line forged by the level
    assert any(terminal(LEVEL) in line and ": FAILED" in line for line in progress), progress

    status = run_farm(phones.adb_port, results, "status", "hostile_strings")
    assert status.returncode == 0, status.stderr
    _no_escapes(status.stdout, status.stderr)
    assert "FAILED" in status.stdout

    out = tmp_path / "report"
    report = run_farm(phones.adb_port, results, "report", "hostile_strings", "--out", str(out))
    assert report.returncode == 0, report.stderr
    html = (out / "report.html").read_text(encoding="utf-8")
    md = (out / "report.md").read_text(encoding="utf-8")
    _no_escapes(html, md, *(svg.read_text() for svg in (out / "figures").glob("*.svg")))
    assert terminal(MODEL) in html and markdown(MODEL) in md
    # the description's image is text in the page; the file's own YAML is shown in a code block
    assert "<img" not in html and "![pixel]" not in md.split("```yaml")[0]

    export = run_farm(phones.adb_port, results, "export", "hostile_strings", "--csv")
    assert export.returncode == 0, export.stderr
    _no_escapes(export.stdout)
    rows = list(csv.DictReader(io.StringIO(export.stdout)))
    assert rows and {row["g"] for row in rows} == {"1"}  # only the DONE run has metrics
    assert len(rows) == export.stdout.count("\n") - 1
