"""Experiment files: schema, YAML loading with FILE:LINE errors, sweep expansion.

    from farm.experiment import load
    experiment = load("experiments/lstm_gpu_load.yaml", variant="quick")
    for cell in experiment.cells(): ...

See farm/experiment/model.py for the Experiment API and farm/engine/planner.py for runs.
"""

from farm.experiment.expand import Cell, cells_of
from farm.experiment.files import load, load_text
from farm.experiment.model import Experiment, SpecProblem

__all__ = ["Cell", "Experiment", "SpecProblem", "cells_of", "load", "load_text"]
