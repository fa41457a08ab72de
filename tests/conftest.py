"""Shared pytest configuration. Fixtures that start virtual phones live in tests/fixtures/."""

pytest_plugins = [
    "tests.fixtures.phones",
    "tests.fixtures.sshd",
    "tests.fixtures.netns",
    "tests.fixtures.opencl",
    "tests.fixtures.postgres",
]
