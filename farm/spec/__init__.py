"""Experiment files: schema, YAML loading with FILE:LINE errors, sweep expansion.

    from farm.spec import load
    experiment = load("experiments/lstm_gpu_load.yaml", variant="quick")
    for cell in experiment.cells(): ...

See farm/spec/model.py for the Experiment API and farm/engine/planner.py for runs.
"""

from farm.spec.expand import Cell, cells_of
from farm.spec.files import load, load_text
from farm.spec.model import Experiment, SpecProblem

__all__ = ["Cell", "Experiment", "SpecProblem", "cells_of", "load", "load_text"]
