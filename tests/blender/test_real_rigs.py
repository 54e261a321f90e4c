"""Tendon on rigs nobody on the team wrote (issue 13): Rigify's metarigs, the rig Rigify
generates from the human metarig, and CMU motion capture imported from BVH; then the bone
set-ups such rigs have and the project's own fixtures lack.

Every check reads the pose Blender evaluates (what the viewport shows) in world space:
effectors within TOLERANCE x the character's height of their targets, the status line
truthful, bones outside the chains unmoved, rotation modes and inactive channels kept, and
undo exact. Targets are jointly reachable by construction (forward kinematics), so a miss
is the solver's or the add-on's, never the target's.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from pathlib import Path

import bpy
import numpy as np
import pytest
import real_rigs
import rigs
from mathutils import Euler
from real_rigs import Effector, RealRig

#: Seeds per rig and solver. The whole file takes about 20 s on Blender 5.0 here.
SEEDS = range(20)

#: Solvers that must reach every jointly reachable target (100% of trials): every iterative
#: one. CCD and the Jacobian transpose were held to 90% (they converge linearly and stalled
#: on coupled chains: arms hanging from a turning spine; measured on Blender 5.0, 20 seeds,
#: CCD 90-100% and the transpose 95-100% per rig) until 2026-11-26, when the transpose's
#: steps were made conjugate and a CCD sweep that stalls unreached was finished by damped
#: least squares: 100% on every rig below. Before commit ff8d5ca (caps 200 and 1000,
#: chains not carried by the spine): CCD 15-95%, the transpose 55-100%, FABRIK 30% on the
#: human metarigs with misses up to 9 cm.
SOLVERS = ("FABRIK", "JACOBIAN_DLS", "TENSION", "JACOBIAN_TRANSPOSE", "CCD")

METARIGS = tuple(real_rigs.METARIG_EFFECTORS)
MOCAP = tuple(real_rigs.MOCAP_RIGS)
RIGS = (
    *(f"metarig:{kind}" for kind in METARIGS),
    "generated:human",
    *(f"mocap:{name}" for name in MOCAP),
    # The armature object scaled by 100, its bones 100 times smaller, as glTF imports come.
    "mocap:cmu_102_01_max@x100",
)


def build(rig: str, generated_blend: Callable[[], Path]) -> RealRig:
    family, name = rig.split(":")
    if family == "metarig":
        return real_rigs.metarig(name)
    if family == "generated":
        return real_rigs.generated_rig(generated_blend())
    name, _, scale = name.partition("@x")
    return real_rigs.mocap_rig(name, float(scale or 1.0))


@pytest.fixture
def lazy_generated(request: pytest.FixtureRequest) -> Callable[[], Path]:
    """The generated rig's file, generated only when a test asks for it."""
    return lambda: request.getfixturevalue("generated_blend")


@pytest.mark.parametrize("solver", SOLVERS)
@pytest.mark.parametrize("rig_name", RIGS)
def test_jointly_reachable_targets_are_reached(rig_name: str, solver: str, lazy_generated: Callable[[], Path]) -> None:
    rig = build(rig_name, lazy_generated)
    start = {b.name: real_rigs.channels(b) for b in rig.obj.pose.bones}
    trials = []
    for seed in SEEDS:
        obj = rig.obj
        for pose_bone in obj.pose.bones:
            real_rigs.restore_channels(pose_bone, start[pose_bone.name])
        trials.append(real_rigs.run_trial(rig, solver, seed, check_undo=seed == 0))
    report = real_rigs.trial_report(rig, solver, trials)
    print(report)
    problems = [p for t in trials for p in t.problems]
    assert not problems, report
    rate = sum(t.reached for t in trials) / len(trials)
    assert rate == 1.0, f"reached in {rate:.0%} of trials\n{report}"


@pytest.mark.parametrize("solver", SOLVERS)
def test_status_is_truthful_when_targets_conflict(solver: str) -> None:
    """Each target made on its own chain: the spine chain carries the arms' roots, so the
    five need not be reachable together. Missing is allowed then; claiming reach is not."""
    rig = real_rigs.metarig("human")
    obj = rig.obj
    lines, problems = [], []
    for seed in range(8):
        points = real_rigs.fk_targets(obj, rig.effectors, seed, jointly=False)
        real_rigs.set_effectors(obj, rig.effectors, points)
        obj.tendon.solver = solver
        bpy.ops.tendon.reset_pose()
        result = real_rigs.solve()
        worst = max(
            (real_rigs.evaluated_point(obj, e.bone, e.use_tail) - p).length
            for e, p in zip(rig.effectors, points, strict=True)
        )
        lines.append(f"seed {seed}: worst {worst / rig.height:.2e} x height; status {result.status[:120]!r}")
        if result.finished:
            problems += real_rigs.status_problems(result.status, worst, rig.height, real_rigs.world_scale(obj))
    assert not problems, "\n".join(problems + lines)


# --- Set-ups (issue 13, point 3): solved correctly or refused naming the bone and why ------


def small_chain(name: str = "Setup", **rows: object) -> bpy.types.Object:
    obj = rigs.armature(name, real_rigs.chain_rows(3, **rows))  # type: ignore[arg-type]
    return obj


TIP = (Effector("b2", 3),)


def test_disconnected_bones() -> None:
    # Heads 8-12 cm from the parents' tails, as in BVH imports and Rigify's spine.004.
    obj = small_chain(offset=(0.08, -0.05, 0.06))
    assert not obj.data.bones["b1"].use_connect
    real_rigs.setup_trials(obj, TIP, ("b1", "b2"), ("disconnect", "offset"))


def test_rolled_bones() -> None:
    obj = small_chain(rolls=(1.2, -2.1, 2.8))
    real_rigs.setup_trials(obj, TIP, ("b0", "b1", "b2"), ("roll",))


@pytest.mark.parametrize("solver", SOLVERS)
def test_non_uniformly_scaled_and_rotated_metarig(solver: str) -> None:
    rig = real_rigs.metarig("human")
    obj = rig.obj
    obj.scale = (1.0, 2.0, 0.5)
    obj.rotation_euler = (0.3, -0.5, 1.1)
    obj.location = (0.4, -1.0, 0.2)
    rigs.update()
    real_rigs.setup_trials(obj, rig.effectors, (), (), solver=solver)


def test_non_uniform_pose_scale_above_the_chain() -> None:
    obj = small_chain()
    # The root is outside the chain; its non-uniform scale shears the chain below it.
    obj.pose.bones["root"].scale = (1.3, 0.7, 1.1)
    real_rigs.setup_trials(obj, TIP, ("root", "b0"), ("scale", "shear"))


def test_b_bone_segments() -> None:
    obj = small_chain()
    for name in ("b0", "b1", "b2"):
        obj.data.bones[name].bbone_segments = 8
        pose_bone = obj.pose.bones[name]
        pose_bone.bbone_curveinx, pose_bone.bbone_curveoutz = 0.2, -0.15
        pose_bone.bbone_rollout = 0.5
        pose_bone.bbone_easeout = 0.7
    real_rigs.setup_trials(obj, TIP, ("b0", "b1", "b2"), ("b-bone", "bbone", "segment"))


def test_inherit_rotation_off() -> None:
    obj = small_chain()
    obj.data.bones["b1"].use_inherit_rotation = False
    real_rigs.setup_trials(obj, TIP, ("b1",), ("inherit",))


INHERIT_SCALE_MODES = ("FULL", "FIX_SHEAR", "AVERAGE", "NONE", "NONE_LEGACY", "ALIGNED")


@pytest.mark.parametrize("mode", INHERIT_SCALE_MODES)
def test_inherit_scale_modes_under_a_scaled_parent(mode: str) -> None:
    obj = small_chain()
    # The chain's first bone keeps a non-uniform scale (solvers turn it, never rescale it);
    # the bones below inherit it in `mode`.
    obj.pose.bones["b0"].scale = (1.4, 0.8, 1.2)
    for name in ("b1", "b2"):
        obj.data.bones[name].inherit_scale = mode
    real_rigs.setup_trials(obj, TIP, ("b1", "b2", "b0"), ("inherit", "scale"))


def test_copy_rotation_constraint_on_a_chain_bone() -> None:
    obj = small_chain()
    driver = rigs.empty("rotation.source", (2.0, 0.0, 0.0))
    driver.rotation_euler = (0.4, -0.3, 0.6)
    constraint = obj.pose.bones["b1"].constraints.new("COPY_ROTATION")
    constraint.target, constraint.influence = driver, 1.0
    rigs.activate(obj)
    # b1's rotation is Blender's, whatever its channels say: the chain must reach with b0
    # and b2 (the targets were made that way), or refuse naming b1.
    real_rigs.setup_trials(obj, TIP, ("b1",), ("constraint", "copy rotation"))


def test_driven_rotation_on_a_chain_bone() -> None:
    obj = small_chain()
    obj["bend"] = 0.5
    pose_bone = obj.pose.bones["b1"]
    pose_bone.rotation_mode = "XYZ"
    fcurve = pose_bone.driver_add("rotation_euler", 0)
    fcurve.driver.type = "SUM"
    variable = fcurve.driver.variables.new()
    variable.type = "SINGLE_PROP"
    variable.targets[0].id = obj
    variable.targets[0].data_path = '["bend"]'
    rigs.update()
    assert abs(pose_bone.rotation_euler.x - 0.5) < 1e-6, "the driver runs"
    real_rigs.setup_trials(obj, TIP, ("b1",), ("driver", "driven"))


def test_ancestor_moved_by_a_constraint() -> None:
    obj = small_chain()
    mover = rigs.empty("root.mover", (0.0, 0.0, 0.0))
    mover.rotation_euler = Euler((0.5, 0.2, -0.7))
    constraint = obj.pose.bones["root"].constraints.new("COPY_ROTATION")
    constraint.target = mover
    rigs.activate(obj)
    rigs.update()
    # The root (outside the chain) is where the constraint puts it, not where its channels
    # say: the solve must start from there. Nothing to refuse here.
    outcomes = real_rigs.setup_trials(obj, TIP, (), ())
    assert outcomes == ["solved"] * 3


def test_generated_rig_chain_through_a_copy_scale_mch_bone(generated_blend: Path) -> None:
    rig = real_rigs.generated_rig(generated_blend)
    # hand_fk.L <- MCH-hand_fk.L (Copy Scale only: its rotation is free) <- forearm_fk.L <-
    # upper_arm_fk.L.
    effectors = (Effector("hand_fk.L", 4),)
    assert real_rigs.chain_bones(rig.obj, effectors)[1] == "MCH-hand_fk.L"
    real_rigs.setup_trials(rig.obj, effectors, ("MCH-hand_fk.L",), ("constraint", "mch", "copy scale"))


def test_generated_rig_deform_bones_are_driven_by_constraints(generated_blend: Path) -> None:
    rig = real_rigs.generated_rig(generated_blend)
    # DEF bones copy the ORG bones' transforms, which follow the FK controls: the DEF
    # bones' own channels do nothing. Targets come from turning the FK arm; solving the
    # DEF chain must then be refused with a DEF bone named, or (if Tendon learns to move
    # what drives them) reached.
    effectors = (Effector("DEF-forearm.L.001", 2),)
    arm = (Effector("forearm_fk.L", 2),)
    culprits = ("DEF-forearm.L.001", "DEF-forearm.L")
    real_rigs.setup_trials(rig.obj, effectors, culprits, ("constraint", "copy transforms"), turned=arm)


def test_generated_rig_chain_through_a_copy_transforms_mch_bone(generated_blend: Path) -> None:
    rig = real_rigs.generated_rig(generated_blend)
    # spine_fk.003 <- MCH-spine.003 (Copy Transforms) <- spine_fk.002: the middle bone's pose
    # is Blender's.
    effectors = (Effector("spine_fk.003", 3),)
    assert real_rigs.chain_bones(rig.obj, effectors)[1] == "MCH-spine.003"
    real_rigs.setup_trials(rig.obj, effectors, ("MCH-spine.003",), ("constraint", "copy transforms"))


# --- Imports on the generated rig (issue 13, point 4, smoke) ------------------------------


@pytest.mark.parametrize("operator", ["import_blender_ik", "import_limits"])
def test_imports_on_the_generated_rig(operator: str, generated_blend: Path) -> None:
    rig = real_rigs.generated_rig(generated_blend)
    obj = rig.obj
    before = real_rigs.basis_matrices(obj)
    muted = [(b.name, c.name, c.mute) for b in obj.pose.bones for c in b.constraints]
    bpy.ops.ed.undo_push(message="start")
    if operator == "import_blender_ik":
        # Rigify's IK/FK switches mute and unmute its 4 IK constraints by drivers: a mute
        # Tendon wrote did not stick, the import said it had muted them, and every solve
        # refused the effectors (QA helper). None is imported, each said by name.
        with pytest.raises(RuntimeError, match="no enabled IK constraint Tendon can import") as refused:
            bpy.ops.tendon.import_blender_ik()
        for bone in ("MCH-forearm_ik.L", "MCH-forearm_ik.R", "MCH-shin_ik.L", "MCH-shin_ik.R"):
            assert f"on bone '{bone}' has its mute set by a driver" in str(refused.value), str(refused.value)
        assert len(obj.tendon.effectors) == 0
        assert [(b.name, c.name, c.mute) for b in obj.pose.bones for c in b.constraints] == muted
        return
    try:
        outcome = getattr(bpy.ops.tendon, operator)()
        message = obj.tendon.status
    except RuntimeError as error:
        outcome, message = {"CANCELLED"}, str(error)
    # The README promises Import Limits works here: 10 Limit Rotation bones.
    assert outcome == {"FINISHED"}, f"{operator}: {message}"
    limited = [
        b.name
        for b in obj.pose.bones
        if any(getattr(b.tendon, f"{k}_{a}") for k in ("use_limit", "lock") for a in "xyz")
    ]
    assert len(limited) == 10, limited
    bpy.ops.ed.undo_push(message=operator)
    rigs.update()
    matrices = rigs.world_matrices(rig.obj)
    assert np.isfinite(matrices).all()
    bpy.ops.ed.undo()
    obj = rig.obj
    assert np.array_equal(real_rigs.basis_matrices(obj), before)
    assert [(b.name, c.name, c.mute) for b in obj.pose.bones for c in b.constraints] == muted
    assert len(obj.tendon.effectors) == 0


def test_metarigs_have_the_chosen_bones() -> None:
    """The effector tables match what Blender ships (names move between versions)."""
    for kind, effectors in real_rigs.METARIG_EFFECTORS.items():
        bpy.ops.wm.read_homefile(use_empty=True)
        rig = real_rigs.metarig(kind)
        for effector in effectors:
            assert effector.bone in rig.obj.pose.bones, f"{kind}: no bone {effector.bone}"
        bones = [real_rigs.chain_bones(rig.obj, (e,)) for e in effectors]
        assert all(len(chain) == e.chain_length for chain, e in zip(bones, effectors, strict=True))
        flat = [name for chain in bones for name in chain]
        assert len(flat) == len(set(flat)), f"{kind}: chains share bones"
        assert math.isfinite(rig.height) and rig.height > 0.1
