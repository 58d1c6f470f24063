"""The same topology to ready on both runtimes, side by side in one run; and the docker image build.

For each round and runtime (alternating: local, docker, local, docker...): seconds from ``pulsarlab
up`` to its exit (every node ready, configured, a message through), and the peak resident memory
of the nodes' process trees (a container's JVM is a process of this machine too), sampled at 2 Hz
through the deployment contract. Then ``pulsarlab image build`` when the image is cached (the cold
build is ``bench/image_build.py --from-scratch``). Prints min and median per runtime and the
docker/local ratio of the medians.

Run (root, engine up: ``eval "$(scripts/docker-engine start)"``):
``python bench/runtime_compare.py [--topology smoke] [--rounds 2]``.
"""

from __future__ import annotations

import argparse
import contextlib
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass
from pathlib import Path

import psutil

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # this checkout's pulsarlab first

from pulsarlab.deployment import Endpoints
from pulsarlab.errors import StateError
from pulsarlab.runtime import open_deployment
from pulsarlab.runtime.base import NodeRuntime

GIB = 1024**3


@dataclass
class Sample:
    runtime: str
    seconds: float
    peak_rss: int


def _tree_rss(pids: list[int]) -> int:
    total = 0
    for pid in pids:
        with contextlib.suppress(psutil.Error):
            p = psutil.Process(pid)
            total += p.memory_info().rss + sum(c.memory_info().rss for c in p.children(recursive=True))
    return total


class NodePids:
    """The nodes' pids, for the memory sampler, asked of the deployment as seldom as it can: the
    deployment is opened once, and a node's pid once found is kept (a node starts once per ``up``).
    On the docker runtime each question is an engine call (``docker container inspect``), and
    asking for every node twice a second loaded the machine while the docker side started: nodes
    not found yet are asked for every ``every``-th sample only."""

    def __init__(self, state_dir: Path, every: int = 4) -> None:
        self.state_dir, self.every, self._round = state_dir, every, 0
        self._deployment: Endpoints | None = None
        self.found: dict[str, int] = {}

    def __call__(self) -> list[int]:
        self._round += 1
        if (self._round - 1) % self.every:  # asks on samples 1, 1 + every, ...
            return list(self.found.values())
        if self._deployment is None:
            with contextlib.suppress(StateError, OSError, ValueError):  # the state appears while up runs
                self._deployment = open_deployment(self.state_dir)
        d = self._deployment
        if d is not None:
            assert isinstance(d, NodeRuntime), d  # both runtimes compared start their nodes themselves
            for n in d.topo.nodes:
                if n.name not in self.found and (pid := d.process_info(n.name)[0]):
                    self.found[n.name] = pid
        return list(self.found.values())


def measure(topology: str, runtime: str) -> Sample:
    state = Path(tempfile.mkdtemp(prefix=f"pulsarlab-rt-{runtime}-")) / topology
    peak = 0
    stop = threading.Event()

    pids = NodePids(state)

    def sample() -> None:
        nonlocal peak
        while not stop.wait(0.5):
            peak = max(peak, _tree_rss(pids()))

    sampler = threading.Thread(target=sample, daemon=True)
    sampler.start()
    cli = [sys.executable, "-m", "pulsarlab.cli"]
    t0 = time.monotonic()
    try:
        proc = subprocess.run([*cli, "up", "--topology", topology, "--runtime", runtime, "--state-dir", str(state)],
                              capture_output=True, text=True, timeout=900)
        seconds = time.monotonic() - t0
        if proc.returncode:
            raise SystemExit(f"up on {runtime} failed:\n{proc.stderr[-3000:]}")
        time.sleep(5)  # memory keeps growing a little after ready
    finally:
        stop.set()
        sampler.join()
        subprocess.run([*cli, "down", "--state-dir", str(state)], capture_output=True, timeout=300)
        shutil.rmtree(state.parent, ignore_errors=True)
    return Sample(runtime, seconds, peak)


def cached_image_build() -> float:
    t0 = time.monotonic()
    proc = subprocess.run([sys.executable, "-m", "pulsarlab.cli", "image", "build"], capture_output=True, text=True, timeout=900)
    if proc.returncode:
        raise SystemExit(f"image build failed:\n{proc.stderr[-3000:]}")
    return time.monotonic() - t0


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--topology", default="smoke")
    ap.add_argument("--rounds", type=int, default=2)
    args = ap.parse_args()
    first = cached_image_build()  # makes sure the image exists before the docker rounds
    print(f"image build (first call of this run): {first:.1f} s")
    samples: list[Sample] = []
    for r in range(args.rounds):
        for runtime in ("local", "docker"):
            s = measure(args.topology, runtime)
            samples.append(s)
            print(f"round {r + 1} {runtime:6s}: up -> ready {s.seconds:6.1f} s   peak RSS {s.peak_rss / GIB:5.2f} GiB",
                  flush=True)
    cached = [cached_image_build() for _ in range(3)]
    print(f"\n{args.topology}, {args.rounds} round(s) each, alternating")
    medians = {}
    for runtime in ("local", "docker"):
        secs = [s.seconds for s in samples if s.runtime == runtime]
        rss = [s.peak_rss / GIB for s in samples if s.runtime == runtime]
        medians[runtime] = (statistics.median(secs), statistics.median(rss))
        print(f"  {runtime:6s} up -> ready  min {min(secs):6.1f} s  median {medians[runtime][0]:6.1f} s   "
              f"peak RSS min {min(rss):.2f} GiB  median {medians[runtime][1]:.2f} GiB")
    (ls, lr), (ds, dr) = medians["local"], medians["docker"]
    print(f"  docker/local: time {ds / ls:.2f}, memory {dr / lr:.2f}")
    print(f"  image build, cached: min {min(cached):.2f} s  median {statistics.median(cached):.2f} s (the whole CLI call)")


if __name__ == "__main__":
    main()
