"""The rig cache: each armature's native rig, its bones' names, parents, lengths and limits,
and the bone facts the refusals need (which bones carry constraints or drivers, which do not
inherit rotation or inherit scale other than fully), built once and reused until an event
says they changed:

- a bone's Tendon limits changed (the limit properties' update callbacks);
- the armature's bones changed: Blender rebuilds the dependency graph's relations (Edit
  Mode left, a bone parented, a constraint or driver added or removed: the scene shows up
  in ``depsgraph.updates``) or updates the armature's data without a transform (a bone
  renamed), or the bones' rest is not what the rig was built from when the armature's data
  is updated (applying the object's scale or rotation);
- a file was loaded, or undo or redo replaced the data.

What may change from one solve to the next without such an event (the pose, the armature's
and targets' transforms, constraint muting and influence, pose scale) is read in bulk at
each solve (``pose.py``, ``chains.py``), never cached here. An inheritance option changed
behind the add-on's back is caught by the catch-all check of where Blender really puts each
chain bone, or shows as "not reached" in the pose Blender evaluates.
"""

from __future__ import annotations

import contextlib
import json
import math
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

import bpy
import numpy as np

from . import chains, hooks, keys, native, props
from .native import TendonUserError

#: The most things a rig remembers (see `RigEntry.remember`).
MEMO_LIMIT = 512


@dataclass
class RigEntry:
    """A native rig built from an armature, and what maps between the two."""

    #: The armature data it was built from (checked at each use), and its bone count.
    data_pointer: int
    count: int
    rig: Any
    names: list[str]
    index: dict[str, int]
    parents: list[int]
    lengths: np.ndarray
    #: For each bone (in `names` order), its index in ``obj.pose.bones``.
    pose_order: np.ndarray
    #: True when ``obj.pose.bones`` lists the bones in `names` order.
    pose_in_order: bool
    #: Bones (rig indices) that carry constraints, muted or not: the only ones whose
    #: constraints a solve looks at (their muting and influence may be animated).
    constrained: frozenset[int]
    #: Bones an unmuted driver sets the rotation or location of -> that channel.
    driven: dict[int, str]
    #: Bones that do not inherit their parent's rotation.
    no_inherit_rotation: frozenset[int]
    #: Bones that inherit scale other than Full -> how (``Bone.inherit_scale``).
    inherit_scale: dict[int, str]
    #: Bones whose location channels move them in their parent's frame, not their own
    #: (``Bone.use_local_location`` off).
    parent_space_location: frozenset[int]
    #: Bones (rig indices) whose joint limits are their Limit Rotation constraints'
    #: (`limit_rotation_limits`): Blender's clamp and the solve's limits are the same.
    clamped_alike: frozenset[int] = frozenset()
    #: The Limit Rotation settings of the bones without Tendon limits, as read when built
    #: (`limit_rotation_signature`): compared at each solve, since editing a constraint
    #: gives no event the cache hears of.
    limit_rotation_bones: tuple[str, ...] = ()
    limit_rotation_state: tuple[Any, ...] = ()
    #: Every bone's ``matrix_local`` as read when built (n * 16, column by column): an
    #: update of the armature's data compares it (`rest_changed`), since applying the
    #: object's scale or rotation changes the rest with no other event the cache hears of.
    rest_local: np.ndarray = field(default_factory=lambda: np.zeros(0, np.float32))
    #: What solves work out from the rig and the effectors' settings alone (chains, the
    #: bones they move, ...), kept as long as the rig is: see `remember`.
    memo: dict[Any, Any] = field(default_factory=dict)

    def remember(self, key: Any, make: Callable[[], Any]) -> Any:
        """`make()`, worked out once per rig (and per `key`). Keys follow the effectors'
        settings, which a slider drag in live mode changes at every step: past
        `MEMO_LIMIT` entries the memo starts over (all of it can be worked out again)."""
        found = self.memo.get(key)
        if found is None:
            if len(self.memo) >= MEMO_LIMIT:
                self.memo.clear()
            found = self.memo[key] = make()
        return found

    @property
    def longest(self) -> float:
        """The longest bone's length."""
        return self.remember("longest", lambda: float(self.lengths.max()))

    def length(self, bone: int) -> float:
        return self.remember(("length", bone), lambda: float(self.lengths[bone]))

    def chain(self, bone: int, chain_length: int) -> list[int]:
        """The effector bone and the ancestors its chain may turn (chain length 0: to the
        root), effector first."""
        return self.remember(
            ("chain", bone, chain_length), lambda: chains.chain_bones(self.parents, bone, chain_length)
        )


#: (armature object pointer, with tension) -> entry.
_rigs: dict[tuple[int, bool], RigEntry] = {}


def clear() -> None:
    """Forgets every cached rig."""
    _rigs.clear()


#: How many times rigs were forgotten (limits or bones changed): live mode solves again.
generation = 0


def forget(obj: bpy.types.Object) -> None:
    """Forgets the rigs of armature `obj` (its limits changed)."""
    global generation
    generation += 1
    key = obj.as_pointer()
    _rigs.pop((key, False), None)
    _rigs.pop((key, True), None)


def is_default_tension(tension: list[dict[str, dict[str, float]]]) -> bool:
    """Whether a bone's tension settings are the native defaults (to float32 precision)."""
    threshold, rigidity = native.tension_defaults()
    default = {"threshold": threshold, "rigidity": rigidity}
    return all(
        abs(axis[side][key] - default[key]) < 1e-6
        for axis in tension
        for side in ("negative", "positive")
        for key in ("threshold", "rigidity")
    )


#: The Limit Rotation settings that decide its clamp (`limit_rotation_signature`).
LIMIT_ROTATION_KEYS = (
    "mute",
    "influence",
    "owner_space",
    "euler_order",
    "use_legacy_behavior",
    *(f"{kind}_{axis}" for axis in "xyz" for kind in ("use_limit", "min", "max")),
)


def limit_rotation_signature(obj: bpy.types.Object, names: tuple[str, ...]) -> tuple[Any, ...]:
    """The Limit Rotation settings of bones `names`, in one tuple to compare."""
    pose_bones = obj.pose.bones
    return tuple(
        tuple(getattr(constraint, key, None) for key in LIMIT_ROTATION_KEYS)
        for name in names
        for constraint in pose_bones[name].constraints
        if constraint.type == "LIMIT_ROTATION"
    )


def limit_rotation_limits(pose_bone: bpy.types.PoseBone, animated: set[str]) -> dict[str, Any] | None:
    """A bone's Limit Rotation constraints as joint limits (the native JSON), when the
    solve can hold the bone to exactly what they clamp it to: each unmuted one at full
    influence, in Local Space, not the legacy behaviour, in one Euler order, not animated
    (`animated`: the armature's animated data paths), ranges that overlap, and the order's
    middle axis held within +-90 degrees. Blender clamps the Euler angles it reads first;
    the joint limits take any of a rotation's two Euler forms that fits, and with the middle
    axis free a rotation Blender clamps has a second form that fits (a Z range of 100-170
    degrees: written at -16 and clamped, 1.5 m off; QA helper). None otherwise (the solve
    then says the constraint may clamp its answer)."""
    bone_order = pose_bone.rotation_mode if pose_bone.rotation_mode not in ("QUATERNION", "AXIS_ANGLE") else "XYZ"
    prefix = f'pose.bones["{bpy.utils.escape_identifier(pose_bone.name)}"].constraints'
    if any(path.startswith(prefix) for path in animated):
        return None
    ranges: dict[str, tuple[float, float]] = {}
    orders = set()
    for constraint in pose_bone.constraints:
        if constraint.type != "LIMIT_ROTATION" or constraint.mute:
            continue
        if (
            constraint.influence < 1.0
            or constraint.owner_space != "LOCAL"
            or getattr(constraint, "use_legacy_behavior", False)
        ):
            return None
        orders.add(bone_order if constraint.euler_order == "AUTO" else constraint.euler_order)
        for axis in "xyz":
            if getattr(constraint, f"use_limit_{axis}"):
                low, high = getattr(constraint, f"min_{axis}"), getattr(constraint, f"max_{axis}")
                if axis in ranges:
                    low, high = max(low, ranges[axis][0]), min(high, ranges[axis][1])
                ranges[axis] = (low, high)
    if not ranges or len(orders) != 1 or any(low > high for low, high in ranges.values()):
        return None
    order = orders.pop()
    middle = ranges.get(order[1].lower())
    if middle is None or middle[0] < -math.pi / 2 or middle[1] > math.pi / 2:
        return None
    return {
        "order": order,
        **{axis: {"mode": "range", "min": low, "max": high} for axis, (low, high) in ranges.items()},
    }


def unit_quaternion(values: list[float]) -> list[float]:
    """A quaternion setting normalised as Blender does for rotations: typed in one field at
    a time, it is rarely unit (a zero one is left for the library to name)."""
    length = math.sqrt(sum(v * v for v in values))
    return [v / length for v in values] if length > 1e-6 else values


def limits_json(obj: bpy.types.Object, with_tension: bool, clamped_alike: set[str] | None = None) -> str | None:
    """The pose bones' Tendon limits as the native library's JSON (None when no bone has
    any). Tension settings, which only the tension minimiser reads, only `with_tension`.
    A bone without Tendon limits whose Limit Rotation constraints the solve can model
    takes theirs (`limit_rotation_limits`; its name is added to `clamped_alike`): the solve
    wrote rotations the constraint then clamped, and every later solve refused the bone as
    "not where its own channels put it" (found by a QA helper). Read once per rig build,
    not per solve."""
    offsets = props.LIMIT_OFFSETS
    limits: dict[str, dict[str, Any]] = {}
    for pose_bone in obj.pose.bones:
        values = props.stored_limits(pose_bone.tendon)
        if values is None:
            continue
        value = {name: values[offset] for name, offset in offsets.items()}
        used = ["euler_order", "limit_roll", "limit_neutral"]
        used += [f"{bound}_{axis}" for axis in "xyz" if value[f"use_limit_{axis}"] for bound in ("min", "max")]
        if with_tension:
            used += [
                f"{kind}_{side}_{axis}"
                for kind in ("threshold", "rigidity")
                for side in ("negative", "positive")
                for axis in "xyz"
            ]
        for name in used:
            start = offsets[name]
            for number in values[start : start + (4 if name == "limit_neutral" else 1)]:
                if not math.isfinite(number):
                    raise TendonUserError(
                        f"Bone '{pose_bone.name}': its limit setting '{name}' is {number}: give it a number"
                    )
        axes: dict[str, Any] = {}
        for axis in "xyz":
            if value[f"lock_{axis}"]:
                axes[axis] = {"mode": "locked"}
            elif value[f"use_limit_{axis}"]:
                axes[axis] = {"mode": "range", "min": value[f"min_{axis}"], "max": value[f"max_{axis}"]}
        tension = (
            [
                {
                    side: {
                        "threshold": value[f"threshold_{side}_{axis}"],
                        "rigidity": value[f"rigidity_{side}_{axis}"],
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
        order = props.EULER_ITEMS[int(value["euler_order"])][0]
        if axes or order != props.EULER_ITEMS[0][0]:
            limits[pose_bone.name] = {"order": order, **axes}
            if value["limit_roll"]:
                limits[pose_bone.name]["roll"] = value["limit_roll"]
            frame = props.stored_limits(pose_bone.tendon, props.FRAME_STORE)
            if frame is not None and frame != [1.0, 0.0, 0.0, 0.0]:
                if not all(math.isfinite(v) for v in frame):
                    raise TendonUserError(
                        f"Bone '{pose_bone.name}': its limit setting 'limit_frame' is {frame}: give it numbers"
                    )
                limits[pose_bone.name]["frame"] = unit_quaternion(frame)
            start = offsets["limit_neutral"]
            neutral = values[start : start + 4]
            if neutral != [1.0, 0.0, 0.0, 0.0]:
                limits[pose_bone.name]["neutral"] = unit_quaternion(neutral)
    anim = obj.animation_data
    animated = {fc.data_path for fc in keys.fcurves_of(obj) or ()}
    if anim is not None:
        animated |= {driver.data_path for driver in anim.drivers}
    for pose_bone in obj.pose.bones:
        if pose_bone.name in limits or not len(pose_bone.constraints):
            continue
        modelled = limit_rotation_limits(pose_bone, animated)
        if modelled is not None:
            limits[pose_bone.name] = modelled
            if clamped_alike is not None:
                clamped_alike.add(pose_bone.name)
    return json.dumps(limits, sort_keys=True) if limits else None


def read_rig(obj: bpy.types.Object, with_tension: bool | None = None) -> RigEntry:
    """The native rig of armature `obj`, from the cache while no event said its bones or
    limits changed. `with_tension` (default: whether the solver is the tension
    minimiser) adds the bones' tension settings to the limits."""
    if with_tension is None:
        with_tension = obj.tendon.solver == "TENSION"
    entry = _rigs.get((obj.as_pointer(), with_tension))
    # Bones are only added or removed in Edit Mode, whose end the cache hears of; counting
    # them would cost a walk over every bone per solve.
    if (
        entry is not None
        and entry.data_pointer == obj.data.as_pointer()
        and (
            not entry.limit_rotation_bones
            or limit_rotation_signature(obj, entry.limit_rotation_bones) == entry.limit_rotation_state
        )
    ):
        return entry
    entry = build(obj, with_tension)
    _rigs[(obj.as_pointer(), with_tension)] = entry
    return entry


def build(obj: bpy.types.Object, with_tension: bool) -> RigEntry:
    tendon = native.native()
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
    pose_bones = obj.pose.bones
    pose_names = [pose_bone.name for pose_bone in pose_bones]
    pose_index = {name: i for i, name in enumerate(pose_names)}
    pose_order = np.array([pose_index[name] for name in names], np.int64)
    # foreach_get gives each matrix column by column: transposed, they are row-major.
    rest = matrices.reshape(n, 4, 4).transpose(0, 2, 1)
    clamped_alike: set[str] = set()
    try:
        rig = tendon.Rig.from_arrays(names, parents, rest, lengths, limits_json(obj, with_tension, clamped_alike))
    except tendon.TendonError as error:
        raise TendonUserError(f"Armature '{obj.name}': {error}") from error
    # What keeps Blender from posing a bone from its channels, as far as it changes only with
    # the events that make this cache forget (the solve still catches any bone that is not
    # where its channels put it, whatever the reason).
    constrained = frozenset(index[pose_bone.name] for pose_bone in pose_bones if len(pose_bone.constraints))
    driven = {index[name]: channel for name, channel in chains.driven_bones(obj).items() if name in index}
    no_inherit_rotation = frozenset(i for i, bone in enumerate(bones) if not bone.use_inherit_rotation)
    inherit_scale = {i: bone.inherit_scale for i, bone in enumerate(bones) if bone.inherit_scale != "FULL"}
    parent_space_location = frozenset(i for i, bone in enumerate(bones) if not bone.use_local_location)
    # Every bone with a Limit Rotation, modelled now or not (muting one, or its
    # influence, changes which).
    limit_rotation_bones = tuple(
        pose_bone.name
        for pose_bone in pose_bones
        if len(pose_bone.constraints) and any(c.type == "LIMIT_ROTATION" for c in pose_bone.constraints)
    )
    return RigEntry(
        data_pointer=obj.data.as_pointer(),
        count=n,
        rig=rig,
        names=names,
        index=index,
        parents=parents,
        lengths=lengths,
        pose_order=pose_order,
        pose_in_order=pose_names == names,
        constrained=constrained,
        driven=driven,
        no_inherit_rotation=no_inherit_rotation,
        inherit_scale=inherit_scale,
        parent_space_location=parent_space_location,
        clamped_alike=frozenset(index[name] for name in clamped_alike),
        limit_rotation_bones=limit_rotation_bones,
        limit_rotation_state=limit_rotation_signature(obj, limit_rotation_bones),
        rest_local=matrices,
    )


# --- Events that invalidate ----------------------------------------------------------------


def structure_changed(depsgraph: Any) -> bool:
    """Whether an update says some armature's bones (or their constraints or drivers) may
    have changed: the relations were rebuilt (the scene is among the updates), or an
    armature's data was updated without a transform (a bone renamed)."""
    # Two type queries answer most updates (a target moved) without a Python object per update.
    if not (depsgraph.id_type_updated("SCENE") or depsgraph.id_type_updated("ARMATURE")):
        return False
    for update in depsgraph.updates:
        id_data = update.id
        if isinstance(id_data, bpy.types.Scene):
            return True
        if isinstance(id_data, bpy.types.Armature) and not update.is_updated_transform:
            return True
    return False


#: Armature data (pointers) being evaluated for a pose Tendon wrote, inside
#: `own_pose_update`: nothing else changed since the update before it.
_own_pose_writes: set[int] = set()


@contextlib.contextmanager
def own_pose_update(obj: bpy.types.Object) -> Iterator[None]:
    """For the update that evaluates a pose Tendon just wrote, right after an update that
    saw everything else: the armature's rest is not read again to look for a change (on the
    generated Rigify rig's 706 bones that read was a third of a solve's own time). Only
    another add-on changing the rest in between (from its own update handler) would go
    unheard until the next change of the armature's data."""
    pointer = obj.data.as_pointer()
    _own_pose_writes.add(pointer)
    try:
        yield
    finally:
        _own_pose_writes.discard(pointer)


def rest_changed(depsgraph: Any) -> None:
    """Forgets the rigs whose armature's rest changed in an update of its data (applying
    the object's scale or rotation, Ctrl+A, rewrites the bones' rest with only the update a
    pose change also gives: the cached lengths then stayed 1.5 times too short). One bulk
    read of the bones' rest per armature whose data was updated and which has a rig."""
    if not _rigs or not depsgraph.id_type_updated("ARMATURE"):
        return
    for update in depsgraph.updates:
        data = update.id
        if not isinstance(data, bpy.types.Armature):
            continue
        data = data.original
        pointer = data.as_pointer()
        if pointer in _own_pose_writes:
            continue
        for key, entry in list(_rigs.items()):
            if entry.data_pointer != pointer:
                continue
            bones = data.bones
            if len(bones) * 16 != len(entry.rest_local):
                _rigs.pop(key, None)
                continue
            now = np.empty(len(entry.rest_local), np.float32)
            bones.foreach_get("matrix_local", now)
            if not np.array_equal(now, entry.rest_local):
                _rigs.pop(key, None)


#: Whether the last dependency graph update may have changed some armature's bones (live
#: mode, whose handler runs after this module's, reads it rather than look again).
changed_last_update = False


@bpy.app.handlers.persistent
def on_depsgraph_update(_scene: bpy.types.Scene, depsgraph: Any = None) -> None:
    global changed_last_update
    changed_last_update = depsgraph is None or structure_changed(depsgraph)
    if changed_last_update:
        clear()
    else:
        rest_changed(depsgraph)


@bpy.app.handlers.persistent
def on_replaced(*_args: Any) -> None:
    """A file loaded, or undo or redo: every Python reference and pointer may be stale."""
    clear()


HANDLERS = (
    (bpy.app.handlers.depsgraph_update_post, on_depsgraph_update),
    (bpy.app.handlers.load_post, on_replaced),
    (bpy.app.handlers.undo_post, on_replaced),
    (bpy.app.handlers.redo_post, on_replaced),
)


LISTENERS = (("limits", forget),)


def register() -> None:
    hooks.connect(HANDLERS, LISTENERS)


def unregister() -> None:
    hooks.disconnect(HANDLERS, LISTENERS)
    clear()
