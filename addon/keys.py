"""Writing keys into actions, for Blender 4.2 (``action.fcurves``) and the slotted actions
of 4.4 and later (action -> slot -> layer -> strip -> channelbag). Keys go in bulk:
``keyframe_points.add`` then ``foreach_set``; keys outside the baked range are kept with
every attribute (handles, their types, interpolation, easing, key type)."""

from __future__ import annotations

import ctypes
import functools
import re
from typing import Any

import bpy
import numpy as np
from bpy_extras import anim_utils

from . import native

#: Whether this Blender has slotted actions (4.4 and later).
SLOTTED = "slots" in bpy.types.Action.bl_rna.properties

#: Keyframe attributes copied when keys are kept: name -> (values per key, dtype). The enums
#: are one byte in Blender's keys: as uint8 ``foreach_get``/``foreach_set`` copy them in bulk
#: (as int32 they went key by key, eight times slower: a tenth of a 1000-frame bake).
KEY_ATTRIBUTES = {
    "co": (2, np.float32),
    "handle_left": (2, np.float32),
    "handle_right": (2, np.float32),
    "handle_left_type": (1, np.uint8),
    "handle_right_type": (1, np.uint8),
    "interpolation": (1, np.uint8),
    "easing": (1, np.uint8),
    "type": (1, np.uint8),
    "back": (1, np.float32),
    "amplitude": (1, np.float32),
    "period": (1, np.float32),
}


def key_arrays(
    points: Any, names: tuple[str, ...] = ("co", "handle_left", "handle_right", "interpolation")
) -> dict[str, np.ndarray]:
    """Keyframe attributes of an F-curve's keys in bulk: name -> (keys, width) array."""
    count = len(points)
    arrays = {}
    for name in names:
        width, dtype = KEY_ATTRIBUTES[name]
        buffer = np.empty(count * width, dtype)
        points.foreach_get(name, buffer)
        arrays[name] = buffer.reshape(count, width) if width > 1 else buffer
    return arrays


#: Values no fresh key holds, written through RNA to find where an attribute lies in a key.
PROBE = (12345.5, -6789.25)

#: Attribute name -> (key stride in bytes, offset in floats) found by a probe and read back
#: through RNA once (a build's layout does not change while it runs; each use still checks
#: the stride and that the keys are one array).
KEY_LAYOUT: dict[str, tuple[int, int]] = {}


def keys_in_memory(points: Any, stride: int) -> np.ndarray | None:
    """The F-curve's key array as (keys, stride / 4) float32, or None unless the keys are as
    checked: one contiguous array in Blender with this stride, the last key's address the
    first's plus the stride times the count."""
    count = len(points)
    if count < 2:
        return None
    first = points[0].as_pointer()
    if points[1].as_pointer() - first != stride or points[count - 1].as_pointer() != first + stride * (count - 1):
        return None
    memory = np.ctypeslib.as_array((ctypes.c_float * (count * stride // 4)).from_address(first))
    return memory.reshape(count, stride // 4)


def key_pairs_in_memory(points: Any, name: str) -> np.ndarray | None:
    """A (keys, 2) float32 view of a two-float keyframe attribute (``co``, ``handle_left``,
    ``handle_right``) in the F-curve's own key array, or None when its layout is not known
    (`set_key_pairs` finds it) or the keys are not as `keys_in_memory` checks."""
    layout = KEY_LAYOUT.get(name)
    memory = None if layout is None else keys_in_memory(points, layout[0])
    return None if memory is None else memory[:, layout[1] : layout[1] + 2]


def find_key_layout(points: Any, name: str) -> None:
    """Where attribute `name` lies in a key (`KEY_LAYOUT`): `PROBE` written into the first
    key through RNA and found in that key's memory. Changes the first key: only for keys
    the caller writes whole."""
    count = len(points)
    if count < 2:
        return
    first = points[0].as_pointer()
    stride = points[1].as_pointer() - first
    if not (0 < stride <= 512 and stride % 4 == 0):
        return
    setattr(points[0], name, PROBE)
    key = np.ctypeslib.as_array((ctypes.c_float * (stride // 4)).from_address(first))
    found = np.flatnonzero((key[:-1] == np.float32(PROBE[0])) & (key[1:] == np.float32(PROBE[1])))
    if len(found) == 1:
        KEY_LAYOUT[name] = (stride, int(found[0]))


def set_key_pairs(points: Any, name: str, first: np.ndarray, second: np.ndarray) -> None:
    """Sets a two-float keyframe attribute of every key from its two columns. ``foreach_set``
    copies such an attribute key by key (0.1 ms per 1000 keys, half of a 1000-frame bake's
    key writing; a one-byte or one-float attribute it copies in bulk, 0.004 ms), so the
    values go straight into the F-curve's key array where its layout is known; the first
    time, found and read back through RNA at both ends (not as found: ``foreach_set``)."""
    checking = name not in KEY_LAYOUT
    if checking:
        find_key_layout(points, name)
    view = key_pairs_in_memory(points, name)
    if view is not None:
        view[:, 0], view[:, 1] = first, second
        if not checking:
            return
        ends = np.array([getattr(points[0], name)[:], getattr(points[len(points) - 1], name)[:]], np.float32)
        wanted = np.array([[first[0], second[0]], [first[-1], second[-1]]], np.float32)
        if np.array_equal(ends, wanted):
            return
        KEY_LAYOUT.pop(name, None)
    points.foreach_set(name, np.ascontiguousarray(np.stack([first, second], axis=1), np.float32).ravel())


def set_key_pair_attributes(points: Any, pairs: dict[str, tuple[np.ndarray, np.ndarray]]) -> None:
    """`set_key_pairs` for several attributes, into one view of the key array where every
    layout is known already."""
    strides = {KEY_LAYOUT[name][0] for name in pairs if name in KEY_LAYOUT}
    memory = (
        keys_in_memory(points, strides.pop())
        if len(strides) == 1 and len(pairs) == len(KEY_LAYOUT.keys() & pairs.keys())
        else None
    )
    if memory is None:
        for name, (first, second) in pairs.items():
            set_key_pairs(points, name, first, second)
        return
    for name, (first, second) in pairs.items():
        offset = KEY_LAYOUT[name][1]
        memory[:, offset], memory[:, offset + 1] = first, second


@functools.cache
def enum_value(attribute: str, identifier: str) -> int:
    """The integer ``foreach_set`` takes for a keyframe enum item."""
    return bpy.types.Keyframe.bl_rna.properties[attribute].enum_items[identifier].value


#: Keyframe interpolations the native curve evaluation handles.
PLAIN_INTERPOLATIONS = tuple(enum_value("interpolation", name) for name in ("CONSTANT", "LINEAR", "BEZIER"))


def assigned_slot(id_data: bpy.types.ID) -> Any:
    anim = id_data.animation_data
    return getattr(anim, "action_slot", None) if anim else None


def channelbag(action: bpy.types.Action, slot: Any, create: bool) -> Any:
    """The F-curve container of `slot` in `action` (4.4+), or None when it has none."""
    if not create:
        return anim_utils.action_get_channelbag_for_slot(action, slot)
    # 5.0 added this helper; 4.4 and 4.5 lack it, so walk the same way it does there.
    ensure = getattr(anim_utils, "action_ensure_channelbag_for_slot", None)
    if ensure is not None:
        return ensure(action, slot)
    layer = action.layers[0] if action.layers else action.layers.new("Layer")
    strip = layer.strips[0] if layer.strips else layer.strips.new(type="KEYFRAME")
    return strip.channelbag(slot, ensure=True)


def fcurves_of(id_data: bpy.types.ID) -> Any:
    """The F-curves animating `id_data` through its assigned action, or None."""
    anim = id_data.animation_data
    if anim is None or anim.action is None:
        return None
    if SLOTTED:
        slot = anim.action_slot
        if slot is None:
            return None
        bag = channelbag(anim.action, slot, create=False)
        return bag.fcurves if bag else None
    return anim.action.fcurves


def action_fcurves(action: bpy.types.Action, id_data: bpy.types.ID) -> Any:
    """The F-curves `action` holds for `id_data` (any action, assigned or not: a pose
    asset, say): the slot assigned to `id_data` when it is this action, else the slot
    named for it, else the action's first object slot (4.4+); the action's F-curves (4.2)."""
    if not SLOTTED:
        return action.fcurves
    anim = id_data.animation_data
    slot = anim.action_slot if anim is not None and anim.action == action else None
    if slot is None:
        slots = [s for s in action.slots if s.target_id_type in {"OBJECT", "UNSPECIFIED"}]
        named = [s for s in slots if s.name_display == id_data.name]
        slot = (named or slots or [None])[0]
    if slot is None:
        return []
    bag = channelbag(action, slot, create=False)
    return bag.fcurves if bag else []


def held_over_strips(obj: bpy.types.Object, channels: list[tuple[str, str]], span: tuple[float, float]) -> list[str]:
    """The bones of `channels` (bone, property) that the assigned action does not key yet
    while an unmuted NLA strip reaching outside the baked `span` animates that property:
    the curves a bake adds hold their first and last keys over the strips on every frame
    outside the range (Blender plays the assigned action over the whole timeline; the
    arm's clip stopped playing on frames 1-39 and 61-277 of a bake of 40-60; QA helper).
    A strip the range covers plays nothing outside it to hold over (it was named all the
    same; regression pass)."""
    anim = obj.animation_data
    if anim is None or anim.action is None or not any(not track.mute for track in anim.nla_tracks):
        return []
    if anim.action_extrapolation == "NOTHING":
        # Past its range the action plays nothing: the strips play on.
        return []
    own = {fc.data_path for fc in (fcurves_of(obj) or ())}
    stripped: set[str] = set()
    for track in anim.nla_tracks:
        if track.mute:
            continue
        for strip in track.strips:
            outside = strip.frame_start < span[0] or strip.frame_end > span[1]
            if strip.action is not None and not strip.mute and outside:
                stripped |= {fc.data_path for fc in action_fcurves(strip.action, obj)}
    held = []
    for bone, prop in channels:
        path = f'pose.bones["{bpy.utils.escape_identifier(bone)}"].{prop}'
        if path in stripped and path not in own and bone not in held:
            held.append(bone)
    return held


def muted_channel(obj: bpy.types.Object, channels: list[tuple[str, str]]) -> str | None:
    """Why a bake cannot key one of `channels` ((bone name, pose-bone property) pairs):
    its F-curve, or (in 4.2) the channel group holding it, is muted in the armature's action, so
    keys written there would not play while the status said every frame reached (the
    effector 1.3-1.4 off in Blender's pose; QA helper). None when all can be keyed."""
    wanted = {f'pose.bones["{bpy.utils.escape_identifier(bone)}"].{prop}': (bone, prop) for bone, prop in channels}
    for fcurve in fcurves_of(obj) or ():
        named = wanted.get(fcurve.data_path)
        if named is None:
            continue
        # A muted channel group holds its curves still in 4.2 only: 4.4 and later play them.
        group = fcurve.group if not SLOTTED else None
        if fcurve.mute or (group is not None and group.mute):
            bone, prop = named
            how = "F-curve is muted" if fcurve.mute else f"F-curve's channel group '{group.name}' is muted"
            return (
                f"Bone '{bone}': its {prop} {how}, so keys baked into it would not play: unmute it to "
                "bake onto it; nothing baked"
            )
    return None


def find_fcurve(id_data: bpy.types.ID, data_path: str, index: int) -> bpy.types.FCurve | None:
    fcurves = fcurves_of(id_data)
    return fcurves.find(data_path, index=index) if fcurves is not None else None


def ensure_fcurve(
    action: bpy.types.Action, slot: Any, data_path: str, index: int, group: str, bag: Any = None
) -> bpy.types.FCurve:
    """The F-curve of `data_path`[`index`] in `action` (in `slot`'s channelbag, 4.4+: give
    `bag` when known), made in `group` when missing."""
    if SLOTTED:
        bag = bag or channelbag(action, slot, create=True)
        found = bag.fcurves.find(data_path, index=index)
        if found is not None:
            return found
        # `fcurves.new(group_name=)` is 5.0 only; assigning the group works from 4.4 on.
        fcurve = bag.fcurves.new(data_path, index=index)
        fcurve.group = bag.groups.get(group) or bag.groups.new(group)
        return fcurve
    found = action.fcurves.find(data_path, index=index)
    return found if found is not None else action.fcurves.new(data_path, index=index, action_group=group)


def action_refusal(obj: bpy.types.Object, new_action: bool) -> str | None:
    """Why keys cannot go where the bake would put them, before anything changes: in NLA
    tweak mode keys written at scene frames would land at the tweaked action's own frames
    (and a new action cannot be assigned there); a linked action cannot be changed (its
    curves were emptied, and undo did not bring them back)."""
    anim = obj.animation_data
    if anim is None:
        return None
    if anim.use_tweak_mode:
        return (
            f"Armature '{obj.name}' is in NLA tweak mode: leave it (Tab in the NLA editor) to bake, "
            "so keys land on the scene's frames"
        )
    action = anim.action
    if not new_action and action is not None and (action.library is not None or not action.is_editable):
        where = f" from '{action.library.filepath}'" if action.library is not None else ""
        return (
            f"Action '{action.name}' is linked{where} and cannot be changed: bake into a new action "
            "(New Action) instead"
        )
    return None


def curve_values(fcurves: Any, bone: str, channel: str, current: np.ndarray, frame: float) -> np.ndarray:
    """`current` (a bone's `channel` components) with each component that has an F-curve
    replaced by the curve's value at `frame`."""
    data_path = f'pose.bones["{bpy.utils.escape_identifier(bone)}"].{channel}'
    values = np.array(current, np.float32)
    for index in range(len(values)):
        fcurve = fcurves.find(data_path, index=index)
        if fcurve is not None and len(fcurve.keyframe_points):
            values[index] = fcurve.evaluate(frame)
    return values


def other_users(obj: bpy.types.Object, action: bpy.types.Action, slot: Any) -> list[str]:
    """Objects other than `obj` that `action` animates through `slot` (4.4+; the action
    itself before): keys written for `obj` change their animation too."""
    names = []
    for other in bpy.data.objects:
        anim = other.animation_data
        if other == obj or anim is None or anim.action != action:
            continue
        if SLOTTED and getattr(anim, "action_slot", None) != slot:
            continue
        names.append(other.name)
    return names


def prepare_action(obj: bpy.types.Object, new_action: bool) -> tuple[bpy.types.Action, Any, bpy.types.Action | None]:
    """The action keys go into, its slot (4.4+, else None), and the previously assigned
    action. A new action starts as a copy of the current one (so every other channel keeps
    playing), gets the current one's slot, and is assigned; the old one is kept with a fake
    user so saving does not drop it."""
    anim = obj.animation_data or obj.animation_data_create()
    old = anim.action
    if not new_action and old is not None:
        action = old
    else:
        if old is not None:
            action = old.copy()
            old.use_fake_user = True
        else:
            action = bpy.data.actions.new(f"{obj.name}Action")
            if any(not track.mute for track in anim.nla_tracks):
                # Animated by NLA strips alone: the new action holds the baked range's keys
                # only, and held past its ends (Blender's default) it replaced the strips on
                # every frame outside the range (found by a QA helper). Past its range it
                # now leaves them playing.
                anim.action_extrapolation = "NOTHING"
        # Baked again from a baked action: "Walk.tendon.001", not "Walk.tendon.tendon".
        base = re.sub(r"(\.tendon(\.\d+)?)+$", "", old.name) if old else obj.name
        action.name = f"{base}.tendon"
        old_slot = assigned_slot(obj)
        anim.action = action
        if SLOTTED and old_slot is not None and anim.action_slot is None:
            matching = [s for s in action.slots if s.identifier == old_slot.identifier]
            if matching:
                anim.action_slot = matching[0]
    slot = None
    if SLOTTED:
        slot = anim.action_slot
        if slot is None:
            slot = action.slots.new(id_type="OBJECT", name=obj.name)
            anim.action_slot = slot
    return action, slot, old


def replace_keys(
    fcurve: bpy.types.FCurve, frames: np.ndarray, values: np.ndarray, interpolation: str, span: tuple[float, float]
) -> None:
    """Replaces the keys of `fcurve` whose frame lies in `span` (inclusive) by keys at
    `frames` with `values`; every other key is kept as it was."""
    points = fcurve.keyframe_points
    count = len(points)
    added = len(frames)
    if count == 0:
        write_fresh_curves([(fcurve, values)], frames, interpolation)
        return
    kept = {name: array.reshape(count, -1) for name, array in key_arrays(points, tuple(KEY_ATTRIBUTES)).items()}
    outside = (kept["co"][:, 0] < span[0] - 1e-4) | (kept["co"][:, 0] > span[1] + 1e-4)
    kept = {name: array[outside] for name, array in kept.items()}
    co = np.stack([frames, values], axis=1).astype(np.float32)
    new = {
        "co": co,
        "handle_left": co,
        "handle_right": co,
        "handle_left_type": np.full((added, 1), enum_value("handle_left_type", "AUTO_CLAMPED"), np.uint8),
        "handle_right_type": np.full((added, 1), enum_value("handle_right_type", "AUTO_CLAMPED"), np.uint8),
        "interpolation": np.full((added, 1), enum_value("interpolation", interpolation), np.uint8),
        "easing": np.full((added, 1), enum_value("easing", "AUTO"), np.uint8),
        "type": np.full((added, 1), enum_value("type", "KEYFRAME"), np.uint8),
        "back": np.full((added, 1), 1.70158, np.float32),
        "amplitude": np.full((added, 1), 0.8, np.float32),
        "period": np.full((added, 1), 4.1, np.float32),
    }
    merged = {name: np.concatenate([kept[name], new[name]]) for name in KEY_ATTRIBUTES}
    order = np.argsort(merged["co"][:, 0], kind="stable")
    points.clear()
    points.add(len(order))
    if len(order) == 1:
        merged.update({name: np.stack(pair, axis=1) for name, pair in lone_key_handles(*merged["co"].T).items()})
    for name, (width, _dtype) in KEY_ATTRIBUTES.items():
        if width == 2:
            pairs = merged[name][order]
            set_key_pairs(points, name, pairs[:, 0], pairs[:, 1])
        else:
            points.foreach_set(name, np.ascontiguousarray(merged[name][order]).ravel())
    # Sorted above: only the handles are left to compute.
    points.handles_recalc()


def native_smoothing(fcurve: bpy.types.FCurve) -> bool | None:
    """Whether the curve smooths its automatic handles ("Continuous Acceleration"), or None
    when its handles are not the native computation's to give (other extrapolation,
    modifiers, another smoothing)."""
    if fcurve.extrapolation != "CONSTANT" or len(fcurve.modifiers):
        return None
    return {"NONE": False, "CONT_ACCEL": True}.get(fcurve.auto_smoothing)


def lone_key_handles(frames: np.ndarray, values: np.ndarray) -> dict[str, tuple[np.ndarray, np.ndarray]]:
    """Handles for a curve's only key: Blender computes none for one key (they stayed at
    (0, 0), which a Linear extrapolation turned into a slope), so a frame each side, level,
    as `keyframe_insert` gives a lone key. Columns (frames, values) per handle."""
    frames, values = np.asarray(frames, np.float32), np.asarray(values, np.float32)
    return {"handle_left": (frames - 1.0, values), "handle_right": (frames + 1.0, values)}


def write_fresh_curves(
    curves: list[tuple[bpy.types.FCurve, np.ndarray]], frames: np.ndarray, interpolation: str
) -> None:
    """Keys curves that have none yet at `frames` (in order) with their values: the keys
    written straight into Blender's arrays with the handles `handles_recalc` would give
    them, computed natively for all curves at once (Blender's recalculation was a third of
    a 1000-frame bake); curves that computation does not follow get Blender's."""
    frames = np.asarray(frames, np.float32)
    by_smoothing: dict[bool | None, list[int]] = {}
    for k, (fcurve, _values) in enumerate(curves):
        by_smoothing.setdefault(native_smoothing(fcurve), []).append(k)
    interpolation_value = enum_value("interpolation", interpolation)
    for smooth, members in by_smoothing.items():
        computed = [False] * len(members)
        if smooth is not None and len(frames) >= 2:
            values = np.stack([curves[k][1] for k in members]).astype(np.float32)
            left, right, computed = native.native().auto_clamped_handles(frames, values, smooth)
        for row, k in enumerate(members):
            fcurve, values = curves[k]
            points = fcurve.keyframe_points
            # New keys already have Blender's defaults (Auto Clamped, Bezier) but for these.
            points.add(len(frames))
            pairs = {"co": (frames, values)}
            lone = len(frames) == 1
            if lone:
                pairs.update(lone_key_handles(frames, values))
            elif computed[row]:
                pairs["handle_left"] = (left[row, :, 0], left[row, :, 1])
                pairs["handle_right"] = (right[row, :, 0], right[row, :, 1])
            set_key_pair_attributes(points, pairs)
            if interpolation != "BEZIER":
                points.foreach_set("interpolation", np.full(len(frames), interpolation_value, np.uint8))
            if not (lone or computed[row]):
                # The keys are in frame order: the handles are all that `fcurve.update()`
                # would redo (it also sorts, which costs as much again).
                points.handles_recalc()


def write_channels(
    action: bpy.types.Action,
    slot: Any,
    channels: list[tuple[str, str, np.ndarray]],
    frames: np.ndarray,
    interpolation: str,
    span: tuple[float, float],
) -> int:
    """Keys bone properties in `action`: (bone, property such as `rotation_euler`, values
    frames x components) each; returns the keys written. Curves without keys are written
    together (`write_fresh_curves`); others keep their keys outside `span`."""
    bag = channelbag(action, slot, create=True) if SLOTTED else None
    fresh = []
    written = 0
    for bone, channel, values in channels:
        data_path = f'pose.bones["{bpy.utils.escape_identifier(bone)}"].{channel}'
        for index in range(values.shape[1]):
            fcurve = ensure_fcurve(action, slot, data_path, index, bone, bag)
            if len(fcurve.keyframe_points):
                replace_keys(fcurve, frames, values[:, index], interpolation, span)
            else:
                fresh.append((fcurve, values[:, index]))
        written += values.size
    write_fresh_curves(fresh, frames, interpolation)
    return written


def sample_fcurve(fcurve: bpy.types.FCurve, frames: np.ndarray) -> np.ndarray:
    """An F-curve's values at `frames`: in one native call when the curve is plain keys
    (constant, linear or Bezier, constant extrapolation, no modifiers), else through
    Blender's own evaluation frame by frame."""
    points = fcurve.keyframe_points
    plain = not len(fcurve.modifiers) and fcurve.extrapolation == "CONSTANT" and len(points)
    if plain:
        arrays = key_arrays(points)
        finite = all(np.isfinite(arrays[name]).all() for name in ("co", "handle_left", "handle_right"))
        # Keys that are not numbers: Blender's own evaluation says where (the caller names it).
        if finite and set(arrays["interpolation"].tolist()) <= set(PLAIN_INTERPOLATIONS):
            return native.native().evaluate_fcurve(
                arrays["co"], arrays["handle_left"], arrays["handle_right"], arrays["interpolation"], frames
            )
    return np.array([fcurve.evaluate(float(frame)) for frame in frames], np.float32)
