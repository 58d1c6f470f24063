"""The report page in a real browser: headless Chromium runs its scripts, the plots are drawn.

Chromium is Debian's ``chromium`` package, which ``.ci/run`` installs. Without it this test fails
(it is not skipped) and says how to install it; ``-m 'not browser'`` leaves it out on purpose.
"""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

import pytest
from PIL import Image

from pulsarlab.report import write_report
from pulsarlab.report.figures import FAULT_COLOUR, KIND_COLOURS
from tests import report_runs

pytestmark = pytest.mark.browser
TIMEOUT_S = 180
PLOTS = {"rates": 8, "publish-latency": 4, "e2e-latency": 4}  # traces: 4 kinds x 2 clusters; p50, p95, p99, max


def chromium(page: Path, tmp: Path, *args: str) -> subprocess.CompletedProcess[str]:
    exe = shutil.which("chromium") or shutil.which("chromium-browser")
    if exe is None:
        pytest.fail("chromium is not installed: `apt-get install -y chromium` (Debian's package; .ci/run installs it), "
                    "or leave this test out with -m 'not browser'")
    command = [exe, "--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars", f"--user-data-dir={tmp / 'profile'}",
               "--enable-logging=stderr", "--v=0", "--virtual-time-budget=20000", *args, page.as_uri()]
    try:
        done = subprocess.run(command, capture_output=True, text=True, timeout=TIMEOUT_S)
    except subprocess.TimeoutExpired:
        pytest.fail(f"chromium did not finish rendering {page} within {TIMEOUT_S}s")
    assert done.returncode == 0, f"chromium exited {done.returncode}: {done.stderr[-2000:]}"
    console = [line for line in done.stderr.splitlines() if ":CONSOLE" in line]
    assert not console, "the page wrote to the browser console:\n" + "\n".join(console)
    return done


@pytest.fixture(scope="module")
def page(tmp_path_factory: pytest.TempPathFactory) -> Path:
    run = report_runs.write_run(tmp_path_factory.mktemp("browser") / "run", verdict="pass", scenario=True)
    return write_report(run)


def plot_segments(dom: str) -> dict[str, str]:
    """The DOM of each plot's container, up to the next one."""
    starts = {name: dom.index(f'id="plot-{name}"') for name in PLOTS}
    ends = sorted(starts.values())[1:] + [len(dom)]
    return {name: dom[at:next(e for e in ends if e > at)] for name, at in starts.items()}


def test_plots_are_drawn_with_their_traces_and_fault_labels(page: Path, tmp_path: Path) -> None:
    dom = chromium(page, tmp_path, "--dump-dom").stdout
    for name, traces in PLOTS.items():
        seg = plot_segments(dom)[name]
        assert 'class="main-svg"' in seg, f"plot {name}: plotly drew no SVG"
        # a legend sample is one relative horizontal stroke ("M5,0h30"); a trace's line has absolute segments
        lines = [d for d in re.findall(r'<path class="js-line" d="(M[^"]+)"', seg) if len(re.findall("[LHV]", d)) >= 3]
        assert len(lines) == traces, f"plot {name}: {len(lines)} drawn lines, expected {traces}"
        labels = re.findall(r'class="annotation-text[^"]*"[^>]*>([^<]+)<', seg)
        assert "kill pulsar1-eu" in labels and "start pulsar1-eu" in labels, f"plot {name}: fault labels {labels}"
    assert "longest gap without an ack: 4.0 s" in plot_segments(dom)["rates"]
    assert 'id="verdict-banner">verdict: PASS' in dom


def test_the_screenshot_shows_the_plotted_colours(page: Path, tmp_path: Path) -> None:
    shot = tmp_path / "report.png"
    chromium(page, tmp_path, "--window-size=1400,3000", f"--screenshot={shot}")
    image = Image.open(shot).convert("RGB")
    assert image.size == (1400, 3000)
    counts = {rgb: n for n, rgb in image.getcolors(maxcolors=1 << 24)}
    assert len(counts) > 200, "a nearly blank screenshot"

    def pixels(hex_colour: str) -> int:
        return counts.get(tuple(int(hex_colour[i:i + 2], 16) for i in (1, 3, 5)), 0)

    for kind in ("sent", "acknowledged", "delivered"):
        assert pixels(KIND_COLOURS[kind]) > 200, f"the {kind} line is not on the screenshot"
    assert pixels(FAULT_COLOUR) > 100, "the fault lines are not on the screenshot"
