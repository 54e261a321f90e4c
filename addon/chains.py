"""The bones a solve moves, whether Blender lets their channels pose them, and what the
solve achieved in the pose Blender evaluates.

Tendon's rig model is Blender's default: each bone's matrix is its parent's, times its
rest offset, times its own channels. Real rigs break that for some bones (constraints,
drivers, inheritance options). Bones outside the chains may do anything: the solve starts
from where Blender really puts them (`evaluated_pose`). A bone the solve turns must be posed
by its own channels, or it is refused here with its name and the reason; never a silent miss.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import bpy
import numpy as np

#: Constraint types that never change a bone's rotation or location: a chain bone may carry
#: them (Rigify's MCH bones copy scale).
SCALE_ONLY_CONSTRAINTS = frozenset({"COPY_SCALE", "LIMIT_SCALE", "MAINTAIN_VOLUME"})
#: Constraints that only clamp rotation: harmless within the same limits (see `miss_notes`).
CLAMPING_CONSTRAINTS = frozenset({"LIMIT_ROTATION"})
#: Inheritance of scale that equals Blender's default (Full) under a uniformly scaled parent.
UNIFORM_SCALE_MODES = frozenset({"FULL", "FIX_SHEAR", "ALIGNED", "AVERAGE"})
#: A chain bone whose evaluated rotation differs from its channels' by more than this
#: (quaternion components) is moved by something Tendon does not model.
CHANNEL_MISMATCH = 1e-4
#: Relative spread below which a scale counts as uniform, or as one.
SCALE_TOLERANCE = 1e-5
#: A pose scale this small on an axis flattens the bone and every bone under it: their
#: rotations can no longer be read from (or written into) their frames.
COLLAPSED_SCALE = 1e-6


def chain_bones(parents: list[int], bone: int, chain_length: int) -> list[int]:
    """The effector bone and the ancestors its chain may turn (chain length 0: to the root)."""
    chain = []
    while bone >= 0 and (chain_length == 0 or len(chain) < chain_length):
        chain.append(bone)
        bone = parents[bone]
    return chain


def moving_bones(parents: list[int], effectors: list[tuple[int, int, bool]]) -> list[int]:
    """The bones the solve may turn, from (bone, chain length, bone turns) per effector: a
    head effector without a rotation target moves its chain above the bone only."""
    moving: set[int] = set()
    for bone, chain_length, turns in effectors:
        chain = chain_bones(parents, bone, chain_length)
        moving.update(chain if turns else chain[1:])
    return sorted(moving)


def driven_bones(obj: bpy.types.Object) -> dict[str, str]:
    """Pose bones whose rotation or location a driver sets: name -> the driven channel."""
    anim = obj.animation_data
    driven: dict[str, str] = {}
    if anim is None:
        return driven
    for fcurve in anim.drivers:
        path = fcurve.data_path
        if not path.startswith('pose.bones["') or fcurve.mute:
            continue
        name, _, channel = path[len('pose.bones["') :].partition('"]')
        channel = channel.lstrip(".")
        if channel.startswith(("rotation", "location")):
            driven.setdefault(name.replace('\\"', '"'), channel)
    return driven


def bone_problem(pose_bone: bpy.types.PoseBone, driven: dict[str, str]) -> str | None:
    """Why Blender would not pose `pose_bone` from its own channels, or None."""
    name = pose_bone.name
    for constraint in pose_bone.constraints:
        harmless = SCALE_ONLY_CONSTRAINTS | CLAMPING_CONSTRAINTS
        if constraint.mute or constraint.influence <= 0.0 or constraint.type in harmless:
            continue
        if constraint.type == "IK":
            return (
                f"bone '{name}' is posed by its IK constraint '{constraint.name}': mute it "
                "(Import Blender IK does) or shorten the chain"
            )
        return (
            f"bone '{name}' is posed by its {constraint.type.replace('_', ' ').title()} constraint "
            f"'{constraint.name}': shorten the chain, or mute the constraint"
        )
    if name in driven:
        return f"bone '{name}' has a driver on its {driven[name]}: shorten the chain, or remove the driver"
    bone = pose_bone.bone
    if not bone.use_inherit_rotation:
        return f"bone '{name}' does not inherit its parent's rotation (Inherit Rotation is off)"
    parent = pose_bone.parent
    if parent is not None and bone.inherit_scale != "FULL":
        scale = np.array(parent.matrix.to_scale(), np.float64)
        unit = bool(np.all(np.abs(scale - 1.0) <= SCALE_TOLERANCE))
        uniform = float(np.ptp(scale)) <= SCALE_TOLERANCE * float(np.abs(scale).max())
        if not (unit or (uniform and bone.inherit_scale in UNIFORM_SCALE_MODES)):
            return (
                f"bone '{name}' inherits scale as '{bone.inherit_scale}' under a scaled parent "
                f"('{parent.name}'), which Tendon does not model"
            )
    return None


def miss_notes(obj: bpy.types.Object, names: list[str]) -> list[str]:
    """What may keep the moving bones `names` from their targets although Blender poses
    them from their channels: a frame whose non-uniform scale shears every turn (solvers
    often still converge), or a Limit Rotation constraint that clamps the solved rotation
    (harmless when Tendon's joint limits match it: Import Limits sets them)."""
    notes = []
    pose_bones = obj.pose.bones
    for name in names:
        pose_bone = pose_bones[name]
        parent = pose_bone.parent
        if parent is not None and not conformal(np.array(parent.matrix.to_3x3(), np.float64)):
            scale = ", ".join(f"{value:.3g}" for value in parent.matrix.to_scale())
            notes.append(
                f"bone '{name}' turns in the non-uniformly scaled frame of '{parent.name}' (scale {scale}), "
                "where a turn also shears: make that scale uniform, or shorten the chain"
            )
        for constraint in pose_bone.constraints:
            if constraint.type == "LIMIT_ROTATION" and not constraint.mute and constraint.influence > 0.0:
                notes.append(
                    f"bone '{name}' has a Limit Rotation constraint '{constraint.name}' that may clamp the "
                    "solved rotation: Import Limits gives Tendon the same limits"
                )
    return notes


def conformal(frame: np.ndarray) -> bool:
    """Whether a 3x3 frame is a rotation times a uniform scale (no shear, no stretch)."""
    gram = frame.T @ frame
    size = float(np.trace(gram)) / 3.0
    return size > 0.0 and float(np.abs(gram - size * np.eye(3)).max()) <= SCALE_TOLERANCE * size


def collapsed_bones(obj: bpy.types.Object) -> dict[str, str]:
    """Pose bones scaled to (almost) zero on an axis: name -> the problem, naming the bone
    and the axes. One bulk read, so the usual case (none) costs next to nothing."""
    pose_bones = obj.pose.bones
    scales = np.empty(len(pose_bones) * 3, np.float32)
    pose_bones.foreach_get("scale", scales)
    scales = scales.reshape(-1, 3)
    found = {}
    for index in np.nonzero(np.abs(scales).min(axis=1) <= COLLAPSED_SCALE)[0]:
        scale = scales[index]
        axes = "/".join(axis for axis, value in zip("XYZ", scale, strict=True) if abs(value) <= COLLAPSED_SCALE)
        name = pose_bones[int(index)].name
        found[name] = (
            f"bone '{name}' is scaled to zero on its {axes} axis (pose scale "
            f"{', '.join(f'{value:g}' for value in scale)}), which flattens it and the bones under it: "
            "give it a non-zero scale"
        )
    return found


def collapse_problem(pose_bone: bpy.types.PoseBone, collapsed: dict[str, str]) -> str | None:
    """The problem of the bone, or of the nearest ancestor, scaled to zero on an axis."""
    while pose_bone is not None:
        if pose_bone.name in collapsed:
            return collapsed[pose_bone.name]
        pose_bone = pose_bone.parent
    return None


def bone_problems(
    obj: bpy.types.Object, names: list[str], pose_order: np.ndarray, moving: list[int], mismatched: list[int]
) -> list[str | None]:
    """Why each moving bone (rig indices) cannot be solved, naming it, or None; `mismatched`
    are the moving bones whose evaluated rotation is not their channels' (a catch-all for
    whatever else moves a bone)."""
    pose_bones = obj.pose.bones
    driven = driven_bones(obj)
    collapsed = collapsed_bones(obj)
    problems: list[str | None] = []
    for bone in moving:
        pose_bone = pose_bones[int(pose_order[bone])]
        problem = (collapse_problem(pose_bone, collapsed) if collapsed else None) or bone_problem(pose_bone, driven)
        if problem is None and bone in mismatched:
            problem = (
                f"bone '{names[bone]}' is not where its own channels put it (something Tendon does not model moves it)"
            )
        problems.append(problem)
    return problems


def evaluated_matrices(obj: bpy.types.Object, pose_order: np.ndarray, in_order: bool) -> np.ndarray:
    """Every pose bone's armature-space matrix as Blender last evaluated it, (n, 16)
    column-major each, in the rig's bone order."""
    n = len(pose_order)
    matrices = np.empty(n * 16, np.float32)
    obj.pose.bones.foreach_get("matrix", matrices)
    matrices = matrices.reshape(n, 16)
    return matrices if in_order else matrices[pose_order]


def mismatched_bones(evaluated_rotations: np.ndarray, channel_rotations: np.ndarray, moving: list[int]) -> list[int]:
    """The moving bones whose evaluated local rotation differs from their channels'."""
    if not moving:
        return []
    a, b = evaluated_rotations[moving], channel_rotations[moving]
    # q and -q are the same rotation.
    sign = np.where(np.sum(a * b, axis=1) < 0.0, -1.0, 1.0)[:, None]
    differs = np.abs(a - sign * b).max(axis=1) > CHANNEL_MISMATCH
    return [bone for bone, bad in zip(moving, differs, strict=True) if bad]


@dataclass
class Check:
    """What an effector must achieve, measured in the pose Blender shows."""

    pose_bone: str
    use_tail: bool
    #: Armature-space target.
    target: tuple[float, float, float]
    #: Largest armature-space distance that counts as reached.
    tolerance: float


def measure(obj: bpy.types.Object, checks: list[Check]) -> tuple[bool, float]:
    """Whether every effector is within its tolerance in Blender's evaluated pose, and the
    largest distance in world units (the distance the user sees)."""
    world = obj.matrix_world
    pose_bones = obj.pose.bones
    reached, largest = True, 0.0
    for check in checks:
        pose_bone = pose_bones[check.pose_bone]
        point = pose_bone.tail if check.use_tail else pose_bone.head
        offset = point - type(point)(check.target)
        reached &= offset.length <= check.tolerance
        largest = max(largest, (world.to_3x3() @ offset).length)
    return reached, largest


def chain_reach(evaluated: np.ndarray, lengths: np.ndarray, chain: list[int], use_tail: bool) -> float:
    """Length of a chain in the evaluated pose: from its top bone's head through each head to
    the effector point (what a relative tolerance is measured against)."""
    heads = evaluated[chain][:, 12:15]
    reach = float(np.linalg.norm(np.diff(heads, axis=0), axis=1).sum())
    if use_tail:
        axis = evaluated[chain[0]][4:7]
        reach += float(lengths[chain[0]] * np.linalg.norm(axis))
    return reach


def effector_turns(effector: Any) -> bool:
    """Whether the solve turns the effector bone itself (not only the chain above it)."""
    return bool(effector.use_tail or (effector.use_rotation and effector.rotation_weight > 0.0))
