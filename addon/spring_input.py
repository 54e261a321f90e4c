"""The animation beneath spring chains, kept so that baking again swings them from it.

A spring bake keys its chains' swing over the animation they had. Baked again (to try
another damping, say), the chains' animation is that swing: the stiffness pulled towards
it and the new swing went on top (a 3 m chain baked three times ended up to 4.8 m from
where the first bake put it). So the first spring bake copies each chain bone's rotation
curves as they were (a constant key where the bone was not animated) into an action of
their own, its *spring input* (kept with a fake user), and names it on the baked action
(`Action.tendon_spring_input`, a name: a pointer from one action to another was left
pointing at freed memory when the input was deleted, in Blender 5.0); later bakes from that
action read the chain bones' rotations from the input instead, and add the bones of chains
that are new since. The input records each bone's rotation mode when copied (its curves
are in that mode's channel), so a bone whose mode changes since still swings from it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import bpy
import numpy as np

from . import keys, pose

if TYPE_CHECKING:
    from .rig import RigEntry


#: The input action's ID property: bone name -> the rotation mode its curves were copied in.
MODES = "tendon_rotation_modes"


def input_of(action: bpy.types.Action | None) -> bpy.types.Action | None:
    """The spring input a baked action names, if it still exists."""
    name = getattr(action, "tendon_spring_input", "") if action is not None else ""
    return bpy.data.actions.get(name) if name else None


def recorded_mode(source: bpy.types.Action, bone: str) -> str | None:
    modes = source.get(MODES)
    return str(modes[bone]) if modes is not None and bone in modes else None


def bone_path(bone: str, channel: str) -> str:
    return f'pose.bones["{bpy.utils.escape_identifier(bone)}"].{channel}'


def input_slot(action: bpy.types.Action, obj: bpy.types.Object) -> Any:
    """The slot of `action` holding `obj`'s curves (made when missing; 4.4+), else None."""
    if not keys.SLOTTED:
        return None
    named = [s for s in action.slots if s.name_display == obj.name]
    slots = named or [s for s in action.slots if s.target_id_type in {"OBJECT", "UNSPECIFIED"}]
    return slots[0] if slots else action.slots.new(id_type="OBJECT", name=obj.name)


def held_curves(action: bpy.types.Action, obj: bpy.types.Object, bone: str, mode: str) -> list[Any] | None:
    """The rotation curves of `bone` in `mode`'s channel that `action` holds, one per
    component (None where missing), or None when it holds none."""
    fcurves = keys.action_fcurves(action, obj)
    if not fcurves:
        return None
    channel, width = pose.rotation_channel(mode)
    curves = [fcurves.find(bone_path(bone, channel), index=index) for index in range(width)]
    return curves if any(c is not None and len(c.keyframe_points) for c in curves) else None


def to_quaternions(values: np.ndarray, mode: str) -> np.ndarray:
    """Rotation channels (frames, width) in `mode` as unit quaternions (frames, 4) w x y z."""
    values = np.asarray(values, np.float64)
    if mode == "QUATERNION":
        rotations = values.copy()
    elif mode == "AXIS_ANGLE":
        axes = values[:, 1:]
        lengths = np.linalg.norm(axes, axis=1, keepdims=True)
        axes = np.divide(axes, lengths, out=np.zeros_like(axes), where=lengths > 0)
        half = values[:, :1] / 2
        rotations = np.concatenate([np.cos(half), np.sin(half) * axes], axis=1)
    else:
        # Euler 'XYZ' turns about X first: q = qZ qY qX.
        rotations = np.tile([1.0, 0.0, 0.0, 0.0], (len(values), 1))
        for axis_name in mode:
            axis = "XYZ".index(axis_name)
            half = values[:, axis] / 2
            turn = np.zeros((len(values), 4))
            turn[:, 0], turn[:, 1 + axis] = np.cos(half), np.sin(half)
            rotations = multiply(turn, rotations)
    lengths = np.linalg.norm(rotations, axis=1, keepdims=True)
    rest = np.array([1.0, 0.0, 0.0, 0.0])
    ok = (lengths[:, 0] > 1e-12) & np.isfinite(rotations).all(axis=1)
    rotations = np.where(ok[:, None], rotations / np.where(lengths > 0, lengths, 1.0), rest)
    return rotations.astype(np.float32)


def multiply(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Quaternion products a b, row by row (w x y z)."""
    aw, ax, ay, az = a.T
    bw, bx, by, bz = b.T
    return np.stack(
        [
            aw * bw - ax * bx - ay * by - az * bz,
            aw * bx + ax * bw + ay * bz - az * by,
            aw * by - ax * bz + ay * bw + az * bx,
            aw * bz + ax * by - ay * bx + az * bw,
        ],
        axis=1,
    )


def input_rotations(
    obj: bpy.types.Object, entry: RigEntry, source: bpy.types.Action, bones: list[int], frames: np.ndarray
) -> dict[int, np.ndarray]:
    """Per bone (rig index) that the spring input `source` holds, its rotations at
    `frames` (frames, 4), from the input's curves in the mode they were copied in."""
    rotations = {}
    for bone in bones:
        name = entry.names[bone]
        mode = recorded_mode(source, name)
        curves = held_curves(source, obj, name, mode) if mode is not None else None
        if mode is None or curves is None:
            continue
        channel, _width = pose.rotation_channel(mode)
        # A component without a curve (none the input copies) reads as rest.
        values = np.tile(np.array(pose.REST_CHANNELS.get(mode, (0.0, 0.0, 0.0)), np.float32), (len(frames), 1))
        for index, curve in enumerate(curves):
            if curve is not None and len(curve.keyframe_points):
                values[:, index] = keys.sample_fcurve(curve, frames)
        rotations[bone] = to_quaternions(values, mode)
    return rotations


def record(
    obj: bpy.types.Object, entry: RigEntry, action: bpy.types.Action, bones: list[int], first_frame: float
) -> bpy.types.Action:
    """Before a spring bake writes into `action`: makes sure its spring input holds every
    bone of `bones` (copied from `action` as it is now, a constant key at `first_frame`
    where a component is not animated, and the bone's rotation mode), names it on `action`
    and returns it."""
    source = input_of(action)
    if source is None:
        source = bpy.data.actions.new(f"{obj.name} spring input")
        source.use_fake_user = True
        source[MODES] = {}
    slot = input_slot(source, obj)
    fcurves = keys.action_fcurves(action, obj)
    for bone in bones:
        name = entry.names[bone]
        pose_bone = obj.pose.bones[name]
        if recorded_mode(source, name) is not None:
            continue
        mode = pose_bone.rotation_mode
        source[MODES][name] = mode
        channel, width = pose.rotation_channel(mode)
        current = list(getattr(pose_bone, channel))
        for index in range(width):
            path = bone_path(name, channel)
            original = fcurves.find(path, index=index) if fcurves else None
            copy = keys.ensure_fcurve(source, slot, path, index, name)
            if original is not None and len(original.keyframe_points):
                copy_keys(original, copy)
            else:
                copy.keyframe_points.add(1)
                copy.keyframe_points[0].co = (first_frame, current[index])
    action.tendon_spring_input = source.name
    return source


def copy_keys(original: bpy.types.FCurve, copy: bpy.types.FCurve) -> None:
    """Every key of `original` with all its attributes, and its extrapolation (not its
    modifiers: the input is the animation's keys)."""
    arrays = keys.key_arrays(original.keyframe_points, tuple(keys.KEY_ATTRIBUTES))
    points = copy.keyframe_points
    points.clear()
    points.add(len(original.keyframe_points))
    for name, (width, _dtype) in keys.KEY_ATTRIBUTES.items():
        if width == 2:
            keys.set_key_pairs(points, name, arrays[name][:, 0], arrays[name][:, 1])
        else:
            points.foreach_set(name, np.ascontiguousarray(arrays[name]).ravel())
    copy.extrapolation = original.extrapolation
    copy.update()
