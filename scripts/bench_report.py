#!/usr/bin/env python3
"""Turns criterion's results into the performance table: out/bench-core.md and the
section of README.md between the bench:core markers (not with --quick: a quick run measures
too little to stand there). Standard library only."""

import json
import os
import platform
import re
import subprocess
import sys
from datetime import date
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
CRITERION = ROOT / "target" / "criterion"
SOLVERS = ["fabrik", "ccd", "jacobian_dls", "jacobian_transpose", "two_bone"]
# (solver, mode, bones, target in nanoseconds, what the issue asks)
TARGETS = [
    ("fabrik", "cold", 16, 1_000, "FABRIK, 16 bones, cold, to 1e-4 of the chain length"),
    ("jacobian_dls", "cold", 16, 20_000, "Jacobian DLS, 16 bones, cold"),
    ("two_bone", "cold", 2, 50, "two-bone, whole rig solve"),
    ("two_bone", "limb", 2, 50, "two-bone, closed-form limb kernel"),
    ("spring", "frame", 16, 5_000, "spring chain, 16 bones, one frame at 24 fps"),
    ("tension", "limb", 7, 200_000, "tension minimiser, three-bone limb, 7 degrees of freedom"),
    ("full_body", "fabrik", 50, 50_000, "FABRIK, 50-bone humanoid, five effectors, cold"),
    ("full_body", "jacobian_dls", 50, 50_000, "Jacobian DLS, 50-bone humanoid, five effectors, cold"),
    ("spring", "thousand_frames_ten_chains", 160, 100_000_000, "spring, 1000 frames of ten 16-bone chains"),
]
START, END = "<!-- bench:core:start -->", "<!-- bench:core:end -->"


def mean_ns(solver: str, mode: str, bones: int) -> float | None:
    path = CRITERION / solver / mode / str(bones) / "new" / "estimates.json"
    if not path.exists():
        return None
    return json.loads(path.read_text())["mean"]["point_estimate"]


def human(ns: float | None) -> str:
    if ns is None:
        return "-"
    if ns < 1_000:
        return f"{ns:.0f} ns"
    if ns < 1_000_000:
        return f"{ns / 1_000:.2f} us"
    return f"{ns / 1_000_000:.2f} ms"


def machine() -> str:
    cpu = platform.processor() or platform.machine()
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    rustc = subprocess.run(["rustc", "--version"], capture_output=True, text=True).stdout.strip()
    return f"{cpu}, {os.cpu_count()} cores, {rustc}, measured {date.today().isoformat()}"


def table() -> str:
    lengths = sorted(
        {int(p.name) for p in CRITERION.glob("*/*/*") if p.name.isdigit() and p.parent.parent.name in SOLVERS}
    )
    lines = [
        f"Mean time per solve ({machine()}). Cold: from the rest pose, 32 random reachable",
        "targets in turn. Warm: from the previous frame's solution while the target moves a",
        "little (as when baking). Tolerance 1e-4 of the chain length.",
        "",
        "| solver | start | " + " | ".join(f"{n} bones" for n in lengths) + " |",
        "|---|---|" + "---:|" * len(lengths),
    ]
    for solver in SOLVERS:
        for mode in ("cold", "warm", "limb"):
            cells = [mean_ns(solver, mode, n) for n in lengths]
            if any(c is not None for c in cells):
                lines.append(f"| {solver} | {mode} | " + " | ".join(human(c) for c in cells) + " |")
    lines += ["", "| target | measured | goal | measured / goal |", "|---|---:|---:|---:|"]
    for solver, mode, bones, goal, what in TARGETS:
        ns = mean_ns(solver, mode, bones)
        ratio = "-" if ns is None else f"{ns / goal:.2f}"
        lines.append(f"| {what} | {human(ns)} | {human(goal)} | {ratio} |")
    return "\n".join(lines) + "\n"


def main() -> None:
    text = table()
    out = ROOT / "out"
    out.mkdir(exist_ok=True)
    (out / "bench-core.md").write_text(text)
    readme = ROOT / "README.md"
    if "--quick" not in sys.argv and readme.exists() and START in readme.read_text():
        body = readme.read_text()
        body = re.sub(re.escape(START) + ".*?" + re.escape(END), START + "\n" + text + END, body, flags=re.S)
        readme.write_text(body)
    print(text)


if __name__ == "__main__":
    main()
