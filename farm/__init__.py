"""farm: orchestrate deep-learning benchmarks on a lab of Android phones."""

__version__ = "0.1.0"
