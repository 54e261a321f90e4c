"""Operators (``bpy.ops.tendon.*``): solve, effectors, imports from Blender's own IK setup,
and resetting the pose. Each has a poll that says what is missing, reports, and undo."""

# No `from __future__ import annotations`: Blender reads operator properties' annotations.
from typing import Any, ClassVar

import bpy
import numpy as np
from bpy.props import BoolProperty, EnumProperty, IntProperty
from bpy.types import Context, Operator

from . import bake, human, keys, rig, solve
from .native import TendonUserError

#: Blender rotation modes that are Euler orders (every mode but these two).
NOT_EULER = ("QUATERNION", "AXIS_ANGLE")


def poll_armature(cls: Any, context: Context) -> bool:
    """True when the active object is an editable armature in Pose Mode; otherwise sets
    the reason Blender shows on the disabled button."""
    problem = solve.armature_problem(context.active_object)
    if problem:
        cls.poll_message_set(problem)
        return False
    return True


def poll_active_bone(cls: Any, context: Context, missing: str) -> bool:
    """`poll_armature`, and an active bone (else `missing` is the reason shown)."""
    if not poll_armature(cls, context):
        return False
    if context.active_pose_bone is None:
        cls.poll_message_set(missing)
        return False
    return True


def poll_active_item(cls: Any, context: Context, collection: str, missing: str) -> bool:
    """`poll_armature`, and a selected item in the armature's `collection` (effectors or
    springs), whose index is `active_<singular>_index`."""
    if not poll_armature(cls, context):
        return False
    settings = context.active_object.tendon
    index = getattr(settings, f"active_{collection[:-1]}_index")
    if not 0 <= index < len(getattr(settings, collection)):
        cls.poll_message_set(missing)
        return False
    return True


def has_effectors(cls: Any, context: Context) -> bool:
    if not poll_armature(cls, context):
        return False
    if not any(effector.enabled for effector in context.active_object.tendon.effectors):
        cls.poll_message_set("Add an effector first (Tendon tab, Effectors)")
        return False
    return True


def report_outcome(operator: Operator, obj: bpy.types.Object, outcome: solve.SolveOutcome) -> None:
    for warning in outcome.warnings:
        operator.report({"WARNING"}, warning)
    operator.report({"INFO"} if outcome.reached else {"WARNING"}, outcome.summary())
    obj.tendon.status = outcome.status()


def override_limits_problem(obj: bpy.types.Object) -> str | None:
    """Why bone limits cannot be written on `obj`: on a library override Blender keeps no
    pose bone setting of Tendon's when the file is saved (made overridable, Blender 5.0
    still dropped those of bones whose library bone had none), so limits are set in the
    library's file."""
    if obj.override_library is None:
        return None
    reference = obj.override_library.reference
    library = reference.library if reference is not None else None
    where = f" ('{library.filepath}')" if library is not None else ""
    return (
        f"Armature '{obj.name}' is a library override: its bones' limits come from the library file{where}; "
        "set them there"
    )


#: The pose channels a solve may write, and their widths.
KEYABLE_CHANNELS = (
    ("rotation_quaternion", 4),
    ("rotation_euler", 3),
    ("rotation_axis_angle", 4),
    ("location", 3),
    ("scale", 3),
)


def channel_snapshot(obj: bpy.types.Object) -> dict[str, np.ndarray]:
    """Every pose bone's channels, in bulk (to tell afterwards which a solve changed)."""
    pose_bones = obj.pose.bones
    snapshot = {}
    for name, width in KEYABLE_CHANNELS:
        values = np.empty(len(pose_bones) * width, np.float32)
        pose_bones.foreach_get(name, values)
        snapshot[name] = values.reshape(-1, width)
    return snapshot


def auto_key(context: Context, obj: bpy.types.Object, before: dict[str, np.ndarray]) -> int:
    """With Auto Keying on, keys the channels the solve changed at the current frame, as
    Blender's own transforms do (only channels already animated when the preferences ask
    for that, only existing keys in Replace mode): on an animated armature the solve was
    lost at the next frame change.
    Returns how many bones were keyed."""
    options = {"INSERTKEY_AVAILABLE"} if context.preferences.edit.use_keyframe_insert_available else set()
    if context.scene.tool_settings.auto_keying_mode == "REPLACE_KEYS":
        # Replace mode changes existing keys only (it added keys where none were; QA helper).
        options.add("INSERTKEY_REPLACE")
    after = channel_snapshot(obj)
    pose_bones = obj.pose.bones
    frame = context.scene.frame_current
    keyed: set[int] = set()
    for name, _width in KEYABLE_CHANNELS:
        changed = np.nonzero(np.abs(after[name] - before[name]).max(axis=1) > 0.0)[0]
        for index in changed.tolist():
            pose_bone = pose_bones[index]
            if pose_bone.keyframe_insert(name, frame=frame, group=pose_bone.name, options=options):
                keyed.add(index)
    return len(keyed)


class TENDON_OT_solve(Operator):
    """Solve the active armature's effectors at the current frame"""

    bl_idname = "tendon.solve"
    bl_label = "Solve IK"
    bl_options: ClassVar[set[str]] = {"REGISTER", "UNDO"}

    @classmethod
    def poll(cls, context: Context) -> bool:
        return has_effectors(cls, context)

    def execute(self, context: Context) -> set[str]:
        obj = context.active_object
        # Bones outside the chains start where Blender last evaluated them: make sure that
        # is now. Nothing is re-evaluated when nothing changed.
        context.view_layer.update()
        before = channel_snapshot(obj) if context.scene.tool_settings.use_keyframe_insert_auto else None
        try:
            outcome = solve.solve(obj)
        except TendonUserError as problem:
            obj.tendon.status = str(problem)
            self.report({"ERROR"}, str(problem))
            return {"CANCELLED"}
        keyed = auto_key(context, obj, before) if before is not None else 0
        # The status is measured in the pose Blender shows. This update would follow the
        # operator anyway; it only happens earlier.
        with rig.own_pose_update(obj):
            context.view_layer.update()
        outcome.measure(obj)
        report_outcome(self, obj, outcome)
        if keyed:
            message = f"Auto Keying: keyed {keyed} bone(s) at frame {context.scene.frame_current}"
            obj.tendon.status = f"{obj.tendon.status}; {message}"
            self.report({"INFO"}, message)
        return {"FINISHED"}


class TENDON_OT_add_effector(Operator):
    """Add an effector for the active bone. Its target is the selected object or bone, or
    else a new Empty at the bone's tail"""

    bl_idname = "tendon.add_effector"
    bl_label = "Add Effector"
    bl_options: ClassVar[set[str]] = {"REGISTER", "UNDO"}

    chain_length: IntProperty(
        name="Chain Length",
        default=2,
        min=0,
        max=255,
        description="Bones the effector moves, counting its own (0: up to the root)",
    )

    @classmethod
    def poll(cls, context: Context) -> bool:
        return poll_active_bone(cls, context, "Select the bone that should reach (make it active)")

    def execute(self, context: Context) -> set[str]:
        obj = context.active_object
        pose_bone = context.active_pose_bone
        settings = obj.tendon
        effector = settings.effectors.add()
        effector.bone = pose_bone.name
        effector.chain_length = self.chain_length
        other_objects = [o for o in context.selected_objects if o != obj]
        selected_bones = context.selected_pose_bones or []
        other_bones = [b for b in selected_bones if b != pose_bone and b.id_data == obj]
        # A bone selected on another selected armature in Pose Mode is the target, not that
        # armature's origin (its tip ended 0.9 from the bone; QA helper); a selected object
        # of another kind (an Empty) is picked before it.
        foreign_bones = [b for b in selected_bones if b.id_data != obj and b.id_data in other_objects]
        if foreign_bones and all(o.type == "ARMATURE" for o in other_objects):
            effector.target = foreign_bones[0].id_data
            effector.subtarget = foreign_bones[0].name
        elif other_objects:
            effector.target = other_objects[0]
        elif other_bones:
            effector.target = obj
            effector.subtarget = other_bones[0].name
        else:
            effector.target = self.new_target(context, obj, pose_bone)
        settings.active_effector_index = len(settings.effectors) - 1
        target = effector.target.name + (f" : {effector.subtarget}" if effector.subtarget else "")
        message = f"Effector for bone '{pose_bone.name}' follows '{target}'"
        # The last solve's status counted the effectors before this one.
        obj.tendon.status = f"{message}; not solved yet"
        self.report({"INFO"}, message)
        return {"FINISHED"}

    @staticmethod
    def new_target(context: Context, obj: bpy.types.Object, pose_bone: bpy.types.PoseBone) -> bpy.types.Object:
        """An Empty at the bone's tail, oriented like the bone, in the armature's collection."""
        empty = bpy.data.objects.new(f"{pose_bone.name}.target", None)
        empty.empty_display_type = "SPHERE"
        empty.empty_display_size = max(0.25 * pose_bone.length, 0.01)
        placement = pose_bone.matrix.copy()
        placement.translation = pose_bone.tail
        empty.matrix_world = obj.matrix_world @ placement
        # The armature's collection, unless it is linked or overridden (no object can be
        # linked there): the scene's then.
        editable = [c for c in obj.users_collection if c.library is None and c.override_library is None]
        collection = editable[0] if editable else context.scene.collection
        collection.objects.link(empty)
        return empty


class TENDON_OT_remove_effector(Operator):
    """Remove the active effector (its target object is kept)"""

    bl_idname = "tendon.remove_effector"
    bl_label = "Remove Effector"
    bl_options: ClassVar[set[str]] = {"REGISTER", "UNDO"}

    @classmethod
    def poll(cls, context: Context) -> bool:
        return poll_active_item(cls, context, "effectors", "No effector is selected")

    def execute(self, context: Context) -> set[str]:
        settings = context.active_object.tendon
        index = settings.active_effector_index
        bone = settings.effectors[index].bone
        try:
            settings.effectors.remove(index)
        except TypeError:
            # On a library override only effectors added there can go.
            self.report(
                {"ERROR"},
                f"The effector of bone '{bone}' comes from the linked library: disable it (its checkbox), "
                "or remove it in the library's file",
            )
            return {"CANCELLED"}
        settings.active_effector_index = max(0, min(index, len(settings.effectors) - 1))
        # Removing an item tags nothing: live mode would keep the last status ("reached").
        context.active_object.update_tag()
        self.report({"INFO"}, f"Removed the effector of bone '{bone}'")
        return {"FINISHED"}


class TENDON_OT_add_spring(Operator):
    """Make the active bone the tip of a spring chain that swings and settles when baking"""

    bl_idname = "tendon.add_spring"
    bl_label = "Add Spring Chain"
    bl_options: ClassVar[set[str]] = {"REGISTER", "UNDO"}

    chain_length: IntProperty(
        name="Chain Length",
        default=3,
        min=0,
        max=255,
        description="Bones that swing, counting the tip (0: to the root)",
    )

    @classmethod
    def poll(cls, context: Context) -> bool:
        return poll_active_bone(cls, context, "Select the chain's tip bone (make it active)")

    def execute(self, context: Context) -> set[str]:
        settings = context.active_object.tendon
        spring = settings.springs.add()
        spring.bone = context.active_pose_bone.name
        spring.chain_length = self.chain_length
        settings.active_spring_index = len(settings.springs) - 1
        self.report({"INFO"}, f"Spring chain of {self.chain_length or 'all'} bone(s) ending at '{spring.bone}'")
        return {"FINISHED"}


class TENDON_OT_remove_spring(Operator):
    """Remove the active spring chain"""

    bl_idname = "tendon.remove_spring"
    bl_label = "Remove Spring Chain"
    bl_options: ClassVar[set[str]] = {"REGISTER", "UNDO"}

    @classmethod
    def poll(cls, context: Context) -> bool:
        return poll_active_item(cls, context, "springs", "No spring chain is selected")

    def execute(self, context: Context) -> set[str]:
        settings = context.active_object.tendon
        index = settings.active_spring_index
        bone = settings.springs[index].bone
        try:
            settings.springs.remove(index)
        except TypeError:
            # On a library override only spring chains added there can go.
            self.report(
                {"ERROR"},
                f"Spring chain {index + 1} comes from the linked library: disable it (its checkbox), "
                "or remove it in the library's file",
            )
            return {"CANCELLED"}
        settings.active_spring_index = max(0, min(index, len(settings.springs) - 1))
        # Said, as removing an effector is (it was silent).
        self.report({"INFO"}, f"Removed spring chain {index + 1} ('{bone}')")
        return {"FINISHED"}


class TENDON_OT_import_blender_ik(Operator):
    """Turn the armature's IK constraints into Tendon effectors and mute the constraints"""

    bl_idname = "tendon.import_blender_ik"
    bl_label = "Import Blender IK"
    bl_options: ClassVar[set[str]] = {"REGISTER", "UNDO"}

    @classmethod
    def poll(cls, context: Context) -> bool:
        return poll_armature(cls, context)

    def execute(self, context: Context) -> set[str]:
        obj = context.active_object
        settings = obj.tendon
        imported = 0
        anim = obj.animation_data
        # Muting a constraint whose mute or influence a driver (not itself muted) or a
        # key sets would not stick (a keyed mute came back at the next frame; QA helper).
        driven = {driver.data_path for driver in anim.drivers if not driver.mute} if anim is not None else set()
        driven |= {fcurve.data_path for fcurve in keys.fcurves_of(obj) or () if not fcurve.mute}
        skipped: list[str] = []
        # Effectors this import has set (a bone with two IK constraints gets two).
        taken: set[int] = set()
        for pose_bone in obj.pose.bones:
            for constraint in pose_bone.constraints:
                if constraint.type != "IK" or constraint.mute:
                    continue
                problem = self.unsupported(pose_bone, constraint) or self.switched(pose_bone, constraint, driven)
                if problem:
                    skipped.append(problem)
                    continue
                # The bone's effector, its target's first (imported again after the
                # constraint's target changed, the bone got a second effector pulling
                # against the first; QA helper).
                own = [k for k, e in enumerate(settings.effectors) if e.bone == pose_bone.name and k not in taken]
                same = [k for k in own if settings.effectors[k].target == constraint.target]
                existing = same or own
                if existing:
                    taken.add(existing[0])
                    effector = settings.effectors[existing[0]]
                else:
                    effector = settings.effectors.add()
                    taken.add(len(settings.effectors) - 1)
                effector.enabled = True
                effector.bone = pose_bone.name
                effector.target = constraint.target
                effector.subtarget = constraint.subtarget
                # Without its tail, Blender's chain starts at the bone's parent and counts
                # from there; Tendon's counts the effector bone itself (imported as it was,
                # the chain missed its top bone and the target by 5 cm).
                counted = constraint.chain_count + (0 if constraint.use_tail or constraint.chain_count == 0 else 1)
                effector.chain_length = counted
                effector.use_tail = constraint.use_tail
                for note in self.differences(pose_bone, constraint, counted):
                    self.report({"WARNING"}, note)
                effector.weight = constraint.weight
                effector.use_rotation = constraint.use_rotation
                effector.rotation_weight = constraint.orient_weight
                effector.pole_target = constraint.pole_target
                effector.pole_subtarget = constraint.pole_subtarget
                effector.pole_angle = constraint.pole_angle
                constraint.mute = True
                imported += 1
        if imported == 0:
            why = f": {'; '.join(skipped)}" if skipped else ""
            self.report({"ERROR"}, f"Armature '{obj.name}' has no enabled IK constraint Tendon can import{why}")
            return {"CANCELLED"}
        for problem in skipped:
            self.report({"WARNING"}, problem)
        settings.active_effector_index = len(settings.effectors) - 1
        self.report({"INFO"}, f"Imported {imported} IK constraint(s) as effectors and muted them")
        return {"FINISHED"}

    @staticmethod
    def differences(pose_bone: bpy.types.PoseBone, constraint: Any, chain_length: int) -> list[str]:
        """What the effector does otherwise than the constraint did, said when imported
        (influence and stretch were dropped unsaid: the joints landed 0.4-1.3 away from
        Blender's pose)."""
        where = f"IK constraint '{constraint.name}' on bone '{pose_bone.name}'"
        notes = []
        if constraint.influence < 1.0:
            notes.append(f"{where} had influence {constraint.influence:g}: the effector solves fully")
        bones, bone = [], pose_bone
        while bone is not None and (chain_length == 0 or len(bones) < chain_length):
            bones.append(bone)
            bone = bone.parent
        stretchy = [b.name for b in bones if b.ik_stretch > 0.0]
        if constraint.use_stretch and stretchy:
            notes.append(f"{where} stretched bone '{stretchy[0]}' (IK Stretch): Tendon keeps bone lengths")
        return notes

    @staticmethod
    def switched(pose_bone: bpy.types.PoseBone, constraint: Any, driven: set[str]) -> str | None:
        """Why a constraint whose muting or influence a driver or a key sets (`driven`: the
        armature's animated data paths) cannot be imported: the mute written would not
        stick (Rigify's generated rig switches its limbs' IK this way: the import said it
        muted 4 constraints, none stayed muted, and every solve then refused the effectors;
        QA helper)."""
        bone, name = bpy.utils.escape_identifier(pose_bone.name), bpy.utils.escape_identifier(constraint.name)
        path = f'pose.bones["{bone}"].constraints["{name}"]'
        switched = [setting for setting in ("mute", "influence") if f"{path}.{setting}" in driven]
        if not switched:
            return None
        return (
            f"IK constraint '{constraint.name}' on bone '{pose_bone.name}' has its {switched[0]} set by a "
            "driver or keys (a rig's IK/FK switch), so Tendon cannot mute it; not imported: put effectors "
            "on the rig's FK controls instead"
        )

    @staticmethod
    def unsupported(pose_bone: bpy.types.PoseBone, constraint: Any) -> str | None:
        where = f"IK constraint '{constraint.name}' on bone '{pose_bone.name}'"
        if constraint.target is None:
            return f"{where} has no target (auto IK); not imported"
        if getattr(constraint, "ik_type", "COPY_POSE") != "COPY_POSE":
            return f"{where} is an iTaSC distance constraint; not imported"
        if not constraint.use_location:
            return f"{where} only matches rotation; not imported"
        return None


class TENDON_OT_import_limits(Operator):
    """Read Limit Rotation constraints (Local Space) and the bones' IK locks, limits and
    stiffness into Tendon's joint limits"""

    bl_idname = "tendon.import_limits"
    bl_label = "Import Limits"
    bl_options: ClassVar[set[str]] = {"REGISTER", "UNDO"}

    @classmethod
    def poll(cls, context: Context) -> bool:
        return poll_armature(cls, context)

    def execute(self, context: Context) -> set[str]:
        obj = context.active_object
        problem = override_limits_problem(obj)
        if problem:
            self.report({"ERROR"}, problem)
            return {"CANCELLED"}
        bones = 0
        for pose_bone in obj.pose.bones:
            if self.import_bone(pose_bone):
                bones += 1
        self.report({"INFO"}, f"Imported the limits of {bones} bone(s)")
        return {"FINISHED"}

    def import_bone(self, pose_bone: bpy.types.PoseBone) -> bool:
        """Maps one bone's limits; returns whether it had any."""
        limits = pose_bone.tendon
        found = False
        default = limits.bl_rna.properties["euler_order"].default
        order = pose_bone.rotation_mode if pose_bone.rotation_mode not in NOT_EULER else default
        ranges: dict[str, tuple[float, float]] = {}
        for constraint in pose_bone.constraints:
            if constraint.type != "LIMIT_ROTATION" or constraint.mute:
                continue
            # At influence 0 it limits nothing in Blender (imported, its ranges clamped a
            # target Blender's pose reaches, 0.12 off; QA helper); part influence only
            # part-limits, which Tendon's ranges cannot.
            if constraint.influence <= 0.0:
                self.report(
                    {"WARNING"},
                    f"Limit Rotation '{constraint.name}' on bone '{pose_bone.name}' has influence 0 and limits "
                    "nothing; not imported",
                )
                continue
            if constraint.influence < 1.0:
                self.report(
                    {"WARNING"},
                    f"Limit Rotation '{constraint.name}' on bone '{pose_bone.name}' has influence "
                    f"{constraint.influence:g}: imported as full limits (Tendon's ranges hold fully)",
                )
            if constraint.owner_space != "LOCAL":
                self.report(
                    {"WARNING"},
                    f"Limit Rotation '{constraint.name}' on bone '{pose_bone.name}' is in "
                    f"{constraint.owner_space} space; only Local Space limits are imported",
                )
                continue
            if constraint.euler_order != "AUTO":
                order = constraint.euler_order
            for axis in "xyz":
                if getattr(constraint, f"use_limit_{axis}"):
                    ranges[axis] = intersect(
                        ranges.get(axis), (getattr(constraint, f"min_{axis}"), getattr(constraint, f"max_{axis}"))
                    )
        for axis in "xyz":
            if getattr(pose_bone, f"lock_ik_{axis}"):
                setattr(limits, f"lock_{axis}", True)
                found = True
            if getattr(pose_bone, f"use_ik_limit_{axis}"):
                ik_range = (getattr(pose_bone, f"ik_min_{axis}"), getattr(pose_bone, f"ik_max_{axis}"))
                ranges[axis] = intersect(ranges.get(axis), ik_range)
            stiffness = getattr(pose_bone, f"ik_stiffness_{axis}")
            if stiffness > 0.0:
                # Blender's stiffness (0 to 0.99) as rigidity: 0 stays free, 0.5 gives 1, 0.99 gives 99.
                rigidity = stiffness / (1.0 - stiffness)
                setattr(limits, f"rigidity_negative_{axis}", rigidity)
                setattr(limits, f"rigidity_positive_{axis}", rigidity)
                found = True
        for axis, (low, high) in ranges.items():
            if low > high:
                self.report(
                    {"WARNING"},
                    f"Bone '{pose_bone.name}': the {axis.upper()} limits do not overlap; the axis is locked",
                )
                setattr(limits, f"lock_{axis}", True)
                continue
            setattr(limits, f"use_limit_{axis}", True)
            setattr(limits, f"min_{axis}", low)
            setattr(limits, f"max_{axis}", high)
        if all(getattr(limits, f"lock_{axis}") for axis in "xyz"):
            # Blender's IK puts a bone locked on every axis at rest; Tendon leaves a joint
            # with no freedom as it starts. Held at rest by zero-width ranges instead, the
            # import gives Blender's pose (42.6 degrees apart on a bone posed away from rest;
            # found by a helper review).
            for axis in "xyz":
                setattr(limits, f"lock_{axis}", False)
                setattr(limits, f"use_limit_{axis}", True)
                setattr(limits, f"min_{axis}", 0.0)
                setattr(limits, f"max_{axis}", 0.0)
        if ranges or found:
            limits.euler_order = order
        return bool(ranges) or found


def intersect(current: tuple[float, float] | None, new: tuple[float, float]) -> tuple[float, float]:
    """The overlap of two limit ranges (both given in radians)."""
    if current is None:
        return new
    return (max(current[0], new[0]), min(current[1], new[1]))


class TENDON_OT_reset_pose(Operator):
    """Put the bones the effectors move back to their rest rotation"""

    bl_idname = "tendon.reset_pose"
    bl_label = "Reset Chains"
    bl_options: ClassVar[set[str]] = {"REGISTER", "UNDO"}

    @classmethod
    def poll(cls, context: Context) -> bool:
        return has_effectors(cls, context)

    def execute(self, context: Context) -> set[str]:
        try:
            count = solve.reset_chains(context.active_object)
        except TendonUserError as problem:
            self.report({"ERROR"}, str(problem))
            return {"CANCELLED"}
        message = f"Reset {count} bone(s) to their rest rotation"
        # The last solve's status no longer holds (it said "reached" 1.1 away).
        context.active_object.tendon.status = message
        self.report({"INFO"}, message)
        return {"FINISHED"}


class TENDON_OT_bake(Operator):
    """Bake the effectors' solution onto an action, frame by frame (Esc cancels)"""

    bl_idname = "tendon.bake"
    bl_label = "Bake IK"
    bl_options: ClassVar[set[str]] = {"REGISTER", "UNDO"}

    frame_start: IntProperty(
        name="Start",
        description="First frame to bake (default: the preview range's, else the scene's)",
        min=-1048574,
        # Not remembered for the next bake: set here by each run, it would pin the range.
        options={"SKIP_SAVE"},
    )
    frame_end: IntProperty(
        name="End",
        description="Last frame to bake (default: the preview range's, else the scene's)",
        min=-1048574,
        # Not remembered for the next bake: set here by each run, it would pin the range.
        options={"SKIP_SAVE"},
    )
    step: IntProperty(name="Step", default=1, min=1, max=1000, description="Key every this many frames")
    bones: EnumProperty(
        name="Bones",
        items=[
            ("CHAINS", "Effector Chains", "Key the bones the effectors move"),
            ("ALL", "All Bones", "Key every bone's rotation"),
        ],
        default="CHAINS",
    )
    destination: EnumProperty(
        name="Keys Into",
        items=[
            (
                "NEW_ACTION",
                "New Action",
                "A copy of the current action with the baked range replaced; the old one is kept",
            ),
            ("REPLACE", "Replace Range", "Replace the baked range of the baked channels in the current action"),
        ],
        default="NEW_ACTION",
    )
    start_from: EnumProperty(
        name="Start From",
        items=[
            ("PREVIOUS", "Previous Frame", "Each frame starts from the previous frame's solution (smooth, fast)"),
            ("ANIMATED", "Animated Pose", "Each frame starts from the animated pose (frames independent)"),
        ],
        default="PREVIOUS",
    )
    interpolation: EnumProperty(
        name="Interpolation",
        items=[
            ("LINEAR", "Linear", "Straight lines between keys"),
            ("CONSTANT", "Constant", "Hold each key until the next"),
            ("BEZIER", "Bezier", "Smooth curves with automatic handles"),
        ],
        default="LINEAR",
    )

    _baker: Any = None
    _timer: Any = None

    @classmethod
    def poll(cls, context: Context) -> bool:
        if not poll_armature(cls, context):
            return False
        settings = context.active_object.tendon
        if not any(item.enabled for item in (*settings.effectors, *settings.springs)):
            cls.poll_message_set("Add an effector or a spring chain first (Tendon tab)")
            return False
        return True

    def settings(self, context: Context) -> bake.BakeSettings:
        scene = context.scene
        # Unset, the range is the timeline's: its preview range when that is on (as Blender's
        # Bake Action takes it), else the scene's. Written back, so the redo panel shows the
        # range baked (it showed 0 to 0) and a redo bakes the same one.
        preview = scene.use_preview_range
        if not self.properties.is_property_set("frame_start"):
            self.frame_start = scene.frame_preview_start if preview else scene.frame_start
        if not self.properties.is_property_set("frame_end"):
            self.frame_end = scene.frame_preview_end if preview else scene.frame_end
        return bake.BakeSettings(
            frame_start=self.frame_start,
            frame_end=self.frame_end,
            step=self.step,
            all_bones=self.bones == "ALL",
            new_action=self.destination == "NEW_ACTION",
            path_dependent=self.start_from == "PREVIOUS",
            interpolation=self.interpolation,
        )

    def execute(self, context: Context) -> set[str]:
        try:
            baker = bake.Baker(context.scene, context.active_object, self.settings(context))
        except TendonUserError as problem:
            self.report({"ERROR"}, str(problem))
            return {"CANCELLED"}
        try:
            outcome = baker.finish()
        except TendonUserError as problem:
            # A frame refused mid-range: back to the frame the user was on.
            baker.cancel()
            self.report({"ERROR"}, str(problem))
            return {"CANCELLED"}
        return self.report_outcome(context, outcome)

    def invoke(self, context: Context, _event: Any) -> set[str]:
        try:
            self._baker = bake.Baker(context.scene, context.active_object, self.settings(context))
        except TendonUserError as problem:
            self.report({"ERROR"}, str(problem))
            return {"CANCELLED"}
        window_manager = context.window_manager
        self._timer = window_manager.event_timer_add(0.001, window=context.window)
        window_manager.progress_begin(0, 100)
        window_manager.modal_handler_add(self)
        return {"RUNNING_MODAL"}

    def modal(self, context: Context, event: Any) -> set[str]:
        if event.type == "ESC":
            self._baker.cancel()
            self.stop(context)
            self.report({"WARNING"}, "Bake cancelled; nothing was changed")
            return {"CANCELLED"}
        if event.type != "TIMER":
            return {"RUNNING_MODAL"}
        try:
            done = self._baker.step()
            context.window_manager.progress_update(int(90 * done))
            if done < 1.0:
                return {"RUNNING_MODAL"}
            outcome = self._baker.finish()
        except TendonUserError as problem:
            self._baker.cancel()
            self.stop(context)
            self.report({"ERROR"}, str(problem))
            return {"CANCELLED"}
        self.stop(context)
        return self.report_outcome(context, outcome)

    def stop(self, context: Context) -> None:
        context.window_manager.event_timer_remove(self._timer)
        context.window_manager.progress_end()

    def report_outcome(self, context: Context, outcome: bake.BakeOutcome) -> set[str]:
        for warning in outcome.warnings:
            self.report({"WARNING"}, warning)
        for note in outcome.notes:
            self.report({"INFO"}, note)
        self.report({"INFO"}, outcome.summary())
        # As after a solve, the status line also says which effectors were skipped and why.
        context.active_object.tendon.status = "; ".join([outcome.summary(), *outcome.warnings, *outcome.notes])
        return {"FINISHED"}


class TENDON_OT_human_limits(Operator):
    """Recognise the armature's humanoid bones (by the names of common conventions, else by
    topology) and give them human joint limits and tension. The role mapping is kept: correct
    it in the list and press again to apply the corrections"""

    bl_idname = "tendon.human_limits"
    bl_label = "Human Limits"
    bl_options: ClassVar[set[str]] = {"REGISTER", "UNDO"}

    source: EnumProperty(
        name="Axes From",
        items=[
            (
                "AUTO",
                "Auto",
                "The rest pose (an elbow or knee straight in rest takes its hinge from the current pose), "
                "or the current pose when the rest pose does not stand",
            ),
            ("REST", "Rest Pose", "Directions and bends of the rest pose"),
            (
                "POSE",
                "Current Pose",
                "Directions and bends of the current pose (choose a frame where the character stands "
                "with elbows and knees a little bent); limits stay relative to rest",
            ),
        ],
        default="AUTO",
    )
    recognise: BoolProperty(
        name="Recognise Again",
        default=False,
        description="Forget the stored (corrected) role mapping and recognise the bones afresh",
    )

    @classmethod
    def poll(cls, context: Context) -> bool:
        return poll_armature(cls, context)

    def execute(self, context: Context) -> set[str]:
        obj = context.active_object
        problem = override_limits_problem(obj)
        if problem:
            self.report({"ERROR"}, problem)
            return {"CANCELLED"}
        context.view_layer.update()
        try:
            outcome = human.apply(obj, self.source, self.recognise)
        except TendonUserError as problem:
            self.report({"ERROR"}, str(problem))
            return {"CANCELLED"}
        for note in outcome.notes:
            self.report({"INFO"}, note)
        self.report({"INFO"}, outcome.summary())
        return {"FINISHED"}


classes = (
    TENDON_OT_solve,
    TENDON_OT_bake,
    TENDON_OT_add_effector,
    TENDON_OT_remove_effector,
    TENDON_OT_add_spring,
    TENDON_OT_remove_spring,
    TENDON_OT_import_blender_ik,
    TENDON_OT_import_limits,
    TENDON_OT_reset_pose,
    TENDON_OT_human_limits,
)
