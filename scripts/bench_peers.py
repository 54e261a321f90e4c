"""Tendon side by side with what users would otherwise use, in one run on one machine:
Blender's own IK constraint (Standard and iTaSC) on the same armatures, ikpy on the same
serial chains, and Tendon's solvers natively and through the Python API.

Cases: chains of 2 to 64 bones with a gently bent rest pose, and the 50-bone humanoid
with limb effectors (hands and feet, chains of 3 and 2) and full-body effectors (hands,
feet and head, chains to the root). For each: time per solve (Blender: the depsgraph
update with the constraint minus the same update with it at zero influence) and the share
of random reachable targets reached within 1e-3 of the chain length.

    .venv-blender-5.0/bin/python scripts/bench_peers.py dist/tendon-*-linux_x64.zip [--quick]

Writes out/bench-peers.md and, unless --quick, README.md's bench:peers section. --quick
(2 and 8 bones, few targets, under a minute) is run by scripts/test so this cannot rot.
"""

from __future__ import annotations

import importlib
import json
import math
import os
import platform
import statistics
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
os.environ["BLENDER_USER_RESOURCES"] = tempfile.mkdtemp(prefix="tendon-peers-")

import bpy  # noqa: E402
import numpy as np  # noqa: E402

sys.path.insert(0, str(ROOT / "tests" / "blender"))
sys.path.insert(0, str(ROOT / "scripts"))
import rigs  # noqa: E402
from report import publish  # noqa: E402

MODULE = "bl_ext.user_default.tendon"
BEND = 0.1
#: Depsgraph updates timed per target (the IK's share of an update is small and noisy).
REPEATS = 5
TENDON_SOLVERS = ("fabrik", "jacobian_dls", "ccd", "tension")


@dataclass
class Measure:
    """Seconds per solve and the reached share for one solver on one case."""

    seconds: list[float] = field(default_factory=list)
    reached: int = 0
    tried: int = 0

    def median(self) -> float:
        return statistics.median(self.seconds) if self.seconds else math.nan

    def rate(self) -> float:
        return self.reached / self.tried if self.tried else math.nan


def install(zip_path: str) -> None:
    bpy.ops.extensions.package_install_files(
        filepath=str(Path(zip_path).resolve()), repo="user_default", enable_on_install=True
    )
    if MODULE not in bpy.context.preferences.addons:
        sys.exit(f"Blender did not enable {MODULE} from {zip_path}")


def timed_update() -> float:
    started = time.perf_counter()
    bpy.context.view_layer.update()
    return time.perf_counter() - started


def blender_ik(
    obj: bpy.types.Object, effectors: list[tuple[str, int]], targets: list[list[Any]], solver: str, scale: list[float]
) -> Measure:
    """Blender's IK constraints on `effectors` reaching each set of target points."""
    obj.pose.ik_solver = solver
    empties = [rigs.empty(f"ik.{bone}", (0.0, 0.0, 0.0)) for bone, _ in effectors]
    constraints = []
    for (bone, chain_length), empty in zip(effectors, empties, strict=True):
        constraint = obj.pose.bones[bone].constraints.new("IK")
        constraint.target, constraint.chain_count = empty, chain_length
        constraints.append(constraint)
    measure = Measure()
    baseline = []
    for points in targets:
        # Each update re-evaluates the armature (the targets are tagged by being set).
        for influence, into in ((0.0, baseline), (1.0, measure.seconds)):
            for constraint in constraints:
                constraint.influence = influence
            for _ in range(REPEATS):
                for empty, point in zip(empties, points, strict=True):
                    empty.location = point
                into.append(timed_update())
        errors = [
            ((obj.matrix_world @ obj.pose.bones[bone].tail) - empty.location).length / reach
            for (bone, _), empty, reach in zip(effectors, empties, scale, strict=True)
        ]
        measure.tried += 1
        measure.reached += all(e <= 1e-3 for e in errors)
    rest = statistics.median(baseline)
    measure.seconds = [s - rest for s in measure.seconds]
    for (bone, _), constraint, empty in zip(effectors, constraints, empties, strict=True):
        obj.pose.bones[bone].constraints.remove(constraint)
        bpy.data.objects.remove(empty)
    bpy.context.view_layer.update()
    return measure


def tendon_solvers(
    rig: Any, effectors: list[tuple[str, int]], targets: list[list[Any]], scale: list[float]
) -> dict[str, tuple[Measure, Measure]]:
    """Each Tendon solver on the same targets: (native timing, Python timing and reach)."""
    import tendon

    results = {}
    world_tail = rig_tails(rig)
    for name in TENDON_SOLVERS:
        solver = tendon.Solver(name)
        native, python = Measure(), Measure()
        for points in targets:
            goals = [
                tendon.Goal(bone, point, chain_length=chain_length)
                for (bone, chain_length), point in zip(effectors, points, strict=True)
            ]
            started = time.perf_counter()
            result = solver.solve(rig, goals)
            python.seconds.append(time.perf_counter() - started)
            native.seconds.append(solver._time_native(rig, goals, 3))
            tails = world_tail(result.rotations)
            errors = [
                np.linalg.norm(tails[rig.index(bone)] - np.asarray(point)) / reach
                for (bone, _), point, reach in zip(effectors, points, scale, strict=True)
            ]
            python.tried += 1
            python.reached += all(e <= 1e-3 for e in errors)
        results[name] = (native, python)
    return results


def rig_tails(rig: Any) -> Any:
    """A function from rotations to every bone's armature-space tail, (n, 3)."""
    description = json.loads(rig.to_json())["bones"]
    lengths = {bone["name"]: bone["length"] for bone in description}
    order = rig.names
    local_tails = np.array([[0.0, lengths[name], 0.0, 1.0] for name in order], np.float32)

    def tails(rotations: Any) -> Any:
        world = rig.forward_kinematics(rotations)
        return np.einsum("nij,nj->ni", world, local_tails)[:, :3]

    return tails


def ikpy_chain(count: int, length: float) -> Any:
    """The bent chain as ikpy sees it: three revolute joints per bone (X, Y, Z)."""
    from ikpy.chain import Chain
    from ikpy.link import OriginLink, URDFLink

    links: list[Any] = [OriginLink()]
    for i in range(count):
        for axis in range(3):
            first = axis == 0 and i > 0
            links.append(
                URDFLink(
                    name=f"b{i}.{'xyz'[axis]}",
                    origin_translation=[0.0, length if first else 0.0, 0.0],
                    origin_orientation=[BEND if first else 0.0, 0.0, 0.0],
                    rotation=[float(axis == k) for k in range(3)],
                )
            )
    links.append(
        URDFLink(
            name="tip", origin_translation=[0.0, length, 0.0], origin_orientation=[0.0, 0.0, 0.0], joint_type="fixed"
        )
    )
    mask = [False] + [True] * (3 * count) + [False]
    return Chain(links, active_links_mask=mask)


def ikpy_measure(count: int, targets: list[list[Any]], reach: float, limit: int) -> Measure:
    chain = ikpy_chain(count, 1.0)
    measure = Measure()
    for points in targets[:limit]:
        started = time.perf_counter()
        angles = chain.inverse_kinematics(np.asarray(points[0], float))
        measure.seconds.append(time.perf_counter() - started)
        tip = chain.forward_kinematics(angles)[:3, 3]
        measure.tried += 1
        measure.reached += np.linalg.norm(tip - np.asarray(points[0])) / reach <= 1e-3
    return measure


def chain_case(count: int, trials: int, ikpy_trials: int) -> dict[str, Any]:
    bpy.ops.wm.read_homefile(use_empty=True)
    obj = rigs.chain(count, name=f"Chain{count}", bend=BEND, roll=0.0)
    end = f"b{count - 1}"
    targets = [[tuple(rigs.random_pose_tail(obj, end, seed=s, spread=0.8))] for s in range(trials)]
    rig_cache = importlib.import_module(f"{MODULE}.rig")
    rig = rig_cache.read_rig(obj).rig
    # ikpy's chain must be the same chain: compare the rest tips.
    chain = ikpy_chain(count, 1.0)
    ikpy_rest = chain.forward_kinematics([0.0] * len(chain.links))[:3, 3]
    assert np.linalg.norm(ikpy_rest - np.array(rigs.tail_world(obj, end))) < 1e-4, "ikpy's chain differs"
    reach = float(count)
    effectors = [(end, count)]
    return {
        "case": f"chain, {count} bones",
        "standard": blender_ik(obj, effectors, targets, "LEGACY", [reach]),
        "itasc": blender_ik(obj, effectors, targets, "ITASC", [reach]),
        "tendon": tendon_solvers(rig, effectors, targets, [reach]),
        "ikpy": ikpy_measure(count, targets, reach, ikpy_trials),
    }


def humanoid_case(full_body: bool, trials: int) -> dict[str, Any]:
    bpy.ops.wm.read_homefile(use_empty=True)
    obj = rigs.humanoid()
    rig_cache = importlib.import_module(f"{MODULE}.rig")
    rig = rig_cache.read_rig(obj).rig
    effectors = (
        [("hand.L", 0), ("hand.R", 0), ("shin.L", 0), ("shin.R", 0), ("head", 0)]
        if full_body
        else [("hand.L", 3), ("hand.R", 3), ("shin.L", 2), ("shin.R", 2)]
    )
    rng = np.random.default_rng(7)
    tails = rig_tails(rig)
    targets = []
    parents = rig.parents
    chains = set()
    for bone, chain_length in effectors:
        # The bones each effector may move (chain length 0: up to the root).
        i, count = rig.index(bone), 0
        while i >= 0 and (chain_length == 0 or count < chain_length):
            chains.add(i)
            i, count = parents[i], count + 1
    for _ in range(trials):
        # A random pose of those chains: every target is reachable.
        rotations = rig.rest_rotations()
        for i in sorted(chains):
            axis = rng.normal(size=3)
            axis /= np.linalg.norm(axis)
            angle = 0.4 * rng.uniform(-1, 1)
            rotations[i] = [math.cos(angle / 2), *(math.sin(angle / 2) * axis)]
        points = tails(rotations)
        targets.append([tuple(points[rig.index(bone)]) for bone, _ in effectors])
    reach_of = {"hand": 0.63, "shin": 0.9, "head": 0.5}
    scale = [reach_of[bone.split(".")[0]] * (2.0 if full_body else 1.0) for bone, _ in effectors]
    return {
        "case": f"humanoid, {'full body (5 effectors, chains to the root)' if full_body else 'limbs (4 effectors)'}",
        "standard": blender_ik(obj, effectors, targets, "LEGACY", scale),
        "itasc": blender_ik(obj, effectors, targets, "ITASC", scale),
        "tendon": tendon_solvers(rig, effectors, targets, scale),
        "ikpy": None,
    }


def human(seconds: float) -> str:
    if math.isnan(seconds):
        return "-"
    if seconds < 1e-3:
        return f"{seconds * 1e6:.1f} us"
    if seconds < 1.0:
        return f"{seconds * 1e3:.2f} ms"
    return f"{seconds:.2f} s"


def table(cases: list[dict[str, Any]], quick: bool) -> str:
    lines = [
        f"Measured {time.strftime('%Y-%m-%d')} on {platform.machine()} ({os.cpu_count()} cores), Blender "
        f"{bpy.app.version_string} (bpy module), ikpy 4.2.1; medians"
        f"{' (quick mode)' if quick else ''}. Reached: within 1e-3 of the chain's length.",
        "",
        "| case | Blender Standard | iTaSC | ikpy | Tendon best (native / Python) "
        "| reached: Standard, iTaSC, ikpy, Tendon | Standard / Tendon | ikpy / Tendon |",
        "|---|---:|---:|---:|---:|---|---:|---:|",
    ]
    for case in cases:
        tendon = case["tendon"]
        # The fastest Tendon solver that reaches every target (else the best reaching one).
        best = min(tendon, key=lambda n: (-tendon[n][1].rate(), tendon[n][0].median()))
        native, python = tendon[best]
        ikpy = case["ikpy"]
        standard, itasc = case["standard"], case["itasc"]
        ikpy_time = ikpy.median() if ikpy else math.nan
        ikpy_rate = f"{ikpy.rate():.0%}" if ikpy else "-"
        lines.append(
            f"| {case['case']} | {human(standard.median())} | {human(itasc.median())} | {human(ikpy_time)} | "
            f"{human(native.median())} / {human(python.median())} ({best}) | {standard.rate():.0%}, "
            f"{itasc.rate():.0%}, {ikpy_rate}, {python.rate():.0%} | {standard.median() / native.median():.0f}x "
            f"| {ikpy_time / native.median():.0f}x |".replace("| nanx |", "| - |")
        )
    lines += [
        "",
        "Every Tendon solver on the same cases (native time, reached):",
        "",
        "| case | " + " | ".join(TENDON_SOLVERS) + " |",
        "|---|" + "---:|" * len(TENDON_SOLVERS),
    ]
    for case in cases:
        cells = [f"{human(case['tendon'][n][0].median())}, {case['tendon'][n][1].rate():.0%}" for n in TENDON_SOLVERS]
        lines.append(f"| {case['case']} | " + " | ".join(cells) + " |")
    lines += ["", *goals(cases)]
    return "\n".join(lines) + "\n"


def goals(cases: list[dict[str, Any]]) -> list[str]:
    """The issue's goals, checked on this run (reported, not asserted)."""
    chains = [c for c in cases if c["case"].startswith("chain")]
    best = {c["case"]: min(c["tendon"].values(), key=lambda m: (-m[1].rate(), m[0].median())) for c in cases}
    all_reached = all(best[c["case"]][1].rate() == 1.0 for c in chains)
    standard_rates = ", ".join(f"{c['standard'].rate():.0%} at {c['case'].split(', ')[1]}" for c in chains)
    mid = [c for c in chains if int(c["case"].split(", ")[1].split()[0]) in (4, 8, 16)]
    speedups = [c["standard"].median() / best[c["case"]][0].median() for c in mid]
    ikpy = [c["ikpy"].median() / best[c["case"]][0].median() for c in chains if c["ikpy"]]
    verdict = {True: "met", False: "missed"}
    lines = [
        "Goals on this run:",
        f"- every reachable target reached on every chain length: {verdict[all_reached]} "
        f"(Blender Standard: {standard_rates});",
    ]
    if speedups:
        lines.append(
            f"- at least 50 times faster per solve than Blender's Standard IK at 4 to 16 bones: "
            f"{verdict[min(speedups) >= 50]} ({', '.join(f'{x:.0f}x' for x in speedups)});"
        )
    if ikpy:
        lines.append(
            f"- at least 1000 times faster than ikpy: {verdict[min(ikpy) >= 1000]} "
            f"(from {min(ikpy):.0f}x to {max(ikpy):.0f}x);"
        )
    lines.append("- baking at least 20 times faster than `nla.bake`: see the bake table above.")
    return lines


def main() -> None:
    quick = "--quick" in sys.argv
    install(sys.argv[1])
    lengths = (2, 8) if quick else (2, 4, 8, 16, 32, 64)
    trials = 5 if quick else 40
    cases = []
    for count in lengths:
        # ikpy minimises with scipy over 3 angles a bone: long chains take seconds a solve.
        ikpy_trials = trials if count <= 16 else 3
        cases.append(chain_case(count, trials, ikpy_trials))
        print(f"chain of {count} measured", flush=True)
    for full_body in (False, True):
        cases.append(humanoid_case(full_body, 3 if quick else 20))
    text = table(cases, quick)
    publish(text, "bench-peers.md", "peers", update_readme=not quick)
    os._exit(0)  # skip bpy's interpreter teardown (see tests/blender/conftest.py)


if __name__ == "__main__":
    main()
