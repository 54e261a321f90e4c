"""Tension's reference pose in Blender: relaxing towards the pose before the solve (the
default), the rest pose, or a stored pose (a frame of an action), on Rigify's human
metarig, measured in the pose Blender evaluates."""

from __future__ import annotations

import math

import bpy
import numpy as np
import pytest
import real_rigs
import rigs
from mathutils import Matrix
from real_rigs import Effector

ARMS = (Effector("hand.L", 3), Effector("hand.R", 3))


def orientations(obj: bpy.types.Object, names: list[str]) -> list[Matrix]:
    """The bones' armature-space orientations in the evaluated pose."""
    evaluated = obj.evaluated_get(bpy.context.evaluated_depsgraph_get())
    return [evaluated.pose.bones[name].matrix.to_3x3().normalized() for name in names]


def mean_angle_degrees(a: list[Matrix], b: list[Matrix]) -> float:
    angles = [x.to_quaternion().rotation_difference(y.to_quaternion()).angle for x, y in zip(a, b, strict=True)]
    return math.degrees(float(np.mean([min(t, 2 * math.pi - t) for t in angles])))


def turn_chains(obj: bpy.types.Object, names: list[str], rng: np.random.Generator, degrees: float) -> None:
    for name in names:
        pose_bone = obj.pose.bones[name]
        pose_bone.matrix_basis = pose_bone.matrix_basis @ real_rigs.random_turn(rng, degrees)
    rigs.update()


def next_pose(obj: bpy.types.Object, names: list[str], seed: int) -> tuple[list, list[Matrix], dict]:
    """From the current pose: the targets and orientations of a pose a small step away
    (as the next frame of an animation is), with the current pose restored. Returns the
    target points, the step's orientations and the saved current channels."""
    saved = {name: real_rigs.channels(obj.pose.bones[name]) for name in names}
    turn_chains(obj, names, np.random.default_rng(seed), 10.0)
    points = [real_rigs.evaluated_point(obj, e.bone, e.use_tail).copy() for e in ARMS]
    goal = orientations(obj, names)
    restore(obj, saved)
    return points, goal, saved


def restore(obj: bpy.types.Object, saved: dict) -> None:
    for name, values in saved.items():
        real_rigs.restore_channels(obj.pose.bones[name], values)
    rigs.update()


@pytest.fixture
def metarig() -> real_rigs.RealRig:
    rig = real_rigs.metarig("human", ARMS)
    rig.obj.tendon.solver = "TENSION"
    return rig


def test_relaxing_towards_the_current_pose_moves_least(metarig: real_rigs.RealRig) -> None:
    obj = metarig.obj
    names = real_rigs.chain_bones(obj, ARMS)
    errors: dict[str, list[float]] = {"START": [], "REST": []}
    for seed in range(4):
        # The pose before the solve: the arms somewhere away from rest.
        turn_chains(obj, names, np.random.default_rng(100 + seed), 35.0)
        points, goal, saved = next_pose(obj, names, seed)
        real_rigs.set_effectors(obj, ARMS, points)
        for reference in errors:
            restore(obj, saved)
            obj.tendon.tension_reference = reference
            outcome = real_rigs.solve()
            assert outcome.finished, outcome.message
            assert real_rigs.claims_reached(outcome.status), outcome.status
            for effector, point in zip(ARMS, points, strict=True):
                reached = (real_rigs.evaluated_point(obj, effector.bone, True) - point).length
                assert reached <= real_rigs.TOLERANCE * metarig.height, (reference, effector.bone, reached)
            errors[reference].append(mean_angle_degrees(orientations(obj, names), goal))
        restore(obj, saved)
    start, rest = float(np.mean(errors["START"])), float(np.mean(errors["REST"]))
    print(f"mean bone angle from the next pose: relax towards the current pose {start:.2f} deg, rest {rest:.2f} deg")
    assert start < 0.6 * rest, (start, rest)


def test_relaxing_towards_a_stored_pose(metarig: real_rigs.RealRig) -> None:
    obj = metarig.obj
    names = real_rigs.chain_bones(obj, ARMS)
    turn_chains(obj, names, np.random.default_rng(7), 35.0)
    points, goal, _ = next_pose(obj, names, 8)
    # Store the target pose as frame 10 of an action (as a pose asset would hold it),
    # leave the armature unanimated, and start the solve from rest.
    turn_chains(obj, names, np.random.default_rng(8), 10.0)
    for name in names:
        obj.pose.bones[name].keyframe_insert("rotation_quaternion", frame=10)
    stored = obj.animation_data.action
    stored.use_fake_user = True
    obj.animation_data.action = None
    rigs.rest_all_channels(obj, "QUATERNION")
    rigs.update()
    real_rigs.set_effectors(obj, ARMS, points)
    settings = obj.tendon
    settings.tension_reference = "ACTION"
    settings.reference_action = stored
    settings.reference_frame = 10.0
    outcome = real_rigs.solve()
    assert outcome.finished, outcome.message
    assert real_rigs.claims_reached(outcome.status), outcome.status
    angle = mean_angle_degrees(orientations(obj, names), goal)
    print(f"mean bone angle from the stored pose: {angle:.3f} deg")
    assert angle < 0.5, angle


def test_stored_pose_refusals_name_what_is_missing(metarig: real_rigs.RealRig) -> None:
    obj = metarig.obj
    real_rigs.set_effectors(obj, ARMS, [real_rigs.evaluated_point(obj, e.bone, True) for e in ARMS])
    obj.tendon.tension_reference = "ACTION"
    before = real_rigs.basis_matrices(obj)
    outcome = real_rigs.solve()
    assert not outcome.finished and "needs a reference action" in outcome.message, outcome.message
    obj.tendon.reference_action = bpy.data.actions.new("Empty")
    outcome = real_rigs.solve()
    assert not outcome.finished and "'Empty' keys no rotation" in outcome.message, outcome.message
    assert np.array_equal(real_rigs.basis_matrices(obj), before)
    # Keys in another rotation mode than the bone's: Blender plays none of them; named.
    bone = obj.pose.bones["upper_arm.L"]
    mode = bone.rotation_mode
    bone.rotation_mode = "XYZ"
    bone.keyframe_insert("rotation_euler", frame=1)
    euler = obj.animation_data.action
    bone.rotation_mode = mode
    obj.animation_data.action = None
    obj.tendon.reference_action = euler
    outcome = real_rigs.solve()
    assert not outcome.finished, outcome.message
    assert f"keys bone 'upper_arm.L' in rotation_euler, but the bone is in {mode} mode" in outcome.message
    assert np.array_equal(real_rigs.basis_matrices(obj), before)
    # A frame that is not a number (the curves evaluated there gave some pose silently).
    obj.tendon.reference_frame = math.nan
    outcome = real_rigs.solve()
    assert not outcome.finished and "its reference frame is nan" in outcome.message, outcome.message
    assert np.array_equal(real_rigs.basis_matrices(obj), before)
