"""The simulator's own tests: the phone fixtures (vphone.testing.phones) for every file here."""

pytest_plugins = ["vphone.testing.phones", "vphone.testing.opencl"]
