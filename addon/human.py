"""Human Limits: recognise the armature's humanoid bones (``tendon.humanoid``) and write
anatomical joint limits into their Tendon settings. Reads the rest (and, when asked, the
current pose) in bulk; keeps the role mapping on the armature so it can be corrected."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import bpy
import numpy as np

from . import native, props
from .native import TendonUserError

#: How roles are listed: the column from the hips up, then each limb from the body out.
ROLE_ORDER = (
    "hips",
    *(f"spine.{k}" for k in range(1, 10)),
    "chest",
    *(f"neck.{k}" for k in range(1, 10)),
    "head",
    *(f"{part}.{side}" for side in ("L", "R") for part in ("clavicle", "upper_arm", "forearm", "hand")),
    *(f"{part}.{side}" for side in ("L", "R") for part in ("thigh", "shin", "foot", "toe")),
)


@dataclass
class Outcome:
    """What Human Limits did, for the report and the panel."""

    joints: int
    held: int
    unrecognised: int
    convention: str
    from_pose: bool
    notes: list[str]
    #: Whether hinges straight in rest were read from the current pose (Auto).
    hinges_from_pose: bool = False

    def summary(self) -> str:
        source = "from the current pose" if self.from_pose else "from the rest pose"
        if self.hinges_from_pose and not self.from_pose:
            source += ", straight hinges from the current pose"
        return (
            f"Human limits on {self.joints} joints ({self.convention}; axes {source}), "
            f"{self.held} held where they are, {self.unrecognised} bones unrecognised"
        )


def rest_arrays(obj: bpy.types.Object) -> tuple[list[str], list[int], np.ndarray, np.ndarray, np.ndarray]:
    """Names, parent indices, heads, tails (armature space) and rest matrices (row-major)
    of the armature's bones, read in bulk."""
    bones = obj.data.bones
    n = len(bones)
    names = [bone.name for bone in bones]
    index = {name: i for i, name in enumerate(names)}
    parents = [index[bone.parent.name] if bone.parent else -1 for bone in bones]
    heads = np.empty(n * 3, np.float32)
    bones.foreach_get("head_local", heads)
    tails = np.empty(n * 3, np.float32)
    bones.foreach_get("tail_local", tails)
    matrices = np.empty(n * 16, np.float32)
    bones.foreach_get("matrix_local", matrices)
    # foreach_get gives each matrix column by column: transposed, they are row-major.
    return names, parents, heads.reshape(n, 3), tails.reshape(n, 3), matrices.reshape(n, 4, 4).transpose(0, 2, 1)


def pose_arrays(obj: bpy.types.Object, names: list[str]) -> np.ndarray:
    """The pose Blender last evaluated (armature space, row-major), in `names`' order."""
    pose_bones = obj.pose.bones
    n = len(pose_bones)
    matrices = np.empty(n * 16, np.float32)
    pose_bones.foreach_get("matrix", matrices)
    order = {pose_bone.name: i for i, pose_bone in enumerate(pose_bones)}
    return matrices.reshape(n, 4, 4).transpose(0, 2, 1)[[order[name] for name in names]]


def stored_roles(obj: bpy.types.Object) -> dict[str, str]:
    """The role mapping kept on the armature (as corrected): role -> bone ("" = none)."""
    return {item.role: item.bone for item in obj.tendon.human_roles if not item.held}


def apply(obj: bpy.types.Object, source: str, recognise: bool) -> Outcome:
    """Recognises the humanoid (the stored, possibly corrected, mapping unless `recognise`),
    writes limits into the pose bones' Tendon settings and stores the mapping. `source`:
    ``'REST'``, ``'POSE'`` (directions and bends read from the current pose) or ``'AUTO'``
    (the rest pose, with the hinge of an elbow or knee straight in rest read from the
    current pose; all from the current pose when the rest pose does not stand). Raises
    TendonUserError (nothing changed) when no humanoid is found."""
    humanoid = native.native().humanoid
    names, parents, heads, tails, rest = rest_arrays(obj)
    overrides = None if recognise else stored_roles(obj) or None
    try:
        found = humanoid.recognize(names, parents, heads, tails, rest, overrides=overrides)
    except humanoid.HumanoidError as error:
        raise TendonUserError(f"Armature '{obj.name}': {error}") from error
    # Directions along the limbs, whatever way the bones point (an FBX import's sideways
    # bones; see `humanoid.limb_tails`).
    along = humanoid.limb_tails(found, heads, tails, rest)
    # A mapping the user corrected stands as given; one recognised afresh must be upright.
    pose = pose_arrays(obj, names) if source != "REST" or overrides is None else None
    if overrides is None and not humanoid.upright(found, heads, along):
        # Not upright at rest: a humanoid resting oddly (motion capture resting with every
        # bone pointing up) stands in its pose; a four-legged rig with human names does not.
        pose_heads = pose[:, :3, 3]
        turns = humanoid.rotation_parts(pose[:, :3, :3]) @ np.transpose(
            humanoid.rotation_parts(rest[:, :3, :3]), (0, 2, 1)
        )
        pose_tails = pose_heads + np.einsum("nij,nj->ni", turns, along - heads)
        if not humanoid.upright(found, pose_heads, pose_tails):
            raise TendonUserError(
                f"Armature '{obj.name}': no humanoid found: its legs ('{found.roles['thigh.L']}', "
                f"'{found.roles['thigh.R']}') do not hang below its hips along its spine, in the rest pose "
                "or the current one (a four-legged rig with human bone names?); for a humanoid, pose it "
                "standing and run Human Limits again"
            )
    if source == "REST":
        pose = None
    from_pose = source == "POSE" or (source == "AUTO" and not humanoid.standing_rest(found, heads, along))
    try:
        limits = humanoid.human_limits(found, names, heads, tails, rest, pose, "all" if from_pose else "hinges")
    except humanoid.HumanoidError as error:
        raise TendonUserError(f"Armature '{obj.name}': {error}") from error
    settings = obj.tendon
    # Bones an earlier run limited that no longer play a role get their defaults back.
    for item in settings.human_roles:
        if item.written and item.written not in limits and item.written in obj.pose.bones:
            reset(obj.pose.bones[item.written].tendon)
    for name, joint in limits.items():
        write(obj.pose.bones[name].tendon, joint)
    # A role applied again as stored keeps how it was found: pressed twice, every role read
    # "given", as if corrected by hand (QA helper).
    # (Only a role the user left as the last run wrote it: one whose bone was changed by
    # hand is "given".)
    before = {item.role: (item.bone, item.how) for item in settings.human_roles if item.bone == item.written}
    settings.human_roles.clear()
    rank = {role: k for k, role in enumerate(ROLE_ORDER)}
    for role in sorted(found.roles, key=lambda r: rank.get(r, len(rank))):
        item = settings.human_roles.add()
        bone, how = found.roles[role], found.how[role]
        if overrides is not None and before.get(role, ("", ""))[0] == bone and before[role][1]:
            how = before[role][1]
        item.role, item.bone, item.how = role, bone, how
        item.written = found.roles[role] if found.roles[role] in limits else ""
    # Roles dropped by hand stay dropped when the mapping is applied again.
    for role, bone in (overrides or {}).items():
        if not bone and role not in found.roles:
            item = settings.human_roles.add()
            item.role, item.bone, item.how = role, "", "given"
    for name in found.between:
        item = settings.human_roles.add()
        item.role, item.bone, item.how, item.held = "held", name, "between joints", True
        item.written = name
    settings.active_human_role_index = min(settings.active_human_role_index, max(len(settings.human_roles) - 1, 0))
    outcome = Outcome(
        len(found.roles) - ("hips" in found.roles),
        len(found.between),
        len(found.unrecognised),
        found.convention,
        from_pose,
        list(found.notes),
        hinges_from_pose=pose is not None,
    )
    settings.human_summary = outcome.summary()
    return outcome


def write(settings: Any, joint: dict[str, Any]) -> None:
    """One joint's limits (the native JSON form) into a pose bone's Tendon settings."""
    settings.euler_order = joint["order"]
    settings.limit_roll = joint.get("roll", 0.0)
    if "frame" in joint:
        settings.limit_frame = joint["frame"]
    else:
        # Only bones not along their limbs carry a frame (each stored array costs every
        # depsgraph update a copy).
        settings.property_unset(props.FRAME_STORE)
    settings.limit_neutral = joint.get("neutral", (1.0, 0.0, 0.0, 0.0))
    for axis in "xyz":
        limit = joint[axis]
        setattr(settings, f"lock_{axis}", limit["mode"] == "locked")
        ranged = limit["mode"] == "range"
        setattr(settings, f"use_limit_{axis}", ranged)
        if ranged:
            setattr(settings, f"min_{axis}", limit["min"])
            setattr(settings, f"max_{axis}", limit["max"])
    for axis, tension in zip("xyz", joint.get("tension", [None] * 3), strict=True):
        for side in ("negative", "positive"):
            values = tension[side] if tension else None
            for key in ("threshold", "rigidity"):
                name = f"{key}_{side}_{axis}"
                setattr(settings, name, values[key] if values else default(settings, name))


def reset(settings: Any) -> None:
    """A pose bone's Tendon limits back to their defaults (no limits, default tension)."""
    settings.property_unset(props.LIMIT_STORE)
    settings.property_unset(props.FRAME_STORE)


def default(settings: Any, name: str) -> Any:
    return settings.bl_rna.properties[name].default
