"""The one module that talks to both Blender and Tendon's native solvers.

Blender arrays go in bulk (``foreach_get``) into numpy float32, through one native call,
and back into the pose bones in each bone's own rotation mode. No maths here: the native
library decomposes matrices and converts rotations into channels.
"""

from __future__ import annotations

import json
import math
import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import bpy
import numpy as np
from mathutils import Euler, Matrix, Quaternion, Vector

from . import bake, chains

if TYPE_CHECKING:
    from types import ModuleType

#: The add-on's solver items and the native library's names for them.
SOLVER_NAMES = {
    "FABRIK": "fabrik",
    "CCD": "ccd",
    "JACOBIAN_DLS": "jacobian_dls",
    "JACOBIAN_TRANSPOSE": "jacobian_transpose",
    "TWO_BONE": "two_bone",
    "TENSION": "tension",
}

#: Channels of the rest rotation in each of Blender's rotation modes.
REST_CHANNELS = {"QUATERNION": (1.0, 0.0, 0.0, 0.0), "AXIS_ANGLE": (0.0, 0.0, 1.0, 0.0)}

#: Rotations closer than this (per quaternion component) count as unchanged.
UNCHANGED = 1e-7


class TendonUserError(Exception):
    """A problem the user can fix. The message names the armature, bone or effector."""


def native() -> ModuleType:
    """Tendon's native package, imported on first use so the add-on registers (and says
    what is wrong) even where the library cannot load."""
    try:
        import tendon
    except ImportError as error:
        raise TendonUserError(
            f"Tendon's native library could not be loaded ({error}). "
            "Install the Tendon zip built for this platform (Linux x64)."
        ) from error
    return tendon


def native_status() -> str:
    """One line for the preferences and the panel: the library's version or the problem."""
    try:
        return f"native library {native().__version__}"
    except TendonUserError as error:
        return str(error)


def solver_defaults(solver_item: str) -> dict[str, Any]:
    """The native defaults of a solver (empty when the library or solver is missing)."""
    try:
        tendon = native()
        name = SOLVER_NAMES[solver_item]
        return dict(tendon.Solver.defaults(name)) if name in tendon.Solver.names() else {}
    except (TendonUserError, KeyError):
        return {}


def spring_defaults() -> dict[str, Any]:
    """The native spring simulation's defaults (empty when the library is missing)."""
    try:
        return dict(native().SpringSimulation.defaults())
    except TendonUserError:
        return {}


def armature_problem(obj: bpy.types.Object | None, need_pose_mode: bool = True) -> str | None:
    """Why Tendon cannot pose `obj`, or None when it can."""
    if obj is None:
        return "No active object: select an armature"
    if obj.type != "ARMATURE":
        return f"Active object '{obj.name}' is not an armature"
    if obj.library is not None:
        return f"Armature '{obj.name}' is linked from '{obj.library.filepath}': make a library override to pose it"
    if need_pose_mode and obj.mode != "POSE":
        return f"Armature '{obj.name}' is not in Pose Mode"
    if len(obj.data.bones) == 0:
        return f"Armature '{obj.name}' has no bones"
    return None


# --- The rig ------------------------------------------------------------------------------


@dataclass
class RigEntry:
    """A native rig built from an armature, and what is needed to map between the two."""

    signature: tuple[Any, ...]
    rig: Any
    names: list[str]
    index: dict[str, int]
    parents: list[int]
    lengths: np.ndarray
    #: For each bone (in `names` order), its index in ``obj.pose.bones``.
    pose_order: np.ndarray
    #: True when ``obj.pose.bones`` lists the bones in `names` order.
    pose_in_order: bool


_rigs: dict[int, RigEntry] = {}

#: The tension settings of a bone left at the properties' defaults (pi/2 and 1 on every
#: axis and side, the native defaults), sent only when a bone differs.
DEFAULT_TENSION = [
    {side: {"threshold": math.pi / 2, "rigidity": 1.0} for side in ("negative", "positive")} for _ in "xyz"
]


def clear_caches() -> None:
    """Forgets cached rigs and live-mode state (after loading a file)."""
    _rigs.clear()
    _solvers.clear()
    _live_signatures.clear()
    _live_unmeasured.clear()


def is_default_tension(tension: list[dict[str, dict[str, float]]]) -> bool:
    """Whether a bone's tension settings are the defaults (to float32 precision)."""
    return all(
        abs(axis[side][key] - DEFAULT_TENSION[0][side][key]) < 1e-6
        for axis in tension
        for side in ("negative", "positive")
        for key in ("threshold", "rigidity")
    )


def limits_json(obj: bpy.types.Object, with_tension: bool) -> str | None:
    """The pose bones' Tendon limits as the native library's JSON (None when no bone has
    any). Tension settings, which only the tension minimiser reads, only `with_tension`:
    this runs at every solve, and live mode wants it cheap."""
    limits: dict[str, dict[str, Any]] = {}
    for pose_bone in obj.pose.bones:
        settings = pose_bone.tendon
        axes: dict[str, Any] = {}
        for axis in "xyz":
            if getattr(settings, f"lock_{axis}"):
                axes[axis] = {"mode": "locked"}
            elif getattr(settings, f"use_limit_{axis}"):
                low, high = getattr(settings, f"min_{axis}"), getattr(settings, f"max_{axis}")
                axes[axis] = {"mode": "range", "min": low, "max": high}
        tension = (
            [
                {
                    side: {
                        "threshold": getattr(settings, f"threshold_{side}_{axis}"),
                        "rigidity": getattr(settings, f"rigidity_{side}_{axis}"),
                    }
                    for side in ("negative", "positive")
                }
                for axis in "xyz"
            ]
            if with_tension
            else None
        )
        if tension and not is_default_tension(tension):
            axes["tension"] = tension
        if axes or settings.euler_order != "XYZ":
            limits[pose_bone.name] = {"order": settings.euler_order, **axes}
            if settings.limit_roll:
                limits[pose_bone.name]["roll"] = settings.limit_roll
    return json.dumps(limits, sort_keys=True) if limits else None


def read_rig(obj: bpy.types.Object) -> RigEntry:
    """The native rig of armature `obj`: rebuilt only when its bones or limits changed."""
    tendon = native()
    bones = obj.data.bones
    n = len(bones)
    if n == 0:
        raise TendonUserError(f"Armature '{obj.name}' has no bones")
    names = [bone.name for bone in bones]
    index = {name: i for i, name in enumerate(names)}
    parents = [index[bone.parent.name] if bone.parent else -1 for bone in bones]
    matrices = np.empty(n * 16, np.float32)
    bones.foreach_get("matrix_local", matrices)
    lengths = np.empty(n, np.float32)
    bones.foreach_get("length", lengths)
    limits = limits_json(obj, with_tension=obj.tendon.solver == "TENSION")
    signature = (tuple(names), tuple(parents), matrices.tobytes(), lengths.tobytes(), limits)
    key = obj.as_pointer()
    entry = _rigs.get(key)
    if entry is not None and entry.signature == signature:
        return entry
    pose_names = [pose_bone.name for pose_bone in obj.pose.bones]
    pose_index = {name: i for i, name in enumerate(pose_names)}
    pose_order = np.array([pose_index[name] for name in names], np.int64)
    # foreach_get gives each matrix column by column: transposed, they are row-major.
    rest = matrices.reshape(n, 4, 4).transpose(0, 2, 1)
    try:
        rig = tendon.Rig.from_arrays(names, parents, rest, lengths, limits)
    except tendon.TendonError as error:
        raise TendonUserError(f"Armature '{obj.name}': {error}") from error
    entry = RigEntry(
        signature=signature,
        rig=rig,
        names=names,
        index=index,
        parents=parents,
        lengths=lengths,
        pose_order=pose_order,
        pose_in_order=pose_names == names,
    )
    _rigs[key] = entry
    return entry


def read_pose(obj: bpy.types.Object, entry: RigEntry) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The current pose (each bone's matrix_basis) as rotations, translations and scales."""
    n = len(entry.names)
    basis = np.empty(n * 16, np.float32)
    obj.pose.bones.foreach_get("matrix_basis", basis)
    matrices = basis.reshape(n, 4, 4)
    if not entry.pose_in_order:
        matrices = matrices[entry.pose_order]
    rotations, translations, scales = native().matrices_to_transforms(matrices, column_major=True)
    for bone, rotation in collapsed_rotations(obj, entry, matrices).items():
        rotations[bone] = rotation
    return rotations, translations, scales


def collapsed_rotations(obj: bpy.types.Object, entry: RigEntry, matrices: np.ndarray) -> dict[int, tuple[float, ...]]:
    """The bones whose matrix_basis (n, 4, 4 column-major, rig order) is scaled to zero on an
    axis, mapped to the rotation of their channels: such a matrix no longer holds the
    rotation (it decomposes to NaN), yet the bone keeps it (a bone hidden by scaling it to
    zero, say). Empty, after one vectorised test, for every usual pose."""
    lengths = np.linalg.norm(matrices[:, :3, :3], axis=2)
    collapsed = np.nonzero(lengths.min(axis=1) <= chains.COLLAPSED_SCALE)[0]
    return {int(bone): channel_rotation(obj.pose.bones[int(entry.pose_order[bone])]) for bone in collapsed}


def channel_rotation(pose_bone: bpy.types.PoseBone) -> tuple[float, ...]:
    """A pose bone's rotation (w, x, y, z) from the channels of its rotation mode."""
    mode = pose_bone.rotation_mode
    if mode == "QUATERNION":
        rotation = pose_bone.rotation_quaternion.normalized()
    elif mode == "AXIS_ANGLE":
        angle, *axis = pose_bone.rotation_axis_angle
        rotation = Quaternion(axis, angle)
    else:
        rotation = Euler(pose_bone.rotation_euler, mode).to_quaternion()
    values = tuple(rotation)
    return values if all(math.isfinite(v) for v in values) and any(values) else (1.0, 0.0, 0.0, 0.0)


def chain_bones(entry: RigEntry, bone: int, chain_length: int) -> list[int]:
    """The effector bone and the ancestors its chain may turn (chain length 0: to the root)."""
    return chains.chain_bones(entry.parents, bone, chain_length)


def evaluated_pose(obj: bpy.types.Object, entry: RigEntry) -> tuple[np.ndarray, tuple[np.ndarray, ...]]:
    """The armature-space matrices Blender last evaluated, (n, 16) column-major, and the
    pose (rotations, translations, scales) that gives them in Tendon's model: constraints,
    drivers and inheritance options included, for the bones the solve does not move."""
    matrices = chains.evaluated_matrices(obj, entry.pose_order, entry.pose_in_order)
    pose = entry.rig.pose_from_world(matrices.reshape(-1, 4, 4), column_major=True)
    return matrices, pose


def drop_unsolvable(
    obj: bpy.types.Object, entry: RigEntry, found: GoalSet, evaluated_rotations: np.ndarray, rotations: np.ndarray
) -> list[int]:
    """Skips, with a warning naming the bone and the reason, each goal whose chain holds a
    bone Blender does not pose from its own channels; returns the bones the kept goals move."""
    effectors = obj.tendon.effectors
    moves = [
        chains.moving_bones(entry.parents, [(bone, length, chains.effector_turns(effectors[position]))])
        for (bone, length), position in zip(found.chains, found.effectors, strict=True)
    ]
    every = sorted({bone for bones in moves for bone in bones})
    mismatched = chains.mismatched_bones(evaluated_rotations, rotations, every)
    problems = dict(
        zip(every, chains.bone_problems(obj, entry.names, entry.pose_order, every, mismatched), strict=True)
    )
    kept = []
    for k, bones in enumerate(moves):
        # Bones under one collapsed bone share its problem: say it once.
        reasons = list(dict.fromkeys(problems[bone] for bone in bones if problems[bone]))
        if reasons:
            position = found.effectors[k]
            label = effector_label(position, effectors[position].bone)
            found.warnings.append(f"{label}: {'; '.join(reasons)}; skipped")
        else:
            kept.append(k)
    if len(kept) < len(moves):
        found.keep(kept)
        return sorted({bone for k in kept for bone in moves[k]})
    return every


# --- Goals --------------------------------------------------------------------------------


@dataclass
class GoalSet:
    """The goals of an armature's enabled, valid effectors, and what was skipped and why."""

    goals: list[Any] = field(default_factory=list)
    #: Index into the armature's effector collection of each goal.
    effectors: list[int] = field(default_factory=list)
    #: The (bone index, chain length) of each goal.
    chains: list[tuple[int, int]] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)

    def keep(self, kept: list[int]) -> None:
        """Keeps only the goals at positions `kept`."""
        self.goals = [self.goals[k] for k in kept]
        self.effectors = [self.effectors[k] for k in kept]
        self.chains = [self.chains[k] for k in kept]


def effector_label(position: int, bone: str) -> str:
    return f"effector {position + 1} ('{bone}')" if bone else f"effector {position + 1} (no bone set)"


#: An armature whose world axes are shorter than this share of its longest one, or span less
#: than this share of the box they would span at right angles, has no usable inverse.
SINGULAR_FRAME = 1e-6


def to_armature_space(obj: bpy.types.Object, frame: int | None = None) -> Matrix:
    """The inverse of the armature's world matrix (world to armature space), refusing with
    the armature and the axis named when there is none (an object scaled to zero on an
    axis): a pseudo-inverse would send every target somewhere meaningless."""
    world = obj.matrix_world
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


def target_objects(effector: Any) -> list[tuple[bpy.types.Object, str]]:
    """The objects (and bone names) an effector follows: its target and pole target."""
    found = []
    if effector.target is not None:
        found.append((effector.target, effector.subtarget))
    if effector.pole_target is not None:
        found.append((effector.pole_target, effector.pole_subtarget))
    return found


def build_goals(obj: bpy.types.Object, entry: RigEntry) -> GoalSet:
    """Goals in armature space from the enabled effectors; invalid ones are skipped with a
    warning naming them."""
    tendon = native()
    settings = obj.tendon
    to_armature = to_armature_space(obj)
    found = GoalSet()
    for position, effector in enumerate(settings.effectors):
        if not effector.enabled:
            continue
        label = effector_label(position, effector.bone)
        try:
            goal, chain = effector_goal(tendon, obj, entry, effector, label, to_armature, found.warnings)
        except TendonUserError as problem:
            found.warnings.append(f"{problem}; skipped")
            continue
        found.goals.append(goal)
        found.effectors.append(position)
        found.chains.append(chain)
    drop_loops(obj, entry, found)
    return found


def drop_loops(obj: bpy.types.Object, entry: RigEntry, found: GoalSet) -> None:
    """Skips, naming both, each goal whose target or pole is a bone of the same armature
    that the solve moves (in or under a chain): the target would move as the chain reaches
    for it, and live mode would chase it for ever."""
    effectors = obj.tendon.effectors
    # Bone -> the effector whose chain turns it; the bones under it move with it.
    turned: dict[int, int] = {}
    for (bone, length), position in zip(found.chains, found.effectors, strict=True):
        for moved in chains.moving_bones(entry.parents, [(bone, length, chains.effector_turns(effectors[position]))]):
            turned.setdefault(moved, position)
    kept = []
    for k, position in enumerate(found.effectors):
        effector = effectors[position]
        problem = None
        for target, subtarget, role in (
            (effector.target, effector.subtarget, "target"),
            (effector.pole_target, effector.pole_subtarget, "pole target"),
        ):
            bone = entry.index.get(subtarget) if target == obj and subtarget else None
            while bone is not None and bone >= 0 and problem is None:
                owner = turned.get(bone)
                if owner is not None:
                    whose = (
                        "its own chain"
                        if owner == position
                        else f"the chain of {effector_label(owner, effectors[owner].bone)}"
                    )
                    via = f" (under '{entry.names[bone]}')" if entry.names[bone] != subtarget else ""
                    problem = (
                        f"{effector_label(position, effector.bone)}: its {role} bone '{subtarget}' moves with "
                        f"{whose}{via}, so it would move as the chain reaches for it (a loop); "
                        "pick a bone outside the chains; skipped"
                    )
                bone = entry.parents[bone]
        if problem:
            found.warnings.append(problem)
        else:
            kept.append(k)
    if len(kept) < len(found.goals):
        found.keep(kept)


def effector_goal(
    tendon: ModuleType,
    obj: bpy.types.Object,
    entry: RigEntry,
    effector: Any,
    label: str,
    to_armature: Matrix,
    warnings: list[str],
) -> tuple[Any, tuple[int, int]]:
    """One effector's native goal, raising TendonUserError naming what is wrong."""
    if not effector.bone:
        raise TendonUserError(f"{label} has no bone")
    bone = entry.index.get(effector.bone)
    if bone is None:
        raise TendonUserError(f"{label}: armature '{obj.name}' has no bone '{effector.bone}' (renamed or deleted?)")
    if effector.target is None:
        raise TendonUserError(f"{label} has no target object")
    for target, subtarget, role in (
        (effector.target, effector.subtarget, "target"),
        (effector.pole_target, effector.pole_subtarget, "pole target"),
    ):
        if target is None:
            continue
        # Deleting an object in the viewport leaves it in the file while something points
        # at it, in no scene, where it is never evaluated again.
        if not target.users_scene:
            raise TendonUserError(f"{label}: {role} '{target.name}' is in no scene (deleted?)")
        if target == obj and not subtarget:
            raise TendonUserError(
                f"{label}: the {role} is armature '{obj.name}' itself, whose origin moves with it: "
                "set a Target Bone, or pick another object"
            )
    depth = len(chain_bones(entry, bone, 0))
    chain_length = effector.chain_length
    if chain_length > depth:
        warnings.append(
            f"{label}: chain length {chain_length} is longer than the {depth} bones up to the root; using {depth}"
        )
        chain_length = 0
    if effector.use_tail and entry.lengths[bone] <= 1e-5 * float(entry.lengths.max()):
        warnings.append(f"{label}: bone '{effector.bone}' has (almost) zero length, so its tail is its head")
    target = to_armature @ target_world_matrix(effector.target, effector.subtarget, label)
    arguments: dict[str, Any] = {
        "weight": effector.weight,
        "chain_length": chain_length,
        "point": "tail" if effector.use_tail else "head",
    }
    if effector.use_rotation and effector.rotation_weight > 0.0:
        arguments["rotation"] = tuple(target.to_quaternion())
        arguments["rotation_weight"] = effector.rotation_weight
    if effector.pole_target is not None:
        pole = to_armature @ target_world_matrix(effector.pole_target, effector.pole_subtarget, label)
        arguments["pole"] = tuple(pole.translation)
        arguments["pole_angle"] = effector.pole_angle
    try:
        goal = tendon.Goal(effector.bone, tuple(target.translation), **arguments)
    except tendon.TendonError as error:
        raise TendonUserError(f"{label}: {error}") from error
    return goal, (bone, chain_length)


# --- Scale targets ------------------------------------------------------------------------


@dataclass
class ScaleTarget:
    """An effector whose chain scales to match its target's scale."""

    effector: int
    #: The chain's bones (rig indices), root-most first.
    bones: list[int]
    #: Per-bone scale limits (bones, 3) each, or None when no bone has limits.
    low: np.ndarray | None
    high: np.ndarray | None


def scale_targets(obj: bpy.types.Object, entry: RigEntry, found: GoalSet) -> list[ScaleTarget]:
    """The enabled effectors that scale their chains."""
    plans = []
    for position, (bone, chain_length) in zip(found.effectors, found.chains, strict=True):
        if not obj.tendon.effectors[position].use_scale:
            continue
        bones = chain_bones(entry, bone, chain_length)[::-1]
        limited = [obj.pose.bones[int(entry.pose_order[b])].tendon for b in bones]
        low = high = None
        if any(limits.use_scale_limit for limits in limited):
            wide = ((1e-3,) * 3, (1e3,) * 3)
            low = np.array([lim.scale_min if lim.use_scale_limit else wide[0] for lim in limited], np.float32)
            high = np.array([lim.scale_max if lim.use_scale_limit else wide[1] for lim in limited], np.float32)
        plans.append(ScaleTarget(position, bones, low, high))
    return plans


def target_scale(obj: bpy.types.Object, effector: Any) -> np.ndarray:
    """The effector target's world scale relative to the armature's, per axis."""
    label = effector_label(0, effector.bone)
    target = target_world_matrix(effector.target, effector.subtarget, label).to_scale()
    armature = obj.matrix_world.to_scale()
    return np.array([t / a if a else 1.0 for t, a in zip(target, armature, strict=True)], np.float32)


def apply_scales(plans: list[ScaleTarget], goals: np.ndarray, scales: np.ndarray) -> None:
    """Sets the pose scales of each plan's chain from its goal scale (goals: plans x 3)."""
    tendon = native()
    for plan, goal in zip(plans, goals, strict=True):
        try:
            scales[plan.bones] = tendon.distribute_scale(goal, len(plan.bones), plan.low, plan.high)
        except tendon.TendonError as error:
            raise TendonUserError(f"Scale target of effector {plan.effector + 1}: {error}") from error


# --- Solving ------------------------------------------------------------------------------

_solvers: dict[tuple[Any, ...], Any] = {}


def solver_for(settings: Any) -> Any:
    """The native solver the armature's settings ask for (reused while they stay the same)."""
    tendon = native()
    name = SOLVER_NAMES[settings.solver]
    if name not in tendon.Solver.names():
        raise TendonUserError(
            f"The '{settings.solver}' solver is not in this build of Tendon's native library "
            f"(it has: {', '.join(tendon.Solver.names())})"
        )
    defaults = tendon.Solver.defaults(name)
    options: dict[str, Any] = {"tolerance": settings.tolerance}
    if settings.iterations > 0:
        options["max_iterations"] = settings.iterations
    if "damping" in defaults:
        options["damping"] = settings.damping
    for flag in ("exclusive_chains", "move_root"):
        if flag in defaults:
            options[flag] = getattr(settings, flag)
    if "reference" in defaults:
        options["reference"] = TENSION_REFERENCES[settings.tension_reference]
    key = (name, tuple(sorted(options.items())))
    solver = _solvers.get(key)
    if solver is None:
        try:
            solver = tendon.Solver(name, **options)
        except tendon.TendonError as error:
            raise TendonUserError(f"Solver settings: {error}") from error
        _solvers[key] = solver
    return solver


#: The add-on's tension references by the native library's names.
TENSION_REFERENCES = {"START": "start", "REST": "rest", "ACTION": "pose"}
#: A pose bone's rotation channels in an action, by rotation mode.
ROTATION_PATHS = {"QUATERNION": "rotation_quaternion", "AXIS_ANGLE": "rotation_axis_angle"}


def action_rotations(obj: bpy.types.Object, entry: RigEntry, action: bpy.types.Action, frame: float) -> dict[int, Any]:
    """The local rotations (w-first quaternions, by rig index) `action` gives the bones it
    keys at `frame`, each read in its pose bone's rotation mode."""
    channels: dict[tuple[str, str], dict[int, float]] = {}
    for fcurve in bake.action_fcurves(action, obj):
        path = fcurve.data_path
        if not path.startswith('pose.bones["'):
            continue
        bone, _, channel = path[len('pose.bones["') :].partition('"].')
        if channel.startswith("rotation_"):
            channels.setdefault((bone, channel), {})[fcurve.array_index] = fcurve.evaluate(frame)
    rotations: dict[int, Any] = {}
    for name, index in entry.index.items():
        mode = obj.pose.bones[name].rotation_mode
        path = ROTATION_PATHS.get(mode, "rotation_euler")
        values = channels.get((name, path))
        if values is None:
            continue
        if mode == "QUATERNION":
            q = Quaternion([values.get(i, 1.0 if i == 0 else 0.0) for i in range(4)])
        elif mode == "AXIS_ANGLE":
            angle, *axis = (values.get(i, 1.0 if i == 2 else 0.0) for i in range(4))
            q = Quaternion(axis, angle)
        else:
            q = Euler([values.get(i, 0.0) for i in range(3)], mode).to_quaternion()
        rotations[index] = q.normalized()
    return rotations


def set_reference(solver: Any, obj: bpy.types.Object, entry: RigEntry, current: np.ndarray) -> None:
    """Gives a tension solver relaxing towards a stored pose that pose: the reference
    action's rotations at its frame for the bones it keys, `current` (n x 4) for the rest."""
    settings = obj.tendon
    if settings.solver != "TENSION" or settings.tension_reference != "ACTION":
        return
    action = settings.reference_action
    if action is None:
        raise TendonUserError(f"Armature '{obj.name}': relaxing towards a stored pose needs a reference action")
    reference = np.array(current, np.float32)
    keyed = action_rotations(obj, entry, action, settings.reference_frame)
    if not keyed:
        raise TendonUserError(
            f"Armature '{obj.name}': the reference action '{action.name}' keys no rotation of this armature's bones"
        )
    for index, q in keyed.items():
        reference[index] = tuple(q)
    if not np.isfinite(reference).all():
        raise TendonUserError(f"Armature '{obj.name}': the reference action '{action.name}' holds non-finite rotations")
    solver.set_reference_pose(entry.rig, reference)


@dataclass
class SolveOutcome:
    """What a solve did, for the operator's report and the panel."""

    goals: int
    reached: bool
    residual: float
    iterations: int
    bones_written: int
    seconds: float
    warnings: list[str]
    #: What each effector must achieve in the pose Blender shows.
    checks: list[chains.Check] = field(default_factory=list)
    #: Names of the pose bones the solve could turn.
    moving: list[str] = field(default_factory=list)
    #: Whether `reached` and `residual` were measured in Blender's evaluated pose (else
    #: they are the solver's, in Tendon's model of the rig).
    measured: bool = False

    def measure(self, obj: bpy.types.Object) -> None:
        """Takes `reached` and `residual` from the pose Blender evaluated (call after the
        depsgraph update): a status never claims more than the user can see."""
        reached, largest = chains.measure(obj, self.checks)
        if not reached:
            notes = chains.miss_notes(obj, self.moving)
            if self.reached and not notes:
                notes = [
                    "Blender's evaluated pose differs from the solved one: "
                    "something Tendon does not model moves a chain"
                ]
            self.warnings = [*self.warnings, *notes]
        self.reached, self.residual, self.measured = reached, largest, True

    def summary(self) -> str:
        state = "reached" if self.reached else "not reached"
        where = " in Blender's pose" if self.measured else ""
        return (
            f"{self.goals} effector(s) {state}{where} (largest error {self.residual:.2g}) in "
            f"{self.iterations} iteration(s); {self.bones_written} bone(s) posed "
            f"in {self.seconds * 1000:.2f} ms"
        )

    def status(self) -> str:
        """The summary and the warnings, for the panel's status line."""
        return "; ".join([self.summary(), *self.warnings])


def solve(obj: bpy.types.Object) -> SolveOutcome:
    """Solves armature `obj`'s effectors from its current pose and writes the rotations of
    the bones that moved. Raises TendonUserError, leaving the pose untouched, when nothing
    can be solved."""
    started = time.perf_counter()
    problem = armature_problem(obj, need_pose_mode=False)
    if problem:
        raise TendonUserError(problem)
    tendon = native()
    entry = read_rig(obj)
    found = build_goals(obj, entry)
    if not found.goals:
        reasons = "; ".join(found.warnings) or "add an effector first"
        raise TendonUserError(f"Armature '{obj.name}' has no effector to solve: {reasons}")
    solver = solver_for(obj.tendon)
    channels = read_pose(obj, entry)
    evaluated, (rotations, translations, scales) = evaluated_pose(obj, entry)
    moving = drop_unsolvable(obj, entry, found, rotations, channels[0])
    if not found.goals:
        raise TendonUserError(f"Armature '{obj.name}' has no effector to solve: {'; '.join(found.warnings)}")
    # The bones the solve turns start from their own channels (exact, and current even
    # before Blender evaluates them); every other bone from where Blender puts it.
    for start, own in zip((rotations, translations, scales), channels, strict=True):
        start[moving] = own[moving]
    plans = scale_targets(obj, entry, found)
    if plans:
        # Scale first, as the guide advises: the positions then reach with the new lengths.
        goals = np.array([target_scale(obj, obj.tendon.effectors[p.effector]) for p in plans], np.float32)
        scales = scales.copy()
        apply_scales(plans, goals, scales)
        write_scales(obj, entry, {b for p in plans for b in p.bones}, scales)
    set_reference(solver, obj, entry, rotations)
    try:
        result = solver.solve(entry.rig, found.goals, rotations, translations, scales)
    except tendon.TendonError as error:
        raise TendonUserError(f"Armature '{obj.name}': {error}") from error
    solved = result.rotations
    if not np.isfinite(solved).all():
        raise TendonUserError(f"Armature '{obj.name}': the solver produced non-finite rotations; pose unchanged")
    # Only the chains' bones are written: the others hold Blender's evaluated pose.
    changed = [bone for bone in moving if np.abs(solved[bone] - rotations[bone]).max() > UNCHANGED]
    write_rotations(obj, entry, changed, solved)
    # A root moved by `move_root`: its location channels.
    moved = np.nonzero(np.abs(result.translations - translations).max(axis=1) > UNCHANGED)[0]
    for bone in moved:
        obj.pose.bones[int(entry.pose_order[bone])].location = result.translations[bone]
    return SolveOutcome(
        goals=len(found.goals),
        reached=bool(result.reached),
        residual=float(result.residual),
        iterations=int(result.iterations),
        bones_written=len(set(changed) | set(moved)),
        seconds=time.perf_counter() - started,
        warnings=found.warnings,
        checks=effector_checks(obj, entry, found, evaluated),
        moving=[entry.names[bone] for bone in moving],
    )


#: Blender evaluates the pose in float32 along another path than Tendon's: a solved point
#: lands a few 1e-7 of its chain's length from where Tendon put it. Measured in Blender's
#: pose, an effector counts as reached within the solver's tolerance plus this much.
MEASURE_SLACK = 2e-6


def effector_checks(
    obj: bpy.types.Object, entry: RigEntry, found: GoalSet, evaluated: np.ndarray
) -> list[chains.Check]:
    """What each solved effector must achieve in Blender's pose: its target within the
    solver's tolerance of its chain's length."""
    relative = obj.tendon.tolerance + MEASURE_SLACK
    checks = []
    for goal, position, (bone, length) in zip(found.goals, found.effectors, found.chains, strict=True):
        effector = obj.tendon.effectors[position]
        chain = chain_bones(entry, bone, length)
        reach = chains.chain_reach(evaluated, entry.lengths, chain, effector.use_tail)
        checks.append(chains.Check(effector.bone, effector.use_tail, tuple(goal.target), relative * max(reach, 1e-9)))
    return checks


def rotation_channels_of(pose_bone: bpy.types.PoseBone, mode: str) -> tuple[float, ...]:
    if mode == "QUATERNION":
        return tuple(pose_bone.rotation_quaternion)
    if mode == "AXIS_ANGLE":
        return tuple(pose_bone.rotation_axis_angle)
    return tuple(pose_bone.rotation_euler)


def set_rotation_channels(pose_bone: bpy.types.PoseBone, mode: str, values: Any) -> None:
    if mode == "QUATERNION":
        pose_bone.rotation_quaternion = values
    elif mode == "AXIS_ANGLE":
        pose_bone.rotation_axis_angle = values
    else:
        pose_bone.rotation_euler = values


def write_rotations(obj: bpy.types.Object, entry: RigEntry, bones: Any, rotations: np.ndarray) -> None:
    """Writes the local rotations of `bones` (rig indices) in each bone's rotation mode,
    each value nearest the bone's current one (no Euler flips, no quaternion sign jumps)."""
    tendon = native()
    pose_bones = obj.pose.bones
    by_mode: dict[str, list[int]] = {}
    for bone in bones:
        pose_bone = pose_bones[int(entry.pose_order[bone])]
        by_mode.setdefault(pose_bone.rotation_mode, []).append(int(bone))
    for mode, members in by_mode.items():
        targets = [pose_bones[int(entry.pose_order[bone])] for bone in members]
        previous = np.array([rotation_channels_of(pb, mode) for pb in targets], np.float32)
        channels = tendon.rotation_channels(rotations[members], mode, previous)
        for pose_bone, values in zip(targets, channels, strict=True):
            set_rotation_channels(pose_bone, mode, values)


def write_scales(obj: bpy.types.Object, entry: RigEntry, bones: set[int], scales: np.ndarray) -> None:
    for bone in bones:
        obj.pose.bones[int(entry.pose_order[bone])].scale = scales[bone]


def reset_chains(obj: bpy.types.Object) -> int:
    """Puts the bones the enabled effectors move back to their rest rotation. Returns how
    many bones were reset."""
    entry = read_rig(obj)
    bones: set[int] = set()
    for effector in obj.tendon.effectors:
        bone = entry.index.get(effector.bone)
        if effector.enabled and bone is not None:
            bones.update(chain_bones(entry, bone, effector.chain_length))
    pose_bones = obj.pose.bones
    for bone in bones:
        pose_bone = pose_bones[int(entry.pose_order[bone])]
        mode = pose_bone.rotation_mode
        set_rotation_channels(pose_bone, mode, REST_CHANNELS.get(mode, (0.0, 0.0, 0.0)))
    return len(bones)


# --- Baking -------------------------------------------------------------------------------


@dataclass
class BakeSettings:
    """What `Baker` bakes and where the keys go."""

    frame_start: int
    frame_end: int
    step: int = 1
    #: Key every bone (True) or only the bones the effectors' chains move.
    all_bones: bool = False
    #: Keys go into a new action (a copy of the current one) or replace the baked range
    #: and channels of the current action.
    new_action: bool = True
    #: Each frame starts from the previous frame's solution (True) or from the animated pose.
    path_dependent: bool = True
    interpolation: str = "LINEAR"


@dataclass
class BakeOutcome:
    frames: int
    bones: int
    keys: int
    seconds: float
    sampling: str
    frames_reached: int
    largest_error: float
    action: str
    warnings: list[str]

    def summary(self) -> str:
        return (
            f"Baked {self.frames} frame(s) of {self.bones} bone(s) into '{self.action}': {self.keys} keys "
            f"in {self.seconds:.2f} s ({self.sampling}); targets reached on {self.frames_reached} frame(s), "
            f"largest error {self.largest_error:.2g}"
        )


#: Frames sampled per step when the scene is evaluated frame by frame (a progress tick).
SAMPLE_CHUNK = 25


class Baker:
    """Bakes an armature's effectors over a frame range, in steps the UI can show and
    cancel: `step()` samples the targets (and, when needed, the animated pose) a chunk of
    frames at a time, `finish()` solves every frame in one native call and writes the keys,
    `cancel()` puts the scene back. Nothing in the file changes before `finish()`."""

    def __init__(self, scene: bpy.types.Scene, obj: bpy.types.Object, settings: BakeSettings) -> None:
        problem = armature_problem(obj, need_pose_mode=False)
        if problem:
            raise TendonUserError(problem)
        if settings.step < 1:
            raise TendonUserError(f"Frame step {settings.step} must be at least 1")
        self.frames = np.arange(settings.frame_start, settings.frame_end + 1, settings.step)
        if len(self.frames) == 0:
            raise TendonUserError(
                f"Frame range {settings.frame_start} to {settings.frame_end} is empty: "
                "the start frame is after the end frame"
            )
        self.started = time.perf_counter()
        self.scene, self.obj, self.settings = scene, obj, settings
        self.original_frame = (scene.frame_current, scene.frame_subframe)
        self.entry = read_rig(obj)
        self.found = build_goals(obj, self.entry)
        if self.found.goals:
            # The same refusals as a single solve, judged at the current frame.
            _, (evaluated_rotations, _, _) = evaluated_pose(obj, self.entry)
            drop_unsolvable(obj, self.entry, self.found, evaluated_rotations, read_pose(obj, self.entry)[0])
        self.springs = spring_chains(obj, self.entry, self.found.warnings)
        if not self.found.goals and not self.springs:
            reasons = "; ".join(self.found.warnings) or "add an effector or a spring chain first"
            raise TendonUserError(f"Armature '{obj.name}' has nothing to bake: {reasons}")
        self.solver = solver_for(obj.tendon)
        if self.found.goals:
            set_reference(self.solver, obj, self.entry, read_pose(obj, self.entry)[0])
        chains: set[int] = set()
        for bone, chain_length in self.found.chains:
            chains.update(chain_bones(self.entry, bone, chain_length))
        for spring in self.springs:
            chains.update(spring.bones)
        self.scale_plans = scale_targets(obj, self.entry, self.found)
        self.scaled = sorted({b for plan in self.scale_plans for b in plan.bones})
        self.keyed = list(range(len(self.entry.names))) if settings.all_bones else sorted(chains)
        affecting = set()
        for bone in chains:
            affecting.update(chain_bones(self.entry, bone, 0))
        self.slow_reason = self.needs_scene_evaluation(affecting)
        frames, goals, n = len(self.frames), len(self.found.goals), len(self.entry.names)
        effectors = [obj.tendon.effectors[i] for i in self.found.effectors]
        self.effectors = effectors
        self.targets = np.zeros((frames, goals, 3), np.float32)
        self.uses_rotation = any(g.rotation is not None for g in self.found.goals)
        self.uses_pole = any(g.pole is not None for g in self.found.goals)
        self.rotation_targets = np.tile(np.array([1, 0, 0, 0], np.float32), (frames, goals, 1))
        self.poles = np.zeros((frames, goals, 3), np.float32)
        self.scale_goals = np.ones((frames, len(self.scale_plans), 3), np.float32)
        self.per_frame_pose = self.slow_reason is not None
        if self.per_frame_pose:
            self.basis = np.empty((frames, n * 16), np.float32)
        self.static_pose = read_pose(obj, self.entry)
        self.sampled = 0
        #: Rotations of bones scaled to zero on an axis, from their channels: (frame index,
        #: bone) -> (w, x, y, z) (see `collapsed_rotations`).
        self.collapsed: dict[tuple[int, int], tuple[float, ...]] = {}
        #: Bones whose translation the solve changed (a root with `move_root`).
        self.moved: list[int] = []

    # The fast path reads target F-curves directly; anything it cannot see through (parents,
    # constraints, drivers, NLA, animated chains) makes the bake evaluate the scene per frame.
    def needs_scene_evaluation(self, affecting: set[int]) -> str | None:
        obj = self.obj
        if obj.parent is not None or len(obj.constraints):
            return f"armature '{obj.name}' has a parent or constraints"
        reason = animation_reason(obj, allowed_paths=())
        if reason:
            animated_bones = animated_pose_bones(obj)
            names = {self.entry.names[i] for i in affecting}
            if reason != "pose bones" or (self.settings.all_bones and animated_bones) or animated_bones & names:
                return f"armature '{obj.name}' is animated ({reason})"
        for position in self.found.effectors:
            effector = obj.tendon.effectors[position]
            for target, subtarget in target_objects(effector):
                if subtarget and target.type == "ARMATURE":
                    return f"a target is the bone '{subtarget}'"
                if target.parent is not None or len(target.constraints):
                    return f"target '{target.name}' has a parent or constraints"
                if (
                    any(target.delta_location)
                    or any(target.delta_rotation_euler)
                    or target.delta_scale[:]
                    != (
                        1.0,
                        1.0,
                        1.0,
                    )
                ):
                    return f"target '{target.name}' has delta transforms"
                allowed = ("location", "scale") if effector.use_rotation or effector.use_scale else ("location",)
                reason = animation_reason(target, allowed_paths=allowed)
                if reason:
                    return f"target '{target.name}' is animated ({reason})"
        return None

    @property
    def sampling(self) -> str:
        if self.slow_reason:
            return f"scene evaluated per frame: {self.slow_reason}"
        return "target F-curves read directly"

    def step(self) -> float:
        """Samples the next chunk of frames; returns the fraction sampled so far."""
        with live_suspended():
            if self.per_frame_pose:
                self.sample_scene(self.sampled, min(self.sampled + SAMPLE_CHUNK, len(self.frames)))
            else:
                self.sample_fcurves()
        return self.sampled / len(self.frames)

    def sample_fcurves(self) -> None:
        to_armature = np.array(to_armature_space(self.obj), np.float32)
        for k, effector in enumerate(self.effectors):
            goal = self.found.goals[k]
            self.targets[:, k] = (
                object_locations(effector.target, self.frames) @ to_armature[:3, :3].T + to_armature[:3, 3]
            )
            if goal.rotation is not None:
                self.rotation_targets[:, k] = goal.rotation
            if goal.pole is not None:
                pole = object_locations(effector.pole_target, self.frames)
                self.poles[:, k] = pole @ to_armature[:3, :3].T + to_armature[:3, 3]
        armature_scale = np.array(self.obj.matrix_world.to_scale(), np.float32)
        for k, plan in enumerate(self.scale_plans):
            target = self.obj.tendon.effectors[plan.effector].target
            self.scale_goals[:, k] = object_channel(target, "scale", self.frames) / armature_scale
        self.sampled = len(self.frames)

    def sample_scene(self, first: int, end: int) -> None:
        obj, scene = self.obj, self.scene
        for t in range(first, end):
            scene.frame_set(int(self.frames[t]))
            to_armature = to_armature_space(obj, int(self.frames[t]))
            for k, effector in enumerate(self.effectors):
                goal = self.found.goals[k]
                label = effector_label(self.found.effectors[k], effector.bone)
                matrix = to_armature @ target_world_matrix(effector.target, effector.subtarget, label)
                self.targets[t, k] = matrix.translation
                if goal.rotation is not None:
                    self.rotation_targets[t, k] = matrix.to_quaternion()
                if goal.pole is not None:
                    pole = to_armature @ target_world_matrix(effector.pole_target, effector.pole_subtarget, label)
                    self.poles[t, k] = pole.translation
            for k, plan in enumerate(self.scale_plans):
                self.scale_goals[t, k] = target_scale(obj, obj.tendon.effectors[plan.effector])
            obj.pose.bones.foreach_get("matrix_basis", self.basis[t])
            matrices = self.basis[t].reshape(-1, 4, 4)
            matrices = matrices if self.entry.pose_in_order else matrices[self.entry.pose_order]
            for bone, rotation in collapsed_rotations(obj, self.entry, matrices).items():
                self.collapsed[(t, bone)] = rotation
        self.sampled = end

    def solve(self) -> Any:
        tendon = native()
        extra: dict[str, Any] = {}
        if self.uses_rotation:
            extra["rotation_targets"] = self.rotation_targets
        if self.uses_pole:
            extra["poles"] = self.poles
        pose = self.frame_poses()
        self.pose = pose
        try:
            return self.solver.solve_frames(
                self.entry.rig,
                self.found.goals,
                self.targets,
                *pose,
                warm=self.settings.path_dependent,
                **extra,
            )
        except tendon.TendonError as error:
            raise TendonUserError(f"Armature '{self.obj.name}': {error}") from error

    def frame_poses(self) -> tuple[np.ndarray, ...]:
        """The start pose: one, or one per frame (animated, or with scale targets applied)."""
        tendon = native()
        n, frames = len(self.entry.names), len(self.frames)
        if self.per_frame_pose:
            matrices = self.basis.reshape(frames * n, 4, 4)
            rotations, translations, scales = tendon.matrices_to_transforms(matrices, column_major=True)
            pose = (rotations.reshape(frames, n, 4), translations.reshape(frames, n, 3), scales.reshape(frames, n, 3))
            if not self.entry.pose_in_order:
                pose = tuple(array[:, self.entry.pose_order] for array in pose)
            for (t, bone), rotation in self.collapsed.items():
                pose[0][t, bone] = rotation
        elif self.scale_plans or self.springs:
            pose = tuple(np.repeat(array[None], frames, axis=0) for array in self.static_pose)
        else:
            return self.static_pose
        if self.scale_plans:
            scales = pose[2].copy()
            for t in range(frames):
                apply_scales(self.scale_plans, self.scale_goals[t], scales[t])
            pose = (pose[0], pose[1], scales)
        return pose

    def simulate_springs(self, rotations: np.ndarray) -> np.ndarray:
        """Runs each spring chain through the frame range on top of the solved pose."""
        if not self.springs:
            return rotations
        tendon, scene = native(), self.scene
        fps = scene.render.fps / scene.render.fps_base
        dt = self.settings.step / fps
        gravity = scene.gravity if scene.use_gravity else (0.0, 0.0, 0.0)
        to_armature = to_armature_space(self.obj).to_3x3()
        _, translations, scales = self.pose
        for spring in self.springs:
            item = self.obj.tendon.springs[spring.item]
            armature_gravity = to_armature @ (Vector(gravity) * item.gravity)
            try:
                simulation = tendon.SpringSimulation(
                    self.entry.rig,
                    [(spring.tip, spring.chain_length, [item.mass] * len(spring.bones))],
                    gravity=tuple(armature_gravity),
                    damping=item.damping,
                    stiffness=item.stiffness,
                )
                rotations = simulation.simulate(rotations, dt, translations, scales)
            except tendon.TendonError as error:
                raise TendonUserError(f"Spring chain of bone '{item.bone}': {error}") from error
        return rotations

    def finish(self) -> BakeOutcome:
        """Solves every frame in one call and writes the keys."""
        while self.sampled < len(self.frames):
            self.step()
        if self.per_frame_pose:
            self.restore_frame()
        if self.found.goals:
            result = self.solve()
            reached, largest = int(np.count_nonzero(result.reached)), float(result.residual.max())
            solved = result.rotations
            if self.obj.tendon.move_root:
                # The root's solved translations feed the springs and are keyed.
                translations = result.translations
                start = self.pose[1] if self.pose[1].ndim == 3 else np.broadcast_to(self.pose[1], translations.shape)
                self.moved = sorted(np.nonzero(np.abs(translations - start).max(axis=(0, 2)) > UNCHANGED)[0].tolist())
                self.pose = (self.pose[0], translations, self.pose[2])
        else:
            self.pose = self.frame_poses()
            reached, largest, solved = len(self.frames), 0.0, self.pose[0]
        solved = self.simulate_springs(solved)
        if not np.isfinite(solved).all():
            raise TendonUserError(
                f"Armature '{self.obj.name}': the solver produced non-finite rotations; nothing baked"
            )
        obj, tendon = self.obj, native()
        action, slot, _old = bake.prepare_action(obj, self.settings.new_action)
        frames = self.frames.astype(np.float32)
        span = (float(self.frames[0]), float(self.frames[-1]))
        interpolation = self.settings.interpolation
        keys = 0
        for bone in self.keyed:
            pose_bone = obj.pose.bones[int(self.entry.pose_order[bone])]
            mode = pose_bone.rotation_mode
            previous = np.array([rotation_channels_of(pose_bone, mode)], np.float32)
            channels = tendon.rotation_channels(solved[:, bone], mode, previous, series=True)
            keys += bake.write_bone_channels(
                action, slot, pose_bone.name, bake.rotation_channel(mode), frames, channels, interpolation, span
            )
        for bone in self.moved:
            pose_bone = obj.pose.bones[int(self.entry.pose_order[bone])]
            keys += bake.write_bone_channels(
                action, slot, pose_bone.name, "location", frames, self.pose[1][:, bone], interpolation, span
            )
        scales = self.pose[2]
        for bone in self.scaled:
            pose_bone = obj.pose.bones[int(self.entry.pose_order[bone])]
            keys += bake.write_bone_channels(
                action, slot, pose_bone.name, "scale", frames, scales[:, bone], interpolation, span
            )
        self.restore_frame()
        return BakeOutcome(
            frames=len(self.frames),
            bones=len(set(self.keyed) | set(self.scaled) | set(self.moved)),
            keys=keys,
            seconds=time.perf_counter() - self.started,
            sampling=self.sampling,
            frames_reached=reached,
            largest_error=largest,
            action=action.name,
            warnings=self.found.warnings,
        )

    def restore_frame(self) -> None:
        with live_suspended():
            self.scene.frame_set(self.original_frame[0], subframe=self.original_frame[1])

    def cancel(self) -> None:
        """Leaves the scene as it was (nothing was written)."""
        # A frame refused mid-chunk leaves `sampled` behind the frame the scene is on.
        if self.per_frame_pose and (self.sampled or self.scene.frame_current != self.original_frame[0]):
            self.restore_frame()


def animated_pose_bones(obj: bpy.types.Object) -> set[str]:
    """Names of the pose bones the object's action animates."""
    names = set()
    for fcurve in bake.fcurves_of(obj) or ():
        if fcurve.data_path.startswith('pose.bones["'):
            names.add(fcurve.data_path[len('pose.bones["') :].split('"]', 1)[0])
    return names


def animation_reason(id_data: bpy.types.ID, allowed_paths: tuple[str, ...]) -> str | None:
    """Why `id_data`'s animation is more than F-curves on `allowed_paths` of its own
    action ("pose bones" when the only extra curves animate pose bones), or None."""
    anim = id_data.animation_data
    if anim is None:
        return None
    if len(anim.drivers):
        return "drivers"
    if any(not track.mute for track in anim.nla_tracks):
        return "NLA tracks"
    other = [fc.data_path for fc in bake.fcurves_of(id_data) or () if fc.data_path not in allowed_paths]
    if not other:
        return None
    if all(path.startswith("pose.bones[") for path in other):
        return "pose bones"
    return f"'{other[0]}'"


def object_channel(obj: bpy.types.Object, channel: str, frames: np.ndarray) -> np.ndarray:
    """An object's `location` or `scale` at each frame, (frames, 3), from its F-curves."""
    values = np.tile(np.array(getattr(obj, channel), np.float32), (len(frames), 1))
    for axis in range(3):
        fcurve = bake.find_fcurve(obj, channel, axis)
        if fcurve is not None and not fcurve.mute:
            values[:, axis] = sample_fcurve(fcurve, frames)
    return values


def sample_fcurve(fcurve: bpy.types.FCurve, frames: np.ndarray) -> np.ndarray:
    """An F-curve's values at `frames`: in one native call when the curve is plain keys
    (constant, linear or Bezier, constant extrapolation, no modifiers), else through
    Blender's own evaluation frame by frame."""
    points = fcurve.keyframe_points
    plain = not len(fcurve.modifiers) and fcurve.extrapolation == "CONSTANT" and len(points)
    if plain:
        arrays = bake.key_arrays(points)
        if np.isin(arrays["interpolation"], bake.PLAIN_INTERPOLATIONS).all():
            return native().evaluate_fcurve(
                arrays["co"], arrays["handle_left"], arrays["handle_right"], arrays["interpolation"], frames
            )
    return np.array([fcurve.evaluate(float(frame)) for frame in frames], np.float32)


def object_locations(obj: bpy.types.Object, frames: np.ndarray) -> np.ndarray:
    """An unparented object's location at each frame, (frames, 3), from its F-curves."""
    return object_channel(obj, "location", frames)


@dataclass
class SpringPlan:
    """An enabled spring chain whose bones exist."""

    item: int
    tip: int
    chain_length: int
    bones: list[int]


def spring_chains(obj: bpy.types.Object, entry: RigEntry, warnings: list[str]) -> list[SpringPlan]:
    """The armature's enabled spring chains; broken ones are named in `warnings`."""
    plans = []
    taken: set[int] = set()
    for position, item in enumerate(obj.tendon.springs):
        if not item.enabled:
            continue
        tip = entry.index.get(item.bone)
        label = f"spring chain {position + 1} ('{item.bone}')"
        if tip is None:
            warnings.append(f"{label}: armature '{obj.name}' has no bone '{item.bone}'; skipped")
            continue
        bones = chain_bones(entry, tip, item.chain_length)
        if taken & set(bones):
            warnings.append(f"{label} shares bones with another spring chain; skipped")
            continue
        taken.update(bones)
        plans.append(SpringPlan(position, tip, len(bones), bones))
    return plans


# --- Live mode ----------------------------------------------------------------------------

_live_signatures: dict[int, tuple[Any, ...]] = {}
#: Live solves not yet measured in Blender's evaluated pose (pointer -> outcome).
_live_unmeasured: dict[int, SolveOutcome] = {}


def set_status(obj: bpy.types.Object, status: str) -> None:
    # Writing an unchanged value would still tag the object for another update.
    if obj.tendon.status != status:
        obj.tendon.status = status


_live_busy = False
#: Seconds the last live update of each armature took (pointer -> seconds), for the panel.
live_timings: dict[int, float] = {}


def live_signature(obj: bpy.types.Object) -> tuple[Any, ...]:
    """Everything a live solve depends on that moves: the armature's and targets' matrices,
    the mode, and whether each effector's bone exists (a bone renamed or deleted in Edit
    Mode is reported when Pose Mode returns, not when a target next moves)."""
    values: list[Any] = [obj.mode]
    for row in obj.matrix_world:
        values.extend(row)
    bones = obj.data.bones
    for effector in obj.tendon.effectors:
        if not effector.enabled:
            continue
        values.append(effector.bone in bones)
        for target, subtarget in target_objects(effector):
            try:
                matrix = target_world_matrix(target, subtarget, "")
            except TendonUserError:
                continue
            for row in matrix:
                values.extend(row)
    return tuple(values)


def live_update(scene: bpy.types.Scene, force: bool = False) -> None:
    """Re-solves each live armature of `scene` whose targets moved. Never raises: problems
    go to the armature's status line."""
    global _live_busy
    if _live_busy:
        return
    _live_busy = True
    try:
        for obj in scene.objects:
            if obj.type != "ARMATURE" or not obj.tendon.live or obj.library is not None:
                continue
            key = obj.as_pointer()
            if obj.mode == "EDIT":
                # The bones being edited are not the armature's bones until Edit Mode ends.
                _live_signatures.pop(key, None)
                _live_unmeasured.pop(key, None)
                set_status(obj, "Live: paused in Edit Mode")
                continue
            signature = live_signature(obj)
            if not force and _live_signatures.get(key) == signature:
                # The update that follows a live solve: measure it in the pose Blender shows.
                outcome = _live_unmeasured.pop(key, None)
                if outcome is not None:
                    outcome.measure(obj)
                    set_status(obj, "Live: " + outcome.status())
                continue
            _live_signatures[key] = signature
            started = time.perf_counter()
            try:
                outcome = solve(obj)
                _live_unmeasured[key] = outcome
                status = "Live: " + outcome.status()
            except TendonUserError as problem:
                _live_unmeasured.pop(key, None)
                status = f"Live: {problem}"
            live_timings[key] = time.perf_counter() - started
            set_status(obj, status)
    finally:
        _live_busy = False


class live_suspended:  # noqa: N801 (used as a context manager, like a function)
    """Live mode does nothing inside this block (baking changes frames on purpose)."""

    def __enter__(self) -> None:
        global _live_busy
        self.was_busy = _live_busy
        _live_busy = True

    def __exit__(self, *_exc: object) -> None:
        global _live_busy
        _live_busy = self.was_busy


@bpy.app.handlers.persistent
def on_depsgraph_update(scene: bpy.types.Scene, _depsgraph: Any = None) -> None:
    live_update(scene)


@bpy.app.handlers.persistent
def on_frame_change(scene: bpy.types.Scene, _depsgraph: Any = None) -> None:
    live_update(scene)


@bpy.app.handlers.persistent
def on_load(_filepath: Any = None, _unused: Any = None) -> None:
    clear_caches()


HANDLERS = (
    (bpy.app.handlers.depsgraph_update_post, on_depsgraph_update),
    (bpy.app.handlers.frame_change_post, on_frame_change),
    (bpy.app.handlers.load_post, on_load),
)


def register() -> None:
    for handlers, handler in HANDLERS:
        if handler not in handlers:
            handlers.append(handler)


def unregister() -> None:
    for handlers, handler in HANDLERS:
        while handler in handlers:
            handlers.remove(handler)
    clear_caches()
