"""Docker engine and image benchmark: engine start, cold and cached ``image build`` seconds.

Cold removes the Pulsar image (and, with ``--from-scratch``, the base image and the cached Debian
root filesystem too, so debootstrap runs again); cached repeats the build with the same inputs.
Run as root: ``python bench/image_build.py [--from-scratch]``. Stops the engine only if it started it.
"""

from __future__ import annotations

import argparse
import re
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))  # this checkout's pulsarlab, not whichever one is installed

from pulsarlab.errors import DockerEngineError  # noqa: E402
from pulsarlab.runtime.docker import engine, image  # noqa: E402

SCRIPT = ROOT / "scripts" / "docker-engine"


def start_engine() -> tuple[str, float, bool]:
    """(DOCKER_HOST, seconds, started by us)."""
    try:
        return engine.check().host, 0.0, False
    except DockerEngineError:
        pass
    t0 = time.monotonic()
    proc = subprocess.run([str(SCRIPT), "start"], capture_output=True, text=True, timeout=1200, check=True)
    seconds = time.monotonic() - t0
    m = re.search(r"DOCKER_HOST=(\S+)", proc.stdout)
    assert m, proc.stdout
    return m.group(1), seconds, True


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--from-scratch", action="store_true", help="also drop the base image and the cached root filesystem")
    ap.add_argument("--cached-runs", type=int, default=3)
    args = ap.parse_args()
    host, start_s, started = start_engine()
    try:
        print(f"engine: {host} " + (f"started in {start_s:.1f} s" if started else "was already running"))
        docker = engine.client(host)
        version = image.dist_mod.resolve().version
        for tag in [image.default_tag(version)] + (["pulsarlab/debian:" + image.host_release() + "-minbase"]
                                                   if args.from_scratch else []):
            if docker.image.exists(tag):
                docker.image.remove(tag, force=True)
        if args.from_scratch:
            (image.docker_dir() / f"debian-{image.host_release()}-minbase.tar").unlink(missing_ok=True)
        cold = image.ensure_image(version, host=host, say=lambda s: print(f"  · {s}"))
        kind = "from scratch (debootstrap + import + build)" if args.from_scratch else "cold (base image cached)"
        print(f"image build {kind}: {cold.seconds:.1f} s -> {cold.tag} {cold.image_id[:19]}")
        cached = [image.ensure_image(version, host=host) for _ in range(args.cached_runs)]
        assert not any(c.built for c in cached) and {c.image_id for c in cached} == {cold.image_id}
        print(f"image build cached (same inputs, nothing built): {min(c.seconds for c in cached):.2f} s best of {len(cached)}")
    finally:
        if started:
            subprocess.run([str(SCRIPT), "stop"], capture_output=True, text=True, timeout=120)


if __name__ == "__main__":
    main()
