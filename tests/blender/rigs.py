"""Armatures and targets for the add-on tests, built through Blender's own edit mode."""

from __future__ import annotations

import json
import math
from pathlib import Path

import bpy
import numpy as np
from mathutils import Matrix, Vector

ROTATION_MODES = ("QUATERNION", "AXIS_ANGLE", "XYZ", "XZY", "YXZ", "YZX", "ZXY", "ZYX")


def link(obj: bpy.types.Object) -> bpy.types.Object:
    bpy.context.scene.collection.objects.link(obj)
    return obj


def armature(name: str, bones: list[tuple[str, str | None, tuple, tuple, float]]) -> bpy.types.Object:
    """An armature from (name, parent, head, tail, roll) rows, left active in Pose Mode."""
    data = bpy.data.armatures.new(name)
    obj = link(bpy.data.objects.new(name, data))
    activate(obj)
    bpy.ops.object.mode_set(mode="EDIT")
    for bone_name, parent, head, tail, roll in bones:
        edit_bone = data.edit_bones.new(bone_name)
        edit_bone.head, edit_bone.tail, edit_bone.roll = head, tail, roll
        if parent:
            edit_bone.parent = data.edit_bones[parent]
            edit_bone.use_connect = Vector(head) == data.edit_bones[parent].tail
    bpy.ops.object.mode_set(mode="POSE")
    return obj


def activate(obj: bpy.types.Object) -> None:
    for other in bpy.context.view_layer.objects:
        other.select_set(False)
    bpy.context.view_layer.objects.active = obj
    obj.select_set(True)


def chain(
    count: int, name: str = "Chain", length: float = 1.0, bend: float = 0.2, roll: float = 0.4
) -> bpy.types.Object:
    """A gently bent chain of `count` bones (b0 at the root), bone i rolled `roll * i`."""
    rows = []
    head = Vector((0.0, 0.0, 0.0))
    for i in range(count):
        angle = bend * i
        tail = head + length * Vector((0.0, math.cos(angle), math.sin(angle)))
        rows.append((f"b{i}", f"b{i - 1}" if i else None, tuple(head), tuple(tail), roll * i))
        head = tail
    return armature(name, rows)


def empty(name: str, location: tuple | Vector) -> bpy.types.Object:
    obj = link(bpy.data.objects.new(name, None))
    obj.location = location
    return obj


def update() -> None:
    bpy.context.view_layer.update()


def tail_world(obj: bpy.types.Object, bone: str) -> Vector:
    update()
    return obj.matrix_world @ obj.pose.bones[bone].tail


def head_world(obj: bpy.types.Object, bone: str) -> Vector:
    update()
    return obj.matrix_world @ obj.pose.bones[bone].head


def world_matrices(obj: bpy.types.Object) -> np.ndarray:
    """Every pose bone's world matrix, (n, 4, 4) row-major."""
    update()
    n = len(obj.pose.bones)
    flat = np.empty(n * 16, np.float32)
    obj.pose.bones.foreach_get("matrix", flat)
    local = flat.reshape(n, 4, 4).transpose(0, 2, 1)
    return np.asarray(obj.matrix_world, np.float32) @ local


def random_pose_tail(obj: bpy.types.Object, bone: str, seed: int, spread: float = 0.8) -> Vector:
    """The world tail of `bone` in a random pose (then the pose goes back to rest): a target
    the chain can reach."""
    rng = np.random.default_rng(seed)
    for pose_bone in obj.pose.bones:
        pose_bone.rotation_mode = "QUATERNION"
        axis = Vector(rng.normal(size=3)).normalized()
        pose_bone.rotation_quaternion = Matrix.Rotation(spread * rng.uniform(-1, 1), 3, axis).to_quaternion()
    target = tail_world(obj, bone).copy()
    for pose_bone in obj.pose.bones:
        pose_bone.rotation_quaternion = (1, 0, 0, 0)
    update()
    return target


def select_bone(obj: bpy.types.Object, name: str, state: bool = True) -> None:
    """Selects a bone (a pose bone property from Blender 5.0, an armature bone's before)."""
    owner = obj.pose.bones[name] if "select" in bpy.types.PoseBone.bl_rna.properties else obj.data.bones[name]
    owner.select = state


def rest_all_channels(obj: bpy.types.Object, mode: str) -> None:
    """Every rotation channel at rest, then `mode` as the bones' rotation mode."""
    for pose_bone in obj.pose.bones:
        pose_bone.rotation_quaternion = (1.0, 0.0, 0.0, 0.0)
        pose_bone.rotation_axis_angle = (0.0, 0.0, 1.0, 0.0)
        pose_bone.rotation_euler = (0.0, 0.0, 0.0)
        pose_bone.rotation_mode = mode


def add_effector(obj: bpy.types.Object, bone: str, target: bpy.types.Object, chain_length: int = 0) -> None:
    """Adds an effector the way a user does: target selected, bone active, press +."""
    activate(obj)
    target.select_set(True)
    obj.data.bones.active = obj.data.bones[bone]
    assert bpy.ops.tendon.add_effector(chain_length=chain_length) == {"FINISHED"}
    effector = obj.tendon.effectors[obj.tendon.active_effector_index]
    assert effector.bone == bone and effector.target == target


FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"

#: Effectors of the humanoid: bone, chain length.
HUMANOID_EFFECTORS = (("hand.L", 3), ("hand.R", 3), ("shin.L", 2), ("shin.R", 2), ("head", 2))


def humanoid(name: str = "Humanoid") -> bpy.types.Object:
    """The 50-bone humanoid with a tail of tests/fixtures/humanoid.json as a Blender
    armature, left active in Pose Mode."""
    import tendon  # the wheel the add-on zip installed

    rig = tendon.Rig.from_json((FIXTURES / "humanoid.json").read_text())
    rest = rig.forward_kinematics(rig.rest_rotations())
    description = json.loads(rig.to_json())["bones"]
    data = bpy.data.armatures.new(name)
    obj = link(bpy.data.objects.new(name, data))
    activate(obj)
    bpy.ops.object.mode_set(mode="EDIT")
    for bone, matrix in zip(description, rest, strict=True):
        edit_bone = data.edit_bones.new(bone["name"])
        edit_bone.head, edit_bone.tail = (0.0, 0.0, 0.0), (0.0, bone["length"], 0.0)
        edit_bone.matrix = Matrix(matrix.tolist())
        if bone["parent"]:
            edit_bone.parent = data.edit_bones[bone["parent"]]
    bpy.ops.object.mode_set(mode="POSE")
    return obj


def humanoid_targets(obj: bpy.types.Object, seed: int) -> list[bpy.types.Object]:
    """Empties at the effector points of a random pose of the humanoid, one effector each."""
    rng = np.random.default_rng(seed)
    moved = set()
    for bone, chain_length in HUMANOID_EFFECTORS:
        pose_bone = obj.pose.bones[bone]
        for _ in range(chain_length):
            moved.add(pose_bone.name)
            pose_bone = pose_bone.parent
    # Only the chains move, so every target is within its chain's reach.
    for pose_bone in obj.pose.bones:
        pose_bone.rotation_mode = "QUATERNION"
        if pose_bone.name in moved:
            axis = Vector(rng.normal(size=3)).normalized()
            pose_bone.rotation_quaternion = Matrix.Rotation(0.6 * rng.uniform(-1, 1), 3, axis).to_quaternion()
    points = [tail_world(obj, bone).copy() for bone, _ in HUMANOID_EFFECTORS]
    for pose_bone in obj.pose.bones:
        pose_bone.rotation_quaternion = (1, 0, 0, 0)
    update()
    targets = []
    for (bone, chain_length), point in zip(HUMANOID_EFFECTORS, points, strict=True):
        target = empty(f"{bone}.target", point)
        effector = obj.tendon.effectors.add()
        effector.bone, effector.target, effector.chain_length = bone, target, chain_length
        targets.append(target)
    return targets


def bone_meshes(obj: bpy.types.Object) -> None:
    """A visible body for renders: an octahedral bone shape per bone (Blender's own bone
    look), parented to it, coloured by side (the rest head's x: the character's left is +x),
    tail bones orange."""
    for pose_bone in obj.pose.bones:
        length = pose_bone.length
        width = 0.12 * length if length > 0.05 else 0.25 * length
        # A bone child sits at its bone's tail: the shape spans y from -length to 0.
        ring = -0.8 * length
        verts = [(0, -length, 0), (width, ring, 0), (0, ring, width), (-width, ring, 0), (0, ring, -width), (0, 0, 0)]
        faces = [(0, 2, 1), (0, 3, 2), (0, 4, 3), (0, 1, 4), (5, 1, 2), (5, 2, 3), (5, 3, 4), (5, 4, 1)]
        mesh = bpy.data.meshes.new(f"{pose_bone.name}.shape")
        mesh.from_pydata(verts, [], faces)
        shape = link(bpy.data.objects.new(f"{obj.name}.{pose_bone.name}.shape", mesh))
        shape.parent, shape.parent_type, shape.parent_bone = obj, "BONE", pose_bone.name
        side = pose_bone.bone.head_local.x
        shape.color = (
            (0.95, 0.65, 0.15, 1.0)
            if pose_bone.name.startswith("tail")
            else (0.25, 0.45, 0.95, 1.0)
            if side > 1e-4
            else (0.95, 0.35, 0.25, 1.0)
            if side < -1e-4
            else (0.8, 0.8, 0.8, 1.0)
        )


def workbench_stage(scene: bpy.types.Scene, width: int, height: int) -> None:
    """Renders with Workbench (no GPU needed headless): a grey backdrop, studio light, each
    object in its own colour, at `width` x `height` pixels."""
    scene.world = bpy.data.worlds.new("Backdrop")
    scene.world.color = (0.55, 0.58, 0.62)
    scene.render.engine = "BLENDER_WORKBENCH"
    scene.display.shading.light = "STUDIO"
    scene.display.shading.color_type = "OBJECT"
    scene.render.resolution_x, scene.render.resolution_y = width, height
