"""Tendon's settings, stored in the .blend: ``Object.tendon`` on armatures (solver and
effectors) and ``PoseBone.tendon`` (joint limits). Scripts rely on these names.

Defaults, solver names and Euler orders come from the native library (``native.py``, the
only add-on module imported here). Other modules hear of changes through `listeners`."""

# No `from __future__ import annotations` here: Blender reads these annotations as objects.
import math
from collections.abc import Callable
from itertools import accumulate
from typing import Any

import bpy
from bpy.props import (
    BoolProperty,
    CollectionProperty,
    EnumProperty,
    FloatProperty,
    FloatVectorProperty,
    IntProperty,
    PointerProperty,
    StringProperty,
)
from bpy.types import PropertyGroup

from . import native

SOLVER_ITEMS = native.solver_items()

EULER_ITEMS = [(order, order, f"Decompose the joint's rotation in {order} order") for order in native.euler_orders()]

TENSION_THRESHOLD, TENSION_RIGIDITY = native.tension_defaults()


def native_default(solver: str, key: str, fallback: float) -> float:
    """A solver setting's default from the native library (`fallback` only keeps the
    setting drawable when the library is missing)."""
    return float(native.solver_defaults(solver).get(key, fallback))


def spring_default(key: str, fallback: float) -> float:
    return float(native.spring_defaults().get(key, fallback))


#: Functions other modules add to hear of changes, so this module imports none of them:
#: "limits" with the armature whose bone limits changed (the rig cache), "live" with the
#: settings and context when live mode is switched (live mode).
listeners: dict[str, list[Callable[..., None]]] = {"limits": [], "live": []}


#: How many times an effector's setting has been set (through the interface or Python): live
#: mode reads the effectors' settings again only when this, their count or the armature's
#: animation says they may have changed.
effector_edits = 0


def effector_changed(_self: "TendonEffector", _context: bpy.types.Context) -> None:
    global effector_edits
    effector_edits += 1


def limits_changed(self: "TendonBoneLimits", _context: bpy.types.Context) -> None:
    for listener in listeners["limits"]:
        listener(self.id_data)


def live_changed(self: "TendonArmatureSettings", context: bpy.types.Context) -> None:
    for listener in listeners["live"]:
        listener(self, context)


class TendonEffector(PropertyGroup):
    """One IK goal: a bone's tail (or head) follows a target object or bone."""

    enabled: BoolProperty(update=effector_changed, name="Enabled", default=True, description="Solve this effector")
    bone: StringProperty(update=effector_changed, name="Bone", description="The bone that reaches for the target")
    target: PointerProperty(
        update=effector_changed, name="Target", type=bpy.types.Object, description="Object to reach"
    )
    subtarget: StringProperty(
        update=effector_changed, name="Target Bone", description="Bone of the target when it is an armature"
    )
    chain_length: IntProperty(
        update=effector_changed,
        name="Chain Length",
        default=0,
        min=0,
        max=255,
        description="How many bones, counting the effector's own, the effector moves (0: up to the root)",
    )
    weight: FloatProperty(
        update=effector_changed,
        name="Weight",
        default=1.0,
        min=0.0,
        max=1.0,
        description="How much this effector counts against others",
    )
    use_tail: BoolProperty(
        update=effector_changed,
        name="Use Tail",
        default=True,
        description="The bone's tail reaches the target (off: its head does)",
    )
    use_rotation: BoolProperty(
        update=effector_changed, name="Rotation", default=False, description="Also match the target's rotation"
    )
    rotation_weight: FloatProperty(
        update=effector_changed,
        name="Rotation Weight",
        default=1.0,
        min=0.0,
        max=1.0,
        description="How much the rotation counts",
    )
    pole_target: PointerProperty(
        update=effector_changed,
        name="Pole Target",
        type=bpy.types.Object,
        description="Object the chain's plane turns towards",
    )
    pole_subtarget: StringProperty(
        update=effector_changed, name="Pole Bone", description="Bone of the pole target when it is an armature"
    )
    use_scale: BoolProperty(
        update=effector_changed,
        name="Scale",
        default=False,
        description="Scale the chain's bones so the effector's scale matches the target's (solved before positions)",
    )
    pole_angle: FloatProperty(
        update=effector_changed,
        name="Pole Angle",
        default=0.0,
        subtype="ANGLE",
        description="As in Blender's IK: the chain root bone's X axis, turned by this angle, points at the pole",
    )


class TendonSpring(PropertyGroup):
    """A chain of bones that swings and settles (mass-spring), simulated when baking."""

    enabled: BoolProperty(name="Enabled", default=True, description="Simulate this chain when baking")
    bone: StringProperty(name="Tip Bone", description="The chain's last bone (e.g. the tail's tip)")
    chain_length: IntProperty(
        name="Chain Length",
        default=3,
        min=0,
        max=255,
        description="How many bones, counting the tip, swing (0: up to the root)",
    )
    mass: FloatProperty(
        name="Tip Mass",
        default=1.0,
        min=0.001,
        soft_max=10.0,
        description="Mass of the chain's last joint against its other joints (1 each): heavier swings the tip "
        "more like a weight on a rope",
    )
    stiffness: FloatProperty(
        name="Stiffness",
        default=spring_default("stiffness", 6.0),
        min=0.0,
        max=60.0,
        description="How strongly the chain returns to its animated pose (a spring's frequency, radians per second; "
        "at most 60, where the simulation's 1/120 s step stays stable)",
    )
    damping: FloatProperty(
        name="Damping",
        default=spring_default("damping", 2.0),
        min=0.0,
        soft_max=20.0,
        description="How fast the swinging dies out, per second. It acts as air does: a chain carried "
        "steadily along trails behind by more the higher it is and the faster the character moves",
    )
    gravity: FloatProperty(
        name="Gravity", default=1.0, min=0.0, soft_max=2.0, description="Share of the scene's gravity the chain feels"
    )


TENSION_REFERENCE_ITEMS = [
    (
        "START",
        "Current Pose",
        "Move as little as needed from the pose before the solve (when baking, each frame's animated pose)",
    ),
    ("REST", "Rest Pose", "Relax towards the rest pose"),
    (
        "ACTION",
        "Stored Pose",
        "Relax towards a frame of an action or a pose asset (bones it does not key: current pose)",
    ),
]


class TendonHumanRole(PropertyGroup):
    """One entry of Human Limits' role mapping: which bone plays a humanoid's role (shown
    and corrected in the Human Limits panel; a held entry is a bone between two joints)."""

    role: StringProperty(name="Role", description="The joint: thigh.L, spine.1, chest, head, ...")
    bone: StringProperty(name="Bone", description="The bone that plays the role (empty: none)")
    how: StringProperty(name="Found By", description="Naming convention, topology, or given by hand")
    held: BoolProperty(name="Held", default=False, description="A bone between two joints, locked: no solve turns it")
    written: StringProperty(
        name="Limited Bone",
        description="The bone Human Limits last wrote limits to for this entry (reset when it changes)",
    )


class TendonArmatureSettings(PropertyGroup):
    """Solver settings and effectors of one armature."""

    # Damped least squares by default: on real motion capture its poses are as close to the
    # actor's as Blender's own IK, FABRIK's twice as far (README, "Natural poses").
    # Every setting a solve reads counts as an effector edit: live mode solves again at once
    # (switching the solver while live left the last solver's pose and status; QA helper).
    solver: EnumProperty(
        update=effector_changed, name="Solver", items=SOLVER_ITEMS, default="JACOBIAN_DLS", description="The IK solver"
    )
    iterations: IntProperty(
        update=effector_changed,
        name="Iterations",
        default=0,
        min=0,
        max=100000,
        description=(
            "Most iterations per pass of a solve (0: the solver's own default); retries and finishing "
            "passes each keep to it, and the status counts them all"
        ),
    )
    tolerance: FloatProperty(
        update=effector_changed,
        name="Tolerance",
        default=native_default("FABRIK", "tolerance", 1e-5),
        min=1e-9,
        max=0.1,
        precision=6,
        description="An effector counts as reached within this fraction of its chain's length",
    )
    damping: FloatProperty(
        update=effector_changed,
        name="Damping",
        default=native_default("JACOBIAN_DLS", "damping", 0.1),
        min=0.0,
        max=10.0,
        description="Damped least squares only: higher is steadier near singular poses, lower is faster",
    )
    exclusive_chains: BoolProperty(
        update=effector_changed,
        name="Exclusive Chains",
        default=False,
        description="Full body: effectors take priority from the spine outwards, and none moves bones an "
        "earlier effector's chain moves unless it cannot reach otherwise (a looking head bends the spine, "
        "the arms reach from there)",
    )
    move_root: BoolProperty(
        update=effector_changed,
        name="Move Root",
        default=False,
        description="Let the root bone translate to help the effectors (e.g. hips lower so the feet reach)",
    )
    tension_reference: EnumProperty(
        update=effector_changed,
        name="Relax Towards",
        items=TENSION_REFERENCE_ITEMS,
        default="START",
        description="Tension only: the pose each joint's tension is measured from (limits stay relative to rest)",
    )
    reference_action: PointerProperty(
        update=effector_changed,
        type=bpy.types.Action,
        name="Reference Action",
        description="Tension towards a stored pose: the action (or pose asset) holding it",
    )
    reference_frame: FloatProperty(
        update=effector_changed,
        name="Reference Frame",
        default=0.0,
        description="Tension towards a stored pose: the action's frame holding it",
    )
    effectors: CollectionProperty(type=TendonEffector, name="Effectors")
    active_effector_index: IntProperty(name="Active Effector", default=0, min=0)
    springs: CollectionProperty(type=TendonSpring, name="Spring Chains")
    active_spring_index: IntProperty(name="Active Spring Chain", default=0, min=0)
    live: BoolProperty(
        name="Live",
        default=False,
        description="Re-solve whenever a target moves or the frame changes",
        update=live_changed,
    )
    status: StringProperty(name="Status", description="What the last solve did", options={"SKIP_SAVE"})
    human_roles: CollectionProperty(type=TendonHumanRole, name="Human Roles")
    active_human_role_index: IntProperty(name="Active Human Role", default=0, min=0)
    human_summary: StringProperty(name="Human Limits", description="What Human Limits last recognised")


#: Every joint-limit setting of a pose bone and its default, in the order they are stored.
#: They live in float arrays per bone (`limit_store`, `scale_store` for the scale limits,
#: `frame_store`; Blender caps an array at 32); the named settings read and write their slice.
#: Why: Blender copies each stored property of every pose bone on every depsgraph update,
#: and 37 of them per bone cost more than evaluating the armature (measured on a 31-bone
#: armature: 0.21 ms per update against 0.08 ms with two arrays).
STORES: dict[str, dict[str, tuple[float, ...]]] = {
    "limit_store": {
        "euler_order": (0.0,),
        "limit_roll": (float(native.default_limits().get("roll", 0.0)),),
        "limit_neutral": (1.0, 0.0, 0.0, 0.0),
        **{
            f"{setting}_{axis}": default
            for axis in "xyz"
            for setting, default in (
                ("lock", (0.0,)),
                ("use_limit", (0.0,)),
                ("min", (-math.pi,)),
                ("max", (math.pi,)),
                ("threshold_negative", (TENSION_THRESHOLD,)),
                ("threshold_positive", (TENSION_THRESHOLD,)),
                ("rigidity_negative", (TENSION_RIGIDITY,)),
                ("rigidity_positive", (TENSION_RIGIDITY,)),
            )
        },
    },
    "scale_store": {"use_scale_limit": (0.0,), "scale_min": (0.5, 0.5, 0.5), "scale_max": (2.0, 2.0, 2.0)},
    # Apart (the limit store holds 30 of the 32 values an array may): only bones that do
    # not point along their limbs have one.
    "frame_store": {"limit_frame": (1.0, 0.0, 0.0, 0.0)},
}
LIMIT_STORE = "limit_store"
FRAME_STORE = "frame_store"
#: Each store's defaults, all its settings' in order.
STORE_DEFAULTS: dict[str, tuple[float, ...]] = {
    store: tuple(value for default in fields.values() for value in default) for store, fields in STORES.items()
}
#: Each named setting's store, where its slice starts and how long it is.
STORED_AT: dict[str, tuple[str, int, int]] = {
    name: (store, offset, len(default))
    for store, fields in STORES.items()
    for (name, default), offset in zip(
        fields.items(), accumulate((len(default) for default in fields.values()), initial=0), strict=False
    )
}
#: Where each limit setting starts in `limit_store` (what the rig cache reads).
LIMIT_OFFSETS: dict[str, int] = {name: offset for name, (store, offset, _) in STORED_AT.items() if store == LIMIT_STORE}


def stored_limits(settings: Any, store: str = LIMIT_STORE) -> list[float] | None:
    """A bone's settings in `store`, in `STORES` order; None when none was ever set. Reads
    what an older Tendon stored (one property per setting) when the bone has not been
    migrated (a linked file, which cannot be written)."""
    stored = settings.get(store)
    if stored is not None:
        return list(stored)
    legacy = [name for name in settings.keys() if name in STORES[store]]
    if not legacy:
        return None
    values = list(STORE_DEFAULTS[store])
    for name in legacy:
        _, offset, size = STORED_AT[name]
        value = settings.get(name)
        values[offset : offset + size] = list(value) if size > 1 else [float(value)]
    return values


def limit_accessors(name: str) -> dict[str, Any]:
    """`get` and `set` for one named setting over its slice of the bone's store. Settings
    of the limit store are not animatable: the native rig is built from them once and
    rebuilt when one is set (`limits_changed`), which keys playing back never call (a Max X
    keyed from 180 to 3 degrees kept 180)."""
    store, offset, size = STORED_AT[name]
    convert: Callable[[float], Any] = (
        int if name == "euler_order" else bool if name.startswith(("lock_", "use_")) else float
    )

    def read(self: Any) -> Any:
        found = (stored_limits(self, store) or STORE_DEFAULTS[store])[offset : offset + size]
        return convert(found[0]) if size == 1 else tuple(found)

    def write(self: Any, value: Any) -> None:
        values = stored_limits(self, store) or list(STORE_DEFAULTS[store])
        values[offset : offset + size] = [float(v) for v in value] if size > 1 else [float(value)]
        setattr(self, store, values)

    found: dict[str, Any] = {"get": read, "set": write}
    if store in (LIMIT_STORE, FRAME_STORE):
        found["options"] = set()
    return found


def migrate_limits(objects: Any) -> None:
    """Moves the limits an older Tendon stored as one property per setting into each bone's
    stores (and removes the old ones, which every depsgraph update would copy); linked
    armatures are read as they are."""
    for obj in objects:
        if obj.type != "ARMATURE" or obj.pose is None or obj.library is not None:
            continue
        for pose_bone in obj.pose.bones:
            settings = pose_bone.tendon
            legacy = [name for name in settings.keys() if name in STORED_AT]
            if not legacy:
                continue
            for store in STORES:
                values = stored_limits(settings, store)
                for name in legacy:
                    if name in STORES[store]:
                        del settings[name]
                if values is not None:
                    setattr(settings, store, values)


@bpy.app.handlers.persistent
def migrate_on_load(_file: str) -> None:
    migrate_limits(bpy.data.objects)
    clear_statuses(bpy.data.objects)


def clear_statuses(objects: Any) -> None:
    """Empties each armature's status: it tells of the last solve in the session that saved
    the file (a reopened file said "reached" of targets moved since; QA helper). The
    property's SKIP_SAVE keeps it out of presets only, not out of the file."""
    for obj in objects:
        if obj.type == "ARMATURE" and obj.library is None and obj.tendon.status:
            obj.tendon.status = ""


def store_property(store: str, name: str, holds: str) -> Any:
    """One of a bone's stores: a hidden float array of its settings' values."""
    return FloatVectorProperty(
        name=name,
        size=len(STORE_DEFAULTS[store]),
        default=STORE_DEFAULTS[store],
        options={"HIDDEN"},
        description=f"{holds} in one array (read them by their names)",
    )


def axis_properties() -> dict[str, Any]:
    """Per-axis limit and tension settings (x, y, z), built once rather than spelt out."""
    found: dict[str, Any] = {}
    for axis in "xyz":
        upper = axis.upper()
        found[f"lock_{axis}"] = BoolProperty(
            name=f"Lock {upper}",
            description=f"No rotation about {upper}",
            update=limits_changed,
            **limit_accessors(f"lock_{axis}"),
        )
        found[f"use_limit_{axis}"] = BoolProperty(
            name=f"Limit {upper}",
            description=f"Limit the {upper} angle",
            update=limits_changed,
            **limit_accessors(f"use_limit_{axis}"),
        )
        found[f"min_{axis}"] = FloatProperty(
            name=f"Min {upper}",
            default=-math.pi,
            soft_min=-math.pi,
            soft_max=math.pi,
            subtype="ANGLE",
            update=limits_changed,
            **limit_accessors(f"min_{axis}"),
        )
        found[f"max_{axis}"] = FloatProperty(
            name=f"Max {upper}",
            default=math.pi,
            soft_min=-math.pi,
            soft_max=math.pi,
            subtype="ANGLE",
            update=limits_changed,
            **limit_accessors(f"max_{axis}"),
        )
        for sign in ("negative", "positive"):
            found[f"threshold_{sign}_{axis}"] = FloatProperty(
                name=f"Threshold {sign.title()} {upper}",
                default=TENSION_THRESHOLD,
                min=1e-3,
                max=2 * math.pi,
                subtype="ANGLE",
                description=f"Tension: the {sign} {upper} angle where the joint's resistance becomes a wall",
                update=limits_changed,
                **limit_accessors(f"threshold_{sign}_{axis}"),
            )
            found[f"rigidity_{sign}_{axis}"] = FloatProperty(
                name=f"Rigidity {sign.title()} {upper}",
                default=TENSION_RIGIDITY,
                min=0.0,
                max=1000.0,
                description=f"Tension: how strongly the joint resists {sign} {upper} rotation",
                update=limits_changed,
                **limit_accessors(f"rigidity_{sign}_{axis}"),
            )
    return found


class TendonBoneLimits(PropertyGroup):
    """Joint limits of one pose bone, on Euler angles of its rotation relative to rest. The
    named settings are views of `limit_store`, `scale_store` and `frame_store` (see
    `STORES`); reset a bone's limits with ``property_unset("limit_store")`` and
    ``property_unset("frame_store")``."""

    limit_store: store_property("limit_store", "Stored Limits", "The bone's limit and tension settings")
    scale_store: store_property("scale_store", "Stored Scale Limits", "The bone's scale limits")
    frame_store: store_property("frame_store", "Stored Limit Frame", "The turn to the bone's limit axes")
    euler_order: EnumProperty(
        name="Euler Order",
        items=EULER_ITEMS,
        default=EULER_ITEMS[0][0],
        update=limits_changed,
        **limit_accessors("euler_order"),
    )
    limit_roll: FloatProperty(
        name="Axis Roll",
        default=STORES[LIMIT_STORE]["limit_roll"][0],
        subtype="ANGLE",
        description="The limit axes are the bone's own, turned about its Y axis by this angle "
        "(Human Limits sets it from the bone's geometry, so the rig's bone roll does not matter)",
        update=limits_changed,
        **limit_accessors("limit_roll"),
    )
    limit_frame: FloatVectorProperty(
        name="Axis Frame",
        size=4,
        subtype="QUATERNION",
        default=(1.0, 0.0, 0.0, 0.0),
        description="The turn from the bone's axes to the axes Axis Roll turns about: identity for a bone "
        "that points along its limb; Human Limits sets it for one that points elsewhere (an FBX import's "
        "sideways bones), so the limit Y axis is the twist along the limb",
        update=limits_changed,
        **limit_accessors("limit_frame"),
    )
    limit_neutral: FloatVectorProperty(
        name="Neutral",
        size=4,
        subtype="QUATERNION",
        default=(1.0, 0.0, 0.0, 0.0),
        description="The rotation from rest (in the limit axes) the limits are measured from: "
        "Human Limits sets a standing pose here when the rest is not one (a T-pose or stranger), "
        "so the ranges are the body's own numbers",
        update=limits_changed,
        **limit_accessors("limit_neutral"),
    )
    # Scale limits are read at each solve (not part of the native rig): no update callback.
    use_scale_limit: BoolProperty(
        name="Limit Scale",
        description="Limit the scale scale targets give this bone",
        **limit_accessors("use_scale_limit"),
    )
    scale_min: FloatVectorProperty(
        name="Min Scale", size=3, default=(0.5, 0.5, 0.5), min=1e-3, soft_max=10.0, **limit_accessors("scale_min")
    )
    scale_max: FloatVectorProperty(
        name="Max Scale", size=3, default=(2.0, 2.0, 2.0), min=1e-3, soft_max=10.0, **limit_accessors("scale_max")
    )
    __annotations__.update(axis_properties())


def overridable(cls: Any) -> Any:
    """`cls` with every setting editable on a library override of a linked armature (and
    effectors and spring chains addable there): without the flags Blender keeps none of
    the changes when the file is saved (the effectors' settings, limits, solver and live
    mode came back as the library had them) and adding an effector raised an error."""
    for deferred in cls.__annotations__.values():
        if "get" in deferred.keywords:
            # A view of a stored array (the limits): the array itself is overridden.
            continue
        flags = {"LIBRARY_OVERRIDABLE"}
        if deferred.function is CollectionProperty:
            flags.add("USE_INSERTION")
        deferred.keywords.setdefault("override", flags)
    return cls


classes = tuple(
    overridable(cls)
    for cls in (TendonEffector, TendonSpring, TendonHumanRole, TendonArmatureSettings, TendonBoneLimits)
)


def register() -> None:
    bpy.types.Object.tendon = PointerProperty(type=TendonArmatureSettings, override={"LIBRARY_OVERRIDABLE"})
    bpy.types.PoseBone.tendon = PointerProperty(type=TendonBoneLimits)
    bpy.types.Action.tendon_spring_input = StringProperty(
        name="Spring Input",
        description="The action holding the animation spring chains were baked from: baking again swings them "
        "from it, not from the bake (empty, or no such action: from this action)",
    )
    if migrate_on_load not in bpy.app.handlers.load_post:
        bpy.app.handlers.load_post.append(migrate_on_load)
    # Enabled in a session with a file open (not at start-up, when data is not readable yet).
    if isinstance(bpy.data, bpy.types.BlendData):
        migrate_limits(bpy.data.objects)


def unregister() -> None:
    while migrate_on_load in bpy.app.handlers.load_post:
        bpy.app.handlers.load_post.remove(migrate_on_load)
    del bpy.types.Action.tendon_spring_input
    del bpy.types.PoseBone.tendon
    del bpy.types.Object.tendon
