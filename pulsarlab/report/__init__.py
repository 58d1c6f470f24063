"""``pulsarlab report DIR``: one self-contained HTML page per run directory.

- :mod:`.rundir`: what is read (events, manifest, verdict, faults, scenario verdict);
- :mod:`.aggregate`: rates and latency percentiles over time, in pyarrow and numpy;
- :mod:`.figures`: the Plotly figures; :mod:`.page`: the page (``page.html.j2``).
"""

from __future__ import annotations

from pulsarlab.report.page import render, write_report
from pulsarlab.report.rundir import ReportInputError, load

__all__ = ["ReportInputError", "load", "render", "write_report"]
