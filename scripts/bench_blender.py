"""Tendon inside Blender 5.0 (headless, the add-on zip installed into a temporary user
folder): a solve and a live-mode update of the 50-bone humanoid with five effectors.

Run by scripts/bench (after scripts/build-addon) with Blender's Python module:
    .venv-blender-5.0/bin/python scripts/bench_blender.py dist/tendon-*-linux_x64.zip [--quick]
Writes out/bench-blender.md and README.md's section between the bench:blender markers.
"""

from __future__ import annotations

import importlib
import os
import platform
import re
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
os.environ["BLENDER_USER_RESOURCES"] = tempfile.mkdtemp(prefix="tendon-bench-")

import bpy  # noqa: E402

sys.path.insert(0, str(ROOT / "tests" / "blender"))
import rigs  # noqa: E402

START, END = "<!-- bench:blender:start -->", "<!-- bench:blender:end -->"
MODULE = "bl_ext.user_default.tendon"
#: The issue's goal for one live update of this rig.
LIVE_GOAL_SECONDS = 2e-3


def install(zip_path: str) -> None:
    bpy.ops.extensions.package_install_files(
        filepath=str(Path(zip_path).resolve()), repo="user_default", enable_on_install=True
    )
    if MODULE not in bpy.context.preferences.addons:
        sys.exit(f"Blender did not enable {MODULE} from {zip_path}")


def main() -> None:
    zip_path = sys.argv[1]
    quick = "--quick" in sys.argv
    samples = 40 if quick else 300
    install(zip_path)
    bridge = importlib.import_module(f"{MODULE}.bridge")
    bpy.ops.wm.read_homefile(use_empty=True)
    obj = rigs.humanoid()
    targets = rigs.humanoid_targets(obj, seed=3)
    rows = []
    for solver in ("FABRIK", "JACOBIAN_DLS"):
        obj.tendon.solver = solver
        operator, updates, handler = [], [], []
        for _ in range(samples):
            bpy.ops.tendon.reset_pose()
            started = time.perf_counter()
            bpy.ops.tendon.solve()
            operator.append(time.perf_counter() - started)
        obj.tendon.live = True
        key = obj.as_pointer()
        for step in range(samples):
            # A small drag of the left hand's target, as an animator's mouse gives.
            targets[0].location.x += 0.002 if step % 40 < 20 else -0.002
            started = time.perf_counter()
            bpy.context.view_layer.update()
            updates.append(time.perf_counter() - started)
            handler.append(bridge.live_timings[key])
        obj.tendon.live = False
        rows.append((solver, statistics.median(operator), statistics.median(handler), statistics.median(updates)))
    lines = [
        f"Blender {bpy.app.version_string} as a Python module, {platform.machine()} "
        f"({os.cpu_count()} cores); the 50-bone humanoid with five effectors (hands and "
        f"shins, chain 3 and 2; head, chain 2); medians of {samples}.",
        "",
        "| Solver | `tendon.solve` operator | live update: Tendon's handler | live update: whole "
        "depsgraph update | goal (handler) | met |",
        "|---|---:|---:|---:|---:|:---:|",
    ]
    for solver, operator, handler, update in rows:
        lines.append(
            f"| {solver} | {operator * 1e3:.3f} ms | {handler * 1e3:.3f} ms | {update * 1e3:.3f} ms | "
            f"{LIVE_GOAL_SECONDS * 1e3:.0f} ms | {'yes' if handler <= LIVE_GOAL_SECONDS else 'no'} |"
        )
    text = "\n".join(lines) + "\n"
    out = ROOT / "out"
    out.mkdir(exist_ok=True)
    (out / "bench-blender.md").write_text(text)
    readme = ROOT / "README.md"
    body = readme.read_text()
    if START in body and not quick:
        body = re.sub(re.escape(START) + ".*?" + re.escape(END), START + "\n" + text + END, body, flags=re.S)
        readme.write_text(body)
    print(text, flush=True)
    os._exit(0)  # skip bpy's interpreter teardown (see tests/blender/conftest.py)


if __name__ == "__main__":
    main()
