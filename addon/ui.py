"""The "Tendon" tab of the 3D viewport's sidebar: drawing only."""

from typing import Any

import bpy
from bpy.types import Context, Panel, UIList

from . import native
from .solve import armature_problem


class TendonPanel:
    bl_space_type = "VIEW_3D"
    bl_region_type = "UI"
    bl_category = "Tendon"


def armature_or_reason(context: Context) -> tuple[bpy.types.Object | None, str | None]:
    obj = context.active_object
    return obj, armature_problem(obj)


class TendonSubPanel(TendonPanel):
    """A panel under the main one, shown when the active object is an armature Tendon can pose."""

    bl_parent_id = "TENDON_PT_main"

    @classmethod
    def poll(cls, context: Context) -> bool:
        return armature_or_reason(context)[1] is None


class TENDON_PT_main(TendonPanel, Panel):
    bl_label = "Tendon IK"

    def draw(self, context: Context) -> None:
        layout = self.layout
        obj, problem = armature_or_reason(context)
        if problem:
            layout.label(text=problem, icon="INFO")
            if obj is not None and obj.type == "ARMATURE" and obj.library is None and obj.mode != "POSE":
                layout.operator("object.mode_set", text="Pose Mode", icon="POSE_HLT").mode = "POSE"
            return
        settings = obj.tendon
        layout.prop(settings, "solver")
        defaults = native.solver_defaults(settings.solver)
        column = layout.column(align=True)
        iterations = defaults.get("max_iterations")
        column.prop(settings, "iterations", text=f"Iterations (0: {iterations})" if iterations else "Iterations")
        column.prop(settings, "tolerance")
        if "damping" in defaults:
            column.prop(settings, "damping")
        if settings.solver == "TENSION":
            column = layout.column(align=True)
            column.prop(settings, "tension_reference")
            if settings.tension_reference == "ACTION":
                column.prop(settings, "reference_action", text="")
                column.prop(settings, "reference_frame")
        row = layout.row(align=True)
        row.prop(settings, "exclusive_chains", toggle=True)
        row.prop(settings, "move_root", toggle=True)
        row = layout.row(align=True)
        row.scale_y = 1.4
        row.operator("tendon.solve", icon="CON_KINEMATIC")
        row.prop(settings, "live", toggle=True, icon="PLAY" if not settings.live else "PAUSE")
        row = layout.row(align=True)
        row.operator("tendon.reset_pose", icon="LOOP_BACK")
        row.operator("tendon.bake", icon="ACTION")
        if settings.status:
            layout.label(text=settings.status)
        if not native.solver_defaults("FABRIK"):
            layout.label(text=native.native_status(), icon="ERROR")


class EnabledItemList(UIList):
    """A list row: the item's enabled checkbox and a label from `describe`."""

    icon = "BONE_DATA"

    def describe(self, item: Any) -> str:
        raise NotImplementedError

    def draw_item(
        self,
        _context: Context,
        layout: bpy.types.UILayout,
        _data: Any,
        item: Any,
        _icon: int,
        _active_data: Any,
        _active_property: str,
        _index: int = 0,
        _flt_flag: int = 0,
    ) -> None:
        row = layout.row(align=True)
        row.prop(item, "enabled", text="")
        row.label(text=self.describe(item), icon=self.icon)


class TENDON_UL_effectors(EnabledItemList):
    def describe(self, item: Any) -> str:
        target = item.target.name if item.target else "no target"
        if item.subtarget:
            target += f" : {item.subtarget}"
        return f"{item.bone or '(no bone)'} \u2192 {target}"


class TENDON_PT_effectors(TendonSubPanel, Panel):
    bl_label = "Effectors"

    def draw(self, context: Context) -> None:
        layout = self.layout
        obj = context.active_object
        settings = obj.tendon
        row = layout.row()
        row.template_list("TENDON_UL_effectors", "", settings, "effectors", settings, "active_effector_index", rows=3)
        buttons = row.column(align=True)
        buttons.operator("tendon.add_effector", text="", icon="ADD")
        buttons.operator("tendon.remove_effector", text="", icon="REMOVE")
        row = layout.row(align=True)
        row.operator("tendon.import_blender_ik", icon="IMPORT")
        row.operator("tendon.import_limits", icon="CON_ROTLIMIT")
        if not settings.effectors:
            layout.label(text="Select a bone and press + to add an effector", icon="INFO")
            return
        if not 0 <= settings.active_effector_index < len(settings.effectors):
            return
        effector = settings.effectors[settings.active_effector_index]
        column = layout.column()
        column.prop_search(effector, "bone", obj.data, "bones")
        if effector.bone and effector.bone not in obj.data.bones:
            column.label(text=f"No bone '{effector.bone}' in this armature", icon="ERROR")
        column.prop(effector, "target")
        if effector.target is None:
            column.label(text="Pick a target object", icon="ERROR")
        elif effector.target.type == "ARMATURE":
            column.prop_search(effector, "subtarget", effector.target.data, "bones")
        column.prop(effector, "chain_length")
        column.prop(effector, "weight")
        column.prop(effector, "use_tail")
        column.prop(effector, "use_scale")
        row = column.row(align=True)
        row.prop(effector, "use_rotation")
        sub = row.row()
        sub.active = effector.use_rotation
        sub.prop(effector, "rotation_weight", text="Weight")
        column.prop(effector, "pole_target")
        if effector.pole_target is not None:
            if effector.pole_target.type == "ARMATURE":
                column.prop_search(effector, "pole_subtarget", effector.pole_target.data, "bones")
            column.prop(effector, "pole_angle")


class TENDON_UL_springs(EnabledItemList):
    icon = "FORCE_HARMONIC"

    def describe(self, item: Any) -> str:
        return f"{item.bone or '(no bone)'} ({item.chain_length or 'all'} bones)"


class TENDON_PT_springs(TendonSubPanel, Panel):
    bl_label = "Spring Chains"
    bl_options = {"DEFAULT_CLOSED"}

    def draw(self, context: Context) -> None:
        layout = self.layout
        obj = context.active_object
        settings = obj.tendon
        row = layout.row()
        row.template_list("TENDON_UL_springs", "", settings, "springs", settings, "active_spring_index", rows=2)
        buttons = row.column(align=True)
        buttons.operator("tendon.add_spring", text="", icon="ADD")
        buttons.operator("tendon.remove_spring", text="", icon="REMOVE")
        if not 0 <= settings.active_spring_index < len(settings.springs):
            layout.label(text="Tails, ears and hair swing and settle when baked", icon="INFO")
            return
        spring = settings.springs[settings.active_spring_index]
        column = layout.column()
        column.prop_search(spring, "bone", obj.data, "bones")
        for name in ("chain_length", "mass", "stiffness", "damping", "gravity"):
            column.prop(spring, name)


class TENDON_PT_limits(TendonSubPanel, Panel):
    bl_label = "Joint Limits"
    bl_options = {"DEFAULT_CLOSED"}

    def draw(self, context: Context) -> None:
        layout = self.layout
        pose_bone = context.active_pose_bone
        if pose_bone is None:
            layout.label(text="Select a bone to edit its limits", icon="INFO")
            return
        limits = pose_bone.tendon
        layout.label(text=pose_bone.name, icon="BONE_DATA")
        layout.prop(limits, "euler_order")
        layout.prop(limits, "limit_roll")
        if tuple(limits.limit_frame) != (1.0, 0.0, 0.0, 0.0):
            layout.prop(limits, "limit_frame")
        if tuple(limits.limit_neutral) != (1.0, 0.0, 0.0, 0.0):
            layout.prop(limits, "limit_neutral")
        row = layout.row()
        row.prop(limits, "use_scale_limit")
        if limits.use_scale_limit:
            layout.prop(limits, "scale_min")
            layout.prop(limits, "scale_max")
        for axis in "xyz":
            box = layout.box()
            row = box.row(align=True)
            row.prop(limits, f"lock_{axis}", toggle=True)
            sub = row.row(align=True)
            sub.active = not getattr(limits, f"lock_{axis}")
            sub.prop(limits, f"use_limit_{axis}", toggle=True)
            if getattr(limits, f"use_limit_{axis}") and not getattr(limits, f"lock_{axis}"):
                row = box.row(align=True)
                row.prop(limits, f"min_{axis}", text="Min")
                row.prop(limits, f"max_{axis}", text="Max")
                if getattr(limits, f"min_{axis}") > getattr(limits, f"max_{axis}"):
                    box.label(text="Min is above Max", icon="ERROR")
            row = box.row(align=True)
            row.label(text="Tension")
            for sign in ("negative", "positive"):
                column = row.column(align=True)
                column.prop(limits, f"threshold_{sign}_{axis}", text=f"{sign[:3].title()} Threshold")
                column.prop(limits, f"rigidity_{sign}_{axis}", text=f"{sign[:3].title()} Rigidity")


class TENDON_UL_human_roles(UIList):
    """A role of Human Limits' mapping, its bone (editable; held bones are listed only) and
    how it was found."""

    def draw_item(
        self,
        context: Context,
        layout: bpy.types.UILayout,
        _data: Any,
        item: Any,
        _icon: int,
        _active_data: Any,
        _active_property: str,
        _index: int = 0,
        _flt_flag: int = 0,
    ) -> None:
        row = layout.row(align=True)
        split = row.split(factor=0.3)
        split.label(text=item.role if not item.held else "held")
        # The bone, then how it was found (a name convention, topology, given by hand).
        rest = split.split(factor=0.6)
        obj = context.active_object
        if item.held or obj is None or obj.type != "ARMATURE":
            rest.label(text=item.bone, icon="LOCKED" if item.held else "BONE_DATA")
        else:
            rest.prop_search(item, "bone", obj.data, "bones", text="")
        rest.label(text=item.how)


class TENDON_PT_human(TendonSubPanel, Panel):
    bl_label = "Human Limits"
    bl_options = {"DEFAULT_CLOSED"}

    def draw(self, context: Context) -> None:
        layout = self.layout
        settings = context.active_object.tendon
        row = layout.row(align=True)
        row.scale_y = 1.2
        row.operator("tendon.human_limits", icon="ARMATURE_DATA")
        if settings.human_roles:
            row.operator("tendon.human_limits", text="", icon="FILE_REFRESH").recognise = True
        if settings.human_summary:
            layout.label(text=settings.human_summary)
        if not settings.human_roles:
            layout.label(text="Recognises the humanoid and limits its joints", icon="INFO")
            return
        layout.template_list(
            "TENDON_UL_human_roles", "", settings, "human_roles", settings, "active_human_role_index", rows=6
        )
        layout.label(text="Correct a bone, then press Human Limits again", icon="INFO")


classes = (
    TENDON_UL_effectors,
    TENDON_UL_springs,
    TENDON_PT_main,
    TENDON_PT_effectors,
    TENDON_PT_springs,
    TENDON_PT_limits,
    TENDON_UL_human_roles,
    TENDON_PT_human,
)
