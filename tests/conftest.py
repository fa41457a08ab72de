"""Shared pytest configuration. Fixtures that start virtual phones live in tests/fixtures/."""

import os

import pytest

pytest_plugins = [
    "vphone.testing.phones",
    "tests.fixtures.sshd",
    "tests.fixtures.netns",
    "vphone.testing.opencl",
    "tests.fixtures.postgres",
]


# `make test` sets it to 1: a test with phones, servers and timeouts that fails is run once more
# (pytest-rerunfailures), and the summary names each such test with its first failure. On a loaded
# 2-core host CI's runs of December 2026 failed on load races among ~2200 tests, one or a few, a
# different test each time; each found is fixed to wait for its event, and a rerun keeps the next
# one from throwing the whole submission away. Unit tests are never rerun; unset, nothing is (developers
# see every failure).
RERUNS_ENV = "FARM_TEST_RERUNS"
_rerun_reasons: list[str] = []


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    reruns = int(os.environ.get(RERUNS_ENV, "0") or 0)
    if reruns > 0:
        for item in items:
            if item.get_closest_marker("integration") and not item.get_closest_marker("flaky"):
                item.add_marker(pytest.mark.flaky(reruns=reruns))
    # `make test` collects the serial pass from the files that contain "pytest.mark.serial" (see the
    # Makefile): a test marked serial some other way (a conftest, a helper) would run in no pass.
    unmarked = sorted(
        {
            str(item.path)
            for item in items
            if item.get_closest_marker("serial") and "pytest.mark.serial" not in item.path.read_text()
        }
    )
    if unmarked:
        raise pytest.UsageError(
            f"{unmarked[0]}: a test is marked serial but the file does not say `pytest.mark.serial`; "
            "`make test` would run it in no pass: mark it with @pytest.mark.serial in that file"
        )


def pytest_runtest_logreport(report: pytest.TestReport) -> None:
    if report.outcome == "rerun":  # type: ignore[comparison-overlap]
        crash = getattr(report.longrepr, "reprcrash", None)
        why = crash.message.splitlines()[0] if crash is not None and crash.message else "no message"
        _rerun_reasons.append(f"{report.nodeid} ({report.when}): {why}")


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    if _rerun_reasons:
        terminalreporter.section("failed once, then rerun (load races to fix)")
        for line in _rerun_reasons:
            terminalreporter.write_line(line)
