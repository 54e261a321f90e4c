"""Targets in armature space, written once for one frame or many: a solve, live mode and
both ways a bake samples its targets (the scene evaluated frame by frame, or the targets'
F-curves read directly) gather world matrices, and `armature_targets` turns them into the
arrays the native solver takes, (frames, goals, 3) points, (frames, goals, 4) rotations and
(frames, goals, 3) poles, in one pass.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import bpy
import numpy as np
from mathutils import Matrix

from .native import TendonUserError, native

#: An armature whose world axes are shorter than this share of its longest one, or span less
#: than this share of the box they would span at right angles, has no usable inverse.
SINGULAR_FRAME = 1e-6

#: The last world matrix checked per armature, its inverse, and that as a (4, 4) array:
#: worked out again only when the matrix changes (object pointer -> the three).
_inverses: dict[int, tuple[Matrix, Matrix, np.ndarray]] = {}


def clear() -> None:
    _inverses.clear()


def world_to_armature(obj: bpy.types.Object, frame: int | None = None) -> Matrix:
    """The inverse of the armature's world matrix (world to armature space), refusing with
    the armature and the axis named when there is none (an object scaled to zero on an
    axis): a pseudo-inverse would send every target somewhere meaningless."""
    return inverse_of(obj, frame)[0]


def world_to_armature_array(obj: bpy.types.Object) -> np.ndarray:
    """`world_to_armature` as a (4, 4) float64 array."""
    return inverse_of(obj, None)[1]


def inverse_of(obj: bpy.types.Object, frame: int | None) -> tuple[Matrix, np.ndarray]:
    world = obj.matrix_world
    known = _inverses.get(obj.as_pointer())
    if known is not None and known[0] == world:
        return known[1], known[2]
    inverse = checked_inverse(obj, world, frame)
    array = np.array(inverse, np.float64)
    _inverses[obj.as_pointer()] = (world.copy(), inverse, array)
    return inverse, array


def checked_inverse(obj: bpy.types.Object, world: Matrix, frame: int | None) -> Matrix:
    at = f" at frame {frame}" if frame is not None else ""
    if not all(math.isfinite(value) for row in world for value in row):
        raise TendonUserError(f"Armature '{obj.name}' has a non-finite world matrix{at}; nothing solved")
    axes = [world.col[i].to_3d().length for i in range(3)]
    longest = max(axes)
    flat = [name for name, length in zip("XYZ", axes, strict=True) if length <= SINGULAR_FRAME * longest]
    if longest == 0.0 or flat:
        names = "/".join(flat) if flat else "X/Y/Z"
        if any(abs(value) <= SINGULAR_FRAME for value in obj.scale) or obj.parent is None:
            how = f"object scale {', '.join(f'{value:g}' for value in obj.scale)}"
        else:
            how = f"by its parent '{obj.parent.name}'"
        raise TendonUserError(
            f"Armature '{obj.name}' is scaled to zero on its {names} axis{at} ({how}): "
            "targets have no place in its space; give it a non-zero scale"
        )
    if abs(world.to_3x3().determinant()) <= SINGULAR_FRAME * axes[0] * axes[1] * axes[2]:
        raise TendonUserError(
            f"Armature '{obj.name}' has a flat world matrix{at} (its axes lie in one plane, "
            "a parent's zero or sheared scale?); targets have no place in its space"
        )
    return world.inverted()


def target_world_matrix(target: bpy.types.Object, subtarget: str, label: str) -> Matrix:
    """World matrix of a target object, or of a bone of a target armature (at its head)."""
    if subtarget and target.type == "ARMATURE":
        pose_bone = target.pose.bones.get(subtarget)
        if pose_bone is None:
            raise TendonUserError(
                f"{label}: bone '{subtarget}' not found in armature '{target.name}' (renamed or deleted?)"
            )
        return target.matrix_world @ pose_bone.matrix
    return target.matrix_world


#: The world matrices of each effector's target objects (by effector position: its target's,
#: then its pole target's if it has one; None where one could not be read), read once by
#: live mode for its signature and the solve.
WorldTargets = dict[int, list[Matrix | None]]


def target_objects(effector: Any) -> list[tuple[bpy.types.Object, str]]:
    """The objects (and bone names) an effector follows: its target and pole target."""
    found = []
    if effector.target is not None:
        found.append((effector.target, effector.subtarget))
    if effector.pole_target is not None:
        found.append((effector.pole_target, effector.pole_subtarget))
    return found


def target_scale(obj: bpy.types.Object, target: Matrix) -> np.ndarray:
    """A target's world scale (from its world matrix) relative to the armature's, per axis."""
    scale = target.to_scale()
    armature = obj.matrix_world.to_scale()
    return np.array([t / a if a else 1.0 for t, a in zip(scale, armature, strict=True)], np.float32)


@dataclass
class Targets:
    """The goals' targets in armature space, per frame."""

    #: (frames, goals, 3).
    points: np.ndarray
    #: (frames, goals, 4) w-first, or None when no goal has a rotation target.
    rotations: np.ndarray | None
    #: (frames, goals, 3), or None when no goal has a pole.
    poles: np.ndarray | None


def armature_targets(
    world_to_armature: np.ndarray, points: np.ndarray, turns: np.ndarray | None, poles: np.ndarray | None
) -> Targets:
    """World targets into armature space, every frame and goal at once: `world_to_armature`
    (frames, 4, 4) row-major; the targets' world `points` (frames, goals, 3); `turns`
    (frames, goals, 3, 3), the rotation (and scale) part of the targets' world matrices,
    when a goal has a rotation target (decomposed natively, so scale and shear do not leak
    into the rotation); the poles' world points (frames, goals, 3), when a goal has a pole."""
    frames, goals = points.shape[:2]
    # Row vectors: p' = p R^T + t, every frame's goals at once.
    turn, shift = world_to_armature[:, :3, :3].transpose(0, 2, 1), world_to_armature[:, None, :3, 3]
    rotations = None
    if turns is not None:
        local = np.zeros((frames * goals, 4, 4), np.float32)
        local[:, :3, :3] = (world_to_armature[:, None, :3, :3] @ turns).reshape(-1, 3, 3)
        local[:, 3, 3] = 1.0
        # A target whose rotation is not a number: NaN out, for the goal made from it to
        # refuse by name (the others are decomposed as usual).
        bad = ~np.isfinite(local).all(axis=(1, 2))
        local[bad] = np.eye(4, dtype=np.float32)
        rotations = native().matrices_to_transforms(local)[0]
        rotations[bad] = np.nan
        rotations = rotations.reshape(frames, goals, 4)
    if poles is not None:
        poles = (poles @ turn + shift).astype(np.float32)
    return Targets((points @ turn + shift).astype(np.float32), rotations, poles)
