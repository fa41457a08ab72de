"""Fixtures of the report tests: a hand-built ReportData (see report_sample)."""

from __future__ import annotations

import pytest
from report_sample import DECLARED, build_report_data

from farm.report.model import ReportData


@pytest.fixture
def report_data() -> ReportData:
    return build_report_data(declared=DECLARED)
