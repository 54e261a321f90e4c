"""The bones a solve moves, whether Blender lets their channels pose them, and what the
solve achieved in the pose Blender evaluates.

Tendon's rig model is Blender's default: each bone's matrix is its parent's, times its
rest offset, times its own channels. Real rigs break that for some bones (constraints,
drivers, inheritance options). Bones outside the chains may do anything: the solve starts
from where Blender really puts them (``Rig.start_pose``). A bone the solve turns must be posed
by its own channels, or it is refused here with its name and the reason; never a silent miss.

The checks cost next to nothing per solve: which bones carry constraints or drivers, and
their inheritance options, come from the rig cache (``rig.py``); what may change without
an event that would invalidate it (a constraint's muting and influence, pose scale, and
where Blender actually puts each bone: the catch-all) is read at each solve, in bulk or
for the moving bones only.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import bpy
import numpy as np

from .pose import COLLAPSED_SCALE

if TYPE_CHECKING:
    from .rig import RigEntry

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


def constraint_problem(pose_bone: bpy.types.PoseBone, driven: dict[str, str]) -> str | None:
    """Why a constraint or driver keeps Blender from posing `pose_bone` from its own
    channels, or None."""
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
    return None


def signed_scales(matrices: np.ndarray) -> np.ndarray:
    """The scale of (k, 16) column-major matrices as ``Matrix.to_scale`` gives it: column
    lengths, all negated when the frame is mirrored."""
    frames = matrices.reshape(-1, 4, 4)[:, :3, :3].astype(np.float64)
    lengths = np.linalg.norm(frames, axis=2)
    return lengths * np.where(np.linalg.det(frames) < 0.0, -1.0, 1.0)[:, None]


def inherit_problems(entry: RigEntry, moving: list[int], evaluated: np.ndarray) -> dict[int, str]:
    """The moving bones (rig indices) whose inheritance options Tendon does not model:
    Inherit Rotation off, or Inherit Scale other than Full under a parent whose scale
    (in Blender's evaluated pose) makes a difference."""
    problems = {}
    for bone in moving:
        if bone in entry.no_inherit_rotation:
            problems[bone] = (
                f"bone '{entry.names[bone]}' does not inherit its parent's rotation (Inherit Rotation is off)"
            )
    odd = [bone for bone in moving if bone in entry.inherit_scale and entry.parents[bone] >= 0 and bone not in problems]
    if odd:
        # Every such bone at once: its parent's scale is one (the usual case, told by the
        # lengths of its axes), or uniform where the mode makes that no different from Full.
        frames = evaluated[[entry.parents[bone] for bone in odd]]
        lengths = np.sqrt(np.square(frames.reshape(-1, 4, 4)[:, :3, :3]).sum(axis=2))
        if (np.abs(lengths - 1.0) <= SCALE_TOLERANCE).all():
            return problems
        scales = signed_scales(frames)
        unit = (np.abs(scales - 1.0) <= SCALE_TOLERANCE).all(axis=1)
        uniform = np.ptp(scales, axis=1) <= SCALE_TOLERANCE * np.abs(scales).max(axis=1)
        modes = [entry.inherit_scale[bone] for bone in odd]
        harmless = unit | (uniform & np.array([mode in UNIFORM_SCALE_MODES for mode in modes]))
        for bone, mode in zip(np.array(odd)[~harmless].tolist(), np.array(modes)[~harmless].tolist(), strict=True):
            parent = entry.names[entry.parents[bone]]
            problems[bone] = (
                f"bone '{entry.names[bone]}' inherits scale as '{mode}' under a scaled parent "
                f"('{parent}'), which Tendon does not model"
            )
    return problems


def frame_problems(entry: RigEntry, moving: list[int], evaluated: np.ndarray) -> dict[int, str]:
    """The moving bones (rig indices) that hang from a frame Tendon cannot model: a bone
    above them that inherits scale other than Full from a non-uniformly scaled parent (its
    frame relative to that parent shears, which a pose's rotation, location and scale
    cannot hold). The chain hung in a wrong frame: a solve moved the tip 0.3 away from a
    target 3 cm off and said only "not reached". Bones that turn are judged by
    `inherit_problems`."""
    problems: dict[int, str] = {}
    moving_set = set(moving)
    odd = {
        bone: entry.inherit_scale[bone]
        for bone in {b for start in moving for b in ancestors(entry, start)} - moving_set
        if bone in entry.inherit_scale and entry.parents[bone] >= 0
    }
    if not odd:
        return problems
    bones = sorted(odd)
    scales = signed_scales(evaluated[[entry.parents[bone] for bone in bones]])
    uniform = np.ptp(scales, axis=1) <= SCALE_TOLERANCE * np.abs(scales).max(axis=1)
    found = {
        bone: (
            f"bone '{entry.names[bone]}', which the chain hangs from, inherits scale as '{odd[bone]}' under "
            f"the non-uniformly scaled '{entry.names[entry.parents[bone]]}', a frame Tendon does not model"
        )
        for bone, even in zip(bones, uniform.tolist(), strict=True)
        if not even
    }
    for bone in moving:
        for above in ancestors(entry, bone):
            if above in found:
                problems[bone] = found[above]
                break
    return problems


def ancestors(entry: RigEntry, bone: int) -> list[int]:
    """The bones above `bone`, nearest first."""
    found = []
    bone = entry.parents[bone]
    while bone >= 0:
        found.append(bone)
        bone = entry.parents[bone]
    return found


def miss_notes(obj: bpy.types.Object, names: list[str]) -> list[str]:
    """What may keep the moving bones `names` from their targets although Blender poses
    them from their channels: a frame whose non-uniform scale shears every turn (solvers
    often still converge), or a Limit Rotation constraint that clamps the solved rotation
    (harmless when Tendon's joint limits match it: Import Limits sets them, and a bone
    without Tendon limits takes its Limit Rotation's, `RigEntry.clamped_alike`, so the
    callers leave such bones out)."""
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


def collapsed_problems(obj: bpy.types.Object, entry: RigEntry, smallest: np.ndarray) -> dict[int, str]:
    """Bones (rig indices) whose pose scale flattens an axis (`smallest`: each bone's
    smallest absolute channel scale, n) -> the problem, naming the bone and the axes. One
    vectorised test, so the usual case (none) costs next to nothing; the channels are read
    only to name what was found."""
    found: dict[int, str] = {}
    if smallest.min() > COLLAPSED_SCALE:
        return found
    pose_bones = obj.pose.bones
    for bone in np.nonzero(smallest <= COLLAPSED_SCALE)[0].tolist():
        pose_bone = pose_bones[entry.names[bone]]
        scale = tuple(pose_bone.scale)
        axes = "/".join(axis for axis, value in zip("XYZ", scale, strict=True) if abs(value) <= COLLAPSED_SCALE)
        found[bone] = (
            f"bone '{pose_bone.name}' is scaled to zero on its {axes or 'X/Y/Z'} axis (pose scale "
            f"{', '.join(f'{value:g}' for value in scale)}), which flattens it and the bones under it: "
            "give it a non-zero scale"
        )
    return found


def bone_problems(
    obj: bpy.types.Object,
    entry: RigEntry,
    moving: list[int],
    mismatched: list[int],
    smallest: np.ndarray,
    evaluated: np.ndarray,
) -> dict[int, str]:
    """Why moving bones (rig indices) cannot be solved, naming them: only the bones with a
    problem. In order: a bone (or an ancestor) scaled to zero, a constraint or driver, an
    inheritance option, and `mismatched` (moving bones whose evaluated rotation is not
    their channels': a catch-all for whatever else moves a bone). `smallest` is each
    bone's smallest absolute channel scale, `evaluated` Blender's armature-space matrices
    (n, 16, column-major)."""
    problems: dict[int, str] = {}
    if not moving:
        return problems
    collapsed = collapsed_problems(obj, entry, smallest)
    if collapsed:
        for bone in moving:
            above = bone
            while above >= 0 and above not in collapsed:
                above = entry.parents[above]
            if above >= 0:
                problems[bone] = collapsed[above]
    suspects = [bone for bone in moving if bone not in problems and (bone in entry.constrained or bone in entry.driven)]
    if suspects:
        driven = {entry.names[bone]: channel for bone, channel in entry.driven.items()}
        pose_bones = obj.pose.bones
        for bone in suspects:
            problem = constraint_problem(pose_bones[entry.names[bone]], driven)
            if problem:
                problems[bone] = problem
    for bone, problem in inherit_problems(entry, moving, evaluated).items():
        problems.setdefault(bone, problem)
    for bone, problem in frame_problems(entry, moving, evaluated).items():
        problems.setdefault(bone, problem)
    for bone in mismatched:
        if bone in entry.clamped_alike:
            # Its channels past its Limit Rotation's ranges (posed before, or keyed): the
            # solve starts from the same clamp Blender shows, its limits being the same.
            continue
        if any(c.type == "LIMIT_ROTATION" and not c.mute for c in obj.pose.bones[entry.names[bone]].constraints):
            # A Limit Rotation the limits do not model clamps its channels: solved, and the
            # status says when the clamp keeps it short (`miss_notes`); refused, every solve
            # after the first was (QA helper).
            continue
        name = entry.names[bone]
        problems.setdefault(
            bone, f"bone '{name}' is not where its own channels put it (something Tendon does not model moves it)"
        )
    return problems


def effector_turns(effector: Any) -> bool:
    """Whether the solve turns the effector bone itself (not only the chain above it)."""
    return bool(effector.use_tail or (effector.use_rotation and effector.rotation_weight > 0.0))
