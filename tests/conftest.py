"""Shared pytest configuration. Fixtures that start virtual phones live in tests/fixtures/."""

import pytest

pytest_plugins = [
    "vphone.testing.phones",
    "tests.fixtures.sshd",
    "tests.fixtures.netns",
    "vphone.testing.opencl",
    "tests.fixtures.postgres",
]


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
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
