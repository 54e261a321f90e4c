#!/usr/bin/env python3
"""Measures what the Python layer adds to a solve, against the native time measured inside
the core in the same run, and writes out/bench-python.md and README.md's section between
the bench:python markers. Run by scripts/bench (after building and installing the wheel);
`--quick` takes fewer samples.

Targets (issue 3): one solve call adds under 5 microseconds to the native solve; a batch of
1000 frames of a 50-bone rig with five effectors takes within 10% of the native time.
"""

import json
import statistics
import sys
import time
from pathlib import Path

import numpy as np
from report import publish

import tendon

ROOT = Path(__file__).resolve().parent.parent


def median_seconds(call: object, repeats: int, samples: int) -> float:
    """Median over `samples` of the mean time of `repeats` calls."""
    times = []
    for _ in range(samples):
        start = time.perf_counter()
        for _ in range(repeats):
            call()  # type: ignore[operator]
        times.append((time.perf_counter() - start) / repeats)
    return statistics.median(times)


def five_effectors(rig: tendon.Rig, frames: int) -> tuple[list[tendon.Goal], np.ndarray]:
    """Wrists, ankles and head following small circles around their rest positions."""
    names = ["forearm.L", "forearm.R", "shin.L", "shin.R", "head"]
    chains = [3, 3, 2, 2, 3]
    world = rig.forward_kinematics(rig.rest_rotations())
    lengths = {b["name"]: b["length"] for b in json.loads(rig.to_json())["bones"]}
    rest = np.array([world[rig.index(n)] @ [0.0, lengths[n], 0.0, 1.0] for n in names], dtype=np.float32)[:, :3]
    t = np.linspace(0.0, 2.0 * np.pi, frames, dtype=np.float32)[:, None, None]
    circle = np.concatenate([np.cos(t), np.zeros_like(t), np.sin(t)], axis=2) * 0.04
    targets = (rest[None, :, :] + circle - [0.0, 0.04, 0.0]).astype(np.float32)
    goals = [tendon.Goal(n, rest[k], chain_length=chains[k]) for k, n in enumerate(names)]
    return goals, targets


def main() -> None:
    quick = "--quick" in sys.argv
    samples = 3 if quick else 9
    rig = tendon.Rig.from_json((ROOT / "tests" / "fixtures" / "humanoid.json").read_text())
    goals, targets = five_effectors(rig, 1000)
    rows = []

    # One call: the same single-goal two-bone solve, through Python and natively.
    solver = tendon.Solver("two_bone")
    one = [tendon.Goal("forearm.L", targets[10, 0], chain_length=2)]
    python = median_seconds(lambda: solver.solve(rig, one), 2000, samples)
    native = statistics.median(solver._time_native(rig, one, 2000) for _ in range(samples))
    overhead = python - native
    rows.append(("one solve call, Python overhead", overhead, 5e-6, f"{python * 1e6:.2f} us - {native * 1e6:.2f} us"))

    # A frame range: 1000 frames, 50 bones, five effectors, warm-started.
    for name in ("fabrik", "jacobian_dls"):
        batch = tendon.Solver(name)
        python = median_seconds(lambda b=batch: b.solve_frames(rig, goals, targets), 1, samples)
        native = statistics.median(batch._time_native_frames(rig, goals, targets, 1) for _ in range(samples))
        rows.append(
            (
                f"1000 frames, {name}: Python / native",
                python / native,
                1.10,
                f"{python * 1e3:.1f} ms / {native * 1e3:.1f} ms",
            )
        )

    lines = [
        f"Python layer (CPython {sys.version.split()[0]}, numpy {np.__version__}, tendon {tendon.__version__};"
        f" medians of {samples} samples, native times measured inside the core in the same run):",
        "",
        "| measure | value | goal | met |",
        "|---|---:|---:|:---:|",
    ]
    for what, value, goal, detail in rows:
        shown = f"{value * 1e6:.2f} us" if goal < 1 else f"{value:.3f}"
        goal_shown = f"{goal * 1e6:.0f} us" if goal < 1 else f"{goal:.2f}"
        lines.append(f"| {what} ({detail}) | {shown} | {goal_shown} | {'yes' if value <= goal else 'no'} |")
    text = "\n".join(lines) + "\n"
    publish(text, "bench-python.md", "python", update_readme=not quick)


if __name__ == "__main__":
    main()
