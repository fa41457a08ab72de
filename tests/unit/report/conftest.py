"""Fixtures of the report tests: a hand-built ReportData (see report_sample)."""

from __future__ import annotations

import pytest
from report_sample import build_report_data

from farm.report.model import FigureSpec, ReportData


@pytest.fixture
def report_data() -> ReportData:
    return build_report_data(
        declared=(
            FigureSpec(x="hidden", y="latency_ms", color="backend", facet="gpu_load", title="declared"),
        )
    )
