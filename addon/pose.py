"""Reading and writing poses in bulk: ``foreach_get`` of whole arrays in, ``foreach_set`` of
whole arrays out, in each bone's own rotation mode. No per-bone Python loop and no maths:
the native library splits matrices and turns rotations into each mode's channels.

Arrays here are in the rig's bone order (``RigEntry.names``); ``RigEntry.pose_order`` maps
them to ``obj.pose.bones``.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

import bpy
import numpy as np
from mathutils import Euler, Quaternion

from .native import native

if TYPE_CHECKING:
    from .rig import RigEntry

#: A pose scale this small on an axis flattens the bone and every bone under it: their
#: rotations can no longer be read from (or written into) their frames.
COLLAPSED_SCALE = 1e-6

#: Blender's rotation modes by the integer ``foreach_get("rotation_mode")`` gives.
MODES = {item.value: item.identifier for item in bpy.types.PoseBone.bl_rna.properties["rotation_mode"].enum_items}

#: The pose-bone property holding rotations in each mode, and its width.
CHANNELS = {"QUATERNION": ("rotation_quaternion", 4), "AXIS_ANGLE": ("rotation_axis_angle", 4)}
EULER_CHANNEL = ("rotation_euler", 3)

#: Channels of the rest rotation in each of Blender's rotation modes (Euler: zeros).
REST_CHANNELS = {"QUATERNION": (1.0, 0.0, 0.0, 0.0), "AXIS_ANGLE": (0.0, 0.0, 1.0, 0.0)}


def rotation_channel(mode: str) -> tuple[str, int]:
    """The pose-bone property holding rotations in `mode`, and its width."""
    return CHANNELS.get(mode, EULER_CHANNEL)


def in_rig_order(entry: RigEntry, array: np.ndarray) -> np.ndarray:
    """Rows of a per-pose-bone array (pose order) in the rig's order."""
    return array if entry.pose_in_order else array[entry.pose_order]


#: A float32 NaN with a payload no computation gives: marks a value not written.
UNWRITTEN = 0x7FC0DEAD


class StaleRig(Exception):
    """The armature has more or fewer bones than its cached rig (forget it, read again)."""


def read_matrices(obj: bpy.types.Object, entry: RigEntry, name: str) -> np.ndarray:
    """Every pose bone's `name` matrix (``matrix_basis`` or the evaluated ``matrix``), (n,
    16) column-major each, in the rig's order. Raises StaleRig (see `read_rows`)."""
    return in_rig_order(entry, read_rows(obj, entry, name))


def read_rows(obj: bpy.types.Object, entry: RigEntry, name: str) -> np.ndarray:
    """Every pose bone's `name` matrix, (n, 16) column-major each, in the order of
    ``obj.pose.bones``. Raises StaleRig when the armature does not have the rig's bone
    count (counting them would cost a walk over every bone): one spare matrix, marked,
    stays untouched exactly when there are no more bones, and the last expected one is
    filled exactly when there are no fewer."""
    n = entry.count
    flat = np.empty((n + 1) * 16, np.float32)
    read_counted(obj.pose.bones, name, flat, flat.view(np.uint32), n)
    return flat[: n * 16].reshape(n, 16)


def read_counted(
    pose_bones: bpy.types.bpy_prop_collection, name: str, flat: np.ndarray, marks: np.ndarray, count: int
) -> None:
    """`foreach_get` of matrix property `name` into `flat` (room for `count` + 1 matrices,
    `marks` its uint32 view), raising StaleRig unless there are exactly `count` bones."""
    marks[(count - 1) * 16] = marks[count * 16] = UNWRITTEN
    try:
        pose_bones.foreach_get(name, flat)
    except RuntimeError as error:
        raise StaleRig from error
    if marks[count * 16] != UNWRITTEN or marks[(count - 1) * 16] == UNWRITTEN:
        raise StaleRig


class PoseBuffers:
    """The arrays a repeated solve of one armature reads into and writes from, made once
    (each when first used): pose bones' matrices ((n, 16) column-major, pose order),
    rotation modes and channels. A live tick then allocates nothing."""

    def __init__(self, count: int) -> None:
        self.count = count
        #: Per matrix property: the flat array (one spare matrix, see `read_rows`), its
        #: marks' view, and the (n, 16) rows.
        self.matrix_arrays: dict[str, tuple[np.ndarray, np.ndarray, np.ndarray]] = {}
        self.modes = np.empty(count, np.int32)
        self.channels: dict[str, tuple[np.ndarray, np.ndarray]] = {}

    def matrices(self, pose_bones: bpy.types.bpy_prop_collection, name: str) -> np.ndarray:
        """`read_rows` into the buffer of `name`; raises StaleRig the same way."""
        count = self.count
        known = self.matrix_arrays.get(name)
        if known is None:
            array = np.empty((count + 1) * 16, np.float32)
            known = self.matrix_arrays[name] = (array, array.view(np.uint32), array[: count * 16].reshape(count, 16))
        flat, marks, rows = known
        read_counted(pose_bones, name, flat, marks, count)
        return rows

    def rotation_modes(self, pose_bones: bpy.types.bpy_prop_collection) -> np.ndarray:
        """Every pose bone's rotation mode (``MODES`` keys); call after `matrices`, which
        checks the bone count."""
        pose_bones.foreach_get("rotation_mode", self.modes)
        return self.modes

    def channel(self, pose_bones: bpy.types.bpy_prop_collection, name: str, width: int) -> np.ndarray:
        """The pose bones' property `name` read into its buffer, (n, width)."""
        known = self.channels.get(name)
        if known is None:
            flat = np.empty(self.count * width, np.float32)
            known = self.channels[name] = (flat, flat.reshape(self.count, width))
        try:
            pose_bones.foreach_get(name, known[0])
        except RuntimeError as error:
            raise StaleRig from error
        return known[1]

    def write(self, pose_bones: bpy.types.bpy_prop_collection, name: str) -> None:
        """Writes the buffer of channel property `name` back whole."""
        pose_bones.foreach_set(name, self.channels[name][0])


#: A matrix_basis or matrix row (16 floats, column-major) at rest: what a bone whose pose is
#: not finite stands in as, where nothing reads it (see `finite_rows`).
REST_ROW = np.eye(4, dtype=np.float32).ravel()


def finite_rows(*arrays: np.ndarray) -> tuple[tuple[np.ndarray, ...], list[int]]:
    """`arrays` ((..., n, 16) each, rig order) with every bone whose row holds NaN or
    infinity in any of them (at any frame) put at rest (copies; the arrays themselves when
    all is finite), and those bones (rig indices). One vectorised test for a usual pose."""
    if all(np.isfinite(array).all() for array in arrays):
        return arrays, []
    bad = np.zeros(arrays[0].shape[-2], bool)
    for array in arrays:
        bad |= ~np.isfinite(array).reshape(-1, bad.size, 16).all(axis=(0, 2))
    fixed = []
    for array in arrays:
        array = array.copy()
        array[..., bad, :] = REST_ROW
        fixed.append(array)
    return tuple(fixed), np.nonzero(bad)[0].tolist()


def channel_problems(obj: bpy.types.Object, entry: RigEntry, bones: list[int]) -> dict[int, str]:
    """The bones (rig indices) among `bones` whose location, rotation (in their mode) or
    scale channels hold NaN or infinity, each with the reason naming bone and channel: some
    Blender evaluates as if finite (an axis-angle axis of NaN shows as no turn), but a
    solve would start from, and write next to, what is not a number."""
    pose_bones = obj.pose.bones
    problems = {}
    for bone in bones:
        pose_bone = pose_bones[entry.names[bone]]
        for name in ("location", rotation_channel(pose_bone.rotation_mode)[0], "scale"):
            values = tuple(getattr(pose_bone, name))
            if not all(math.isfinite(v) for v in values):
                shown = ", ".join(f"{v:g}" for v in values)
                problems[bone] = f"bone '{pose_bone.name}' has a non-finite {name} ({shown}): give it numbers"
                break
    return problems


def non_finite_reason(obj: bpy.types.Object, entry: RigEntry, bones: list[int], bone: int) -> str:
    """Why `bone`'s pose is not finite, naming the bone at fault: the topmost of `bones`
    (those whose pose is not finite) above it, since a parent's NaN reaches every bone
    under it, and the first of its channels holding NaN or infinity."""
    bad = set(bones)
    while entry.parents[bone] >= 0 and entry.parents[bone] in bad:
        bone = entry.parents[bone]
    pose_bone = obj.pose.bones[entry.names[bone]]
    for name in ("location", rotation_channel(pose_bone.rotation_mode)[0], "scale"):
        values = tuple(getattr(pose_bone, name))
        if not all(math.isfinite(v) for v in values):
            shown = ", ".join(f"{v:g}" for v in values)
            return f"bone '{pose_bone.name}' has a non-finite {name} ({shown}): give it numbers"
    return (
        f"Blender's evaluated pose of bone '{pose_bone.name}' is not finite (its channels are: "
        "a constraint or driver on it makes NaN)"
    )


def channel_pose(
    obj: bpy.types.Object, entry: RigEntry, basis: np.ndarray, current: bool = True
) -> tuple[np.ndarray, ...]:
    """The pose the channels give: `basis` ((..., n, 16) matrix_basis in rig order) as
    rotations, translations and scales (..., n, 4 / 3 / 3). When `basis` is the current
    pose, a bone scaled to zero on an axis keeps the rotation of its channels (its matrix
    no longer holds one); other callers fix those with `collapsed_rotations`."""
    shape = basis.shape[:-1]
    rotations, translations, scales = native().matrices_to_transforms(basis.reshape(-1, 4, 4), column_major=True)
    if current:
        for bone, rotation in collapsed_rotations(obj, entry, scales).items():
            rotations[bone] = rotation
    return rotations.reshape(*shape, 4), translations.reshape(*shape, 3), scales.reshape(*shape, 3)


def collapsed_rotations(obj: bpy.types.Object, entry: RigEntry, scales: np.ndarray) -> dict[int, tuple[float, ...]]:
    """The bones (rig indices) whose current pose `scales` (n, 3) flatten an axis, mapped to
    the rotation of their channels. Empty, after one vectorised test, for every usual pose."""
    if np.abs(scales).min() > COLLAPSED_SCALE:
        return {}
    collapsed = np.nonzero(np.abs(scales).min(axis=1) <= COLLAPSED_SCALE)[0]
    pose_bones = obj.pose.bones
    return {bone: channel_rotation(pose_bones[entry.names[bone]]) for bone in collapsed.tolist()}


def channel_rotation(pose_bone: bpy.types.PoseBone) -> tuple[float, ...]:
    """A pose bone's rotation (w, x, y, z) from the channels of its rotation mode (only for
    the rare bone scaled to zero, whose matrix has lost it)."""
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


def rotation_modes(obj: bpy.types.Object) -> np.ndarray:
    """Every pose bone's rotation mode as ``MODES`` keys, in pose order."""
    pose_bones = obj.pose.bones
    modes = np.empty(len(pose_bones), np.int32)
    pose_bones.foreach_get("rotation_mode", modes)
    return modes


class Channels:
    """Pose-bone properties of a whole armature in bulk: each read once when first asked
    for, written back whole (every other bone gets the value it had)."""

    def __init__(self, obj: bpy.types.Object) -> None:
        self.pose_bones = obj.pose.bones
        self.count = len(self.pose_bones)
        self.arrays: dict[str, np.ndarray] = {}

    def array(self, name: str, width: int) -> np.ndarray:
        """The property `name` of every pose bone, (n, width), pose order."""
        found = self.arrays.get(name)
        if found is None:
            found = np.empty(self.count * width, np.float32)
            self.pose_bones.foreach_get(name, found)
            found = self.arrays[name] = found.reshape(self.count, width)
        return found

    def write(self) -> None:
        for name, array in self.arrays.items():
            self.pose_bones.foreach_set(name, array.ravel())


def mode_groups(obj: bpy.types.Object, entry: RigEntry, bones: np.ndarray) -> list[tuple[str, np.ndarray, np.ndarray]]:
    """`bones` (rig indices) grouped by rotation mode: (mode, the group's positions in
    `bones`, their rows in ``obj.pose.bones``), from one bulk read of the modes. The last
    grouping is kept on the rig: a solve after a solve usually writes the same bones in the
    same modes."""
    modes = rotation_modes(obj)
    key = (modes.tobytes(), bones.dtype.str, bones.tobytes())
    known = entry.memo.get("mode groups")
    if known is not None and known[0] == key:
        return known[1]
    rows = entry.pose_order[bones]
    bone_modes = modes[rows]
    first = bone_modes[0]
    if (bone_modes == first).all():
        groups = [(MODES[int(first)], np.arange(len(bones)), rows)]
    else:
        groups = []
        for value in np.unique(bone_modes).tolist():
            which = np.nonzero(bone_modes == value)[0]
            groups.append((MODES[value], which, rows[which]))
    entry.memo["mode groups"] = (key, groups)
    return groups


def previous_channels(
    obj: bpy.types.Object, entry: RigEntry, bones: np.ndarray
) -> list[tuple[str, np.ndarray, np.ndarray]]:
    """`bones` (rig indices) grouped by rotation mode: (mode, the group's bones, their
    current channels)."""
    if not len(bones):
        return []
    channels = Channels(obj)
    return [
        (mode, bones[positions], channels.array(*rotation_channel(mode))[rows])
        for mode, positions, rows in mode_groups(obj, entry, bones)
    ]


#: Writing a bone through its own properties costs about as much as this many bones of a
#: whole-array read and write (measured: some 4 us against 0.1 us per bone): a solve that
#: moves fewer bones than the armature's over this (a few limbs of a 700-bone rig) writes
#: them one by one; otherwise whole arrays.
SINGLE_WRITE_COST = 40


def write_rotations(obj: bpy.types.Object, entry: RigEntry, bones: np.ndarray, rotations: np.ndarray) -> None:
    """Writes `rotations` ((k, 4) w-first, one a bone of `bones`) in each bone's rotation
    mode, each value nearest the bone's current one (no Euler flips, no quaternion sign
    jumps): per mode one native conversion; per channel property one bulk write, or for a
    few bones of a large armature a write per bone (see `SINGLE_WRITE_COST`)."""
    if not len(bones):
        return
    tendon = native()
    if len(bones) * SINGLE_WRITE_COST < entry.count:
        pose_bones = obj.pose.bones
        targets = [pose_bones[entry.names[bone]] for bone in bones.tolist()]
        groups: dict[str, list[int]] = {}
        for k, pose_bone in enumerate(targets):
            groups.setdefault(pose_bone.rotation_mode, []).append(k)
        for mode, members in groups.items():
            name = rotation_channel(mode)[0]
            previous = np.array([getattr(targets[k], name) for k in members], np.float32)
            values = tendon.rotation_channels(rotations[members], mode, previous)
            for k, channel in zip(members, values, strict=True):
                setattr(targets[k], name, channel)
        return
    channels = Channels(obj)
    for mode, positions, rows in mode_groups(obj, entry, bones):
        array = channels.array(*rotation_channel(mode))
        array[rows] = tendon.rotation_channels(rotations[positions], mode, array[rows])
    channels.write()
    tag_pose(obj)


def write_vectors(obj: bpy.types.Object, entry: RigEntry, name: str, bones: np.ndarray, values: np.ndarray) -> None:
    """Writes `values` (rig order, n x 3) of `bones` into the pose bones' `name`
    (``location`` or ``scale``) in one bulk write."""
    if not len(bones):
        return
    channels = Channels(obj)
    channels.array(name, 3)[entry.pose_order[bones]] = values[bones]
    channels.write()
    tag_pose(obj)


def location_channels(
    obj: bpy.types.Object,
    entry: RigEntry,
    bones: np.ndarray,
    rotations: np.ndarray,
    translations: np.ndarray,
    scales: np.ndarray,
) -> np.ndarray:
    """The ``location`` channels (rig order, n x 3) that put `bones` where a pose's
    `translations` (the rig's convention: in each bone's rest frame, turned and scaled by
    its parent's pose) put them. Equal for bones with Local Location on; a bone with it off
    takes its location in armature space, added to its head's place without its rest frame
    or its parent's pose turning it (how Blender reads that option)."""
    values = np.array(translations, np.float32)
    off = [int(b) for b in bones if not obj.data.bones[entry.names[int(b)]].use_local_location]
    if not off:
        return values
    worlds = entry.rig.forward_kinematics(rotations, translations, scales)
    for bone in off:
        frame = np.array(obj.data.bones[entry.names[bone]].matrix_local.to_3x3(), np.float64)
        parent = entry.parents[bone]
        if parent >= 0:
            parent_rest = np.array(obj.data.bones[entry.names[parent]].matrix_local.to_3x3(), np.float64)
            frame = worlds[parent][:3, :3] @ np.linalg.solve(parent_rest, frame)
        values[bone] = frame @ translations[bone]
    return values


def reset_rotations(obj: bpy.types.Object, entry: RigEntry, bones: np.ndarray) -> None:
    """Puts `bones` (rig indices) back to their rest rotation, in each bone's mode."""
    if not len(bones):
        return
    channels = Channels(obj)
    for mode, _members, rows in mode_groups(obj, entry, bones):
        name, width = rotation_channel(mode)
        channels.array(name, width)[rows] = REST_CHANNELS.get(mode, (0.0,) * width)
    channels.write()
    tag_pose(obj)


def tag_pose(obj: bpy.types.Object) -> None:
    """Bulk writes tag nothing: ask for the pose to be evaluated again, as setting one
    channel through its property does."""
    obj.update_tag(refresh={"DATA"})
