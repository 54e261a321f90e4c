"""Where a bone's Tendon limits are stored: two float arrays per pose bone (``limit_store``,
``scale_store``), read and written through the named settings (``min_x``, ``euler_order``,
...). Blender copies every stored property of every pose bone on each depsgraph update, so
one property per setting slowed every update (and plain playback) of a rig with limits.

Files saved by an older Tendon hold one property per setting: they are read as they are and
moved into the arrays when the file is loaded, and a solve keeps to them."""

from __future__ import annotations

import math
from pathlib import Path

import bpy
import pytest
import real_rigs
import rigs

STORES = {"limit_store", "scale_store"}


def write_as_an_older_tendon(pose_bone: bpy.types.PoseBone, settings: dict[str, object]) -> None:
    """Stores `settings` as Tendon before the arrays did: one ID property per setting."""
    for name, value in settings.items():
        pose_bone.tendon[name] = value


def limited_leg() -> tuple[bpy.types.Object, bpy.types.Object]:
    """A three-bone chain, b2 reaching (chain b1-b2) for a target that needs b1 to bend far."""
    obj = rigs.chain(3, bend=0.0, roll=0.0)
    target = rigs.empty("target", (0.0, 1.2, -1.2))
    rigs.add_effector(obj, "b2", target, chain_length=2)
    return obj, target


def test_limits_saved_one_per_setting_are_read_moved_into_the_arrays_and_kept(tmp_path: Path) -> None:
    obj, _target = limited_leg()
    order = bpy.types.PoseBone.bl_rna.properties["tendon"].fixed_type.properties["euler_order"].enum_items[2]
    write_as_an_older_tendon(
        obj.pose.bones["b1"],
        {"use_limit_x": True, "min_x": -0.25, "max_x": 0.3, "lock_z": 1, "euler_order": 2, "limit_roll": 0.0},
    )
    write_as_an_older_tendon(obj.pose.bones["b2"], {"use_scale_limit": True, "scale_max": [1.1, 1.2, 1.3]})
    # Read as they are (a linked file cannot be migrated).
    limits = obj.pose.bones["b1"].tendon
    assert limits.use_limit_x and limits.lock_z and not limits.use_limit_y
    assert (limits.min_x, limits.max_x) == pytest.approx((-0.25, 0.3))
    assert limits.euler_order == order.identifier
    assert tuple(obj.pose.bones["b2"].tendon.scale_max) == pytest.approx((1.1, 1.2, 1.3))

    path = str(tmp_path / "older.blend")
    bpy.ops.wm.save_as_mainfile(filepath=path)
    bpy.ops.wm.open_mainfile(filepath=path)
    obj = bpy.data.objects["Chain"]
    rigs.activate(obj)
    assert set(obj.pose.bones["b1"].tendon.keys()) == {"limit_store"}
    assert set(obj.pose.bones["b2"].tendon.keys()) == {"scale_store"}
    limits = obj.pose.bones["b1"].tendon
    assert limits.use_limit_x and limits.lock_z and not limits.use_limit_y
    assert (limits.min_x, limits.max_x) == pytest.approx((-0.25, 0.3))
    assert limits.euler_order == order.identifier
    assert obj.pose.bones["b2"].tendon.use_scale_limit
    assert tuple(obj.pose.bones["b2"].tendon.scale_max) == pytest.approx((1.1, 1.2, 1.3))

    assert bpy.ops.tendon.solve() == {"FINISHED"}
    rigs.update()
    angles = obj.pose.bones["b1"].matrix_basis.to_euler(order.identifier)
    assert -0.25 - 1e-3 <= angles.x <= 0.3 + 1e-3
    assert abs(angles.z) < 1e-3
    # The target needs b1 bent past its limit: the limit is what held it.
    assert abs(angles.x - 0.3) < 1e-3 or abs(angles.x + 0.25) < 1e-3


def test_settings_round_trip_through_the_arrays_and_reset_at_once() -> None:
    obj = rigs.chain(2)
    limits = obj.pose.bones["b1"].tendon
    assert list(limits.keys()) == []
    assert (limits.min_y, limits.max_y) == pytest.approx((-math.pi, math.pi))
    limits.use_limit_y, limits.min_y, limits.max_y = True, -0.5, 0.75
    limits.limit_neutral = (0.0, 1.0, 0.0, 0.0)
    limits.euler_order = "ZXY"
    limits.threshold_positive_z, limits.rigidity_negative_x = 0.4, 3.0
    limits.scale_min = (0.8, 0.9, 0.7)
    assert set(limits.keys()) == STORES
    assert limits.use_limit_y and not limits.use_limit_x
    assert (limits.min_y, limits.max_y) == pytest.approx((-0.5, 0.75))
    assert tuple(limits.limit_neutral) == pytest.approx((0.0, 1.0, 0.0, 0.0))
    assert limits.euler_order == "ZXY"
    assert (limits.threshold_positive_z, limits.rigidity_negative_x) == pytest.approx((0.4, 3.0))
    assert tuple(limits.scale_min) == pytest.approx((0.8, 0.9, 0.7))
    limits.property_unset("limit_store")
    assert list(limits.keys()) == ["scale_store"]
    assert not limits.use_limit_y and limits.euler_order == "XYZ"
    assert tuple(limits.limit_neutral) == pytest.approx((1.0, 0.0, 0.0, 0.0))


def test_human_limits_store_one_array_per_bone() -> None:
    rig = real_rigs.metarig("human")
    assert bpy.ops.tendon.human_limits() == {"FINISHED"}
    written = [pose_bone for pose_bone in rig.obj.pose.bones if pose_bone.tendon.keys()]
    assert len(written) > 20
    # (A bone not along its limb also stores its limit frame: none on the metarig.)
    assert all(set(pose_bone.tendon.keys()) == {"limit_store"} for pose_bone in written)
    assert sum(pose_bone.tendon.use_limit_x for pose_bone in written) > 20
