"""The one module that talks to both Blender and Tendon's native solvers.

Blender arrays go in bulk (``foreach_get``) into numpy float32, through one native call,
and back into the pose bones in each bone's own rotation mode. No maths here: the native
library decomposes matrices and converts rotations into channels.
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import bpy
import numpy as np
from mathutils import Matrix

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


def clear_caches() -> None:
    """Forgets cached rigs and live-mode state (after loading a file)."""
    _rigs.clear()
    _solvers.clear()
    _live_signatures.clear()


def limits_json(obj: bpy.types.Object) -> str | None:
    """The pose bones' Tendon limits as the native library's JSON (None when no bone has any)."""
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
        if axes:
            limits[pose_bone.name] = {"order": settings.euler_order, **axes}
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
    limits = limits_json(obj)
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
    return native().matrices_to_transforms(matrices, column_major=True)


def chain_bones(entry: RigEntry, bone: int, chain_length: int) -> list[int]:
    """The effector bone and the ancestors its chain may turn (chain length 0: to the root)."""
    chain = []
    while bone >= 0 and (chain_length == 0 or len(chain) < chain_length):
        chain.append(bone)
        bone = entry.parents[bone]
    return chain


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


def effector_label(position: int, bone: str) -> str:
    return f"effector {position + 1} ('{bone}')" if bone else f"effector {position + 1} (no bone set)"


def target_world_matrix(target: bpy.types.Object, subtarget: str, label: str) -> Matrix:
    """World matrix of a target object, or of a bone of a target armature (at its head)."""
    if subtarget and target.type == "ARMATURE":
        pose_bone = target.pose.bones.get(subtarget)
        if pose_bone is None:
            raise TendonUserError(f"{label}: bone '{subtarget}' not found in armature '{target.name}'")
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
    to_armature = obj.matrix_world.inverted_safe()
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
    return found


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
        raise TendonUserError(f"{label}: armature '{obj.name}' has no bone '{effector.bone}'")
    if effector.target is None:
        raise TendonUserError(f"{label} has no target object")
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
    key = (name, tuple(sorted(options.items())))
    solver = _solvers.get(key)
    if solver is None:
        try:
            solver = tendon.Solver(name, **options)
        except tendon.TendonError as error:
            raise TendonUserError(f"Solver settings: {error}") from error
        _solvers[key] = solver
    return solver


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

    def summary(self) -> str:
        state = "reached" if self.reached else "not reached"
        return (
            f"{self.goals} effector(s) {state} (largest error {self.residual:.2g}) in "
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
    rotations, translations, scales = read_pose(obj, entry)
    try:
        result = solver.solve(entry.rig, found.goals, rotations, translations, scales)
    except tendon.TendonError as error:
        raise TendonUserError(f"Armature '{obj.name}': {error}") from error
    solved = result.rotations
    if not np.isfinite(solved).all():
        raise TendonUserError(f"Armature '{obj.name}': the solver produced non-finite rotations; pose unchanged")
    changed = np.nonzero(np.abs(solved - rotations).max(axis=1) > UNCHANGED)[0]
    write_rotations(obj, entry, changed, solved)
    return SolveOutcome(
        goals=len(found.goals),
        reached=bool(result.reached),
        residual=float(result.residual),
        iterations=int(result.iterations),
        bones_written=len(changed),
        seconds=time.perf_counter() - started,
        warnings=found.warnings,
    )


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


# --- Live mode ----------------------------------------------------------------------------

_live_signatures: dict[int, tuple[float, ...]] = {}
_live_busy = False
#: Seconds the last live update of each armature took (pointer -> seconds), for the panel.
live_timings: dict[int, float] = {}


def live_signature(obj: bpy.types.Object) -> tuple[float, ...]:
    """Everything a live solve depends on that moves: the armature's and targets' matrices."""
    values: list[float] = []
    for row in obj.matrix_world:
        values.extend(row)
    for effector in obj.tendon.effectors:
        if not effector.enabled:
            continue
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
            signature = live_signature(obj)
            if not force and _live_signatures.get(key) == signature:
                continue
            _live_signatures[key] = signature
            started = time.perf_counter()
            try:
                outcome = solve(obj)
                status = "Live: " + outcome.status()
            except TendonUserError as problem:
                status = f"Live: {problem}"
            live_timings[key] = time.perf_counter() - started
            if obj.tendon.status != status:
                obj.tendon.status = status
    finally:
        _live_busy = False


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
