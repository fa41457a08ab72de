"""The tidy frame: a pandas DataFrame of an experiment's runs and metrics, one row per run and
metric (pure: ReportData in, DataFrame out). farm.api.load_frame returns it to notebooks, `farm
export --parquet` writes it, and the report's study sections compute from it, so a notebook and
a report never disagree.

Columns, in order: experiment, run_id, cell_id, repetition, device, phone_model, phone_virtual,
state, valid, the validity flags (`valid_<check>`, farm.analysis.validity; missing where a check
does not apply), one column per factor (`factor_<name>` when the name clashes), metric, value,
unit. `valid` says whether the row's metric counts: the run is DONE and its concern's checks hold
(so `frame[frame.valid]` is what figures and tables use). The validity flags are columns, not
metric rows. Runs without metrics have no rows.
"""

from __future__ import annotations

import pandas as pd

from farm.analysis.validity import FLAG_PREFIX, VALID, VALID_ENERGY, Check, Validity, usable
from farm.report.export import factor_columns
from farm.report.model import ReportData
from farm.store.runs import RunState

RUN_COLUMNS: tuple[str, ...] = (
    "experiment",
    "run_id",
    "cell_id",
    "repetition",
    "device",
    "phone_model",
    "phone_virtual",
    "state",
    VALID,
)
FLAG_COLUMNS: tuple[str, ...] = tuple(f"{FLAG_PREFIX}{check.value}" for check in Check)
VALUE_COLUMNS: tuple[str, ...] = ("metric", "value", "unit")
_NOT_METRICS = frozenset({*FLAG_COLUMNS, VALID, VALID_ENERGY})


def columns(data: ReportData) -> list[str]:
    return [*RUN_COLUMNS, *FLAG_COLUMNS, *(column for _, column in factor_columns(data)), *VALUE_COLUMNS]


def tidy_frame(data: ReportData) -> pd.DataFrame:
    """One row per run and metric of `data` (every run, valid or not: filter on `valid`)."""
    phones = {phone.device_id: phone for phone in data.phones}
    factors = factor_columns(data)
    rows = []
    for run in data.runs:
        phone = phones.get(run.device_id or "")
        flags = Validity.from_metrics(run.metrics).flags
        base = {
            "experiment": data.experiment,
            "run_id": run.run_id,
            "cell_id": run.cell_id,
            "repetition": run.repetition,
            "device": run.device_id,
            "phone_model": phone.model if phone else None,
            "phone_virtual": phone.virtual if phone else None,
            "state": run.state.value,
            **{f"{FLAG_PREFIX}{check.value}": flags.get(check) for check in Check},
            **{column: run.factors.get(name) for name, column in factors},
        }
        for metric in sorted(set(run.metrics) - _NOT_METRICS):
            valid = run.state is RunState.DONE and usable(run.metrics, metric)
            rows.append(
                {
                    **base,
                    VALID: valid,
                    "metric": metric,
                    "value": run.metrics[metric],
                    "unit": run.units.get(metric, ""),
                }
            )
    frame = pd.DataFrame(rows, columns=columns(data))
    for column in (VALID, "phone_virtual", *FLAG_COLUMNS):
        frame[column] = frame[column].astype("boolean")
    for _, column in factors:
        # Parquet wants one type per column: a factor whose levels mix types (1 and "auto") is text.
        kinds = {type(value) for value in frame[column] if value is not None}
        if len(kinds) > 1:
            frame[column] = frame[column].map(lambda v: None if v is None else str(v))
    frame["repetition"] = frame["repetition"].astype("int64")
    frame["value"] = frame["value"].astype("float64")
    return frame


def counted(frame: pd.DataFrame, data: ReportData) -> pd.DataFrame:
    """The rows that figures and cell statistics use: DONE and valid, unless the report includes
    invalid runs (then every DONE row)."""
    done = frame[frame["state"] == RunState.DONE.value]
    if data.include_invalid:
        # invalid runs too, but never an energy or power below zero (no measurement at all)
        negative = done["metric"].str.startswith(("energy_", "power_")) & (done["value"] < 0)
        return done[~negative]
    return done[done[VALID].astype(bool)]
