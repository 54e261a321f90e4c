"""The rig cache (addon/rig.py): each armature's native rig, limits and bone facts are built
once and reused until an event says they changed (a limit edited, the bones or their
constraints or drivers changed, a file loaded, undo), never rediscovered on each solve;
and whatever moves a chain bone without such an event is still caught at the next solve."""

from __future__ import annotations

import dataclasses
import importlib
from pathlib import Path

import bpy
import pytest
import rigs
from mathutils import Vector

from conftest import MODULE


def rig_cache() -> object:
    return importlib.import_module(f"{MODULE}.rig")


def cached(obj: bpy.types.Object) -> object:
    """The cache's entry for `obj` (what the next solve would use)."""
    return rig_cache().read_rig(obj)


def solve() -> str:
    """Presses Solve IK: the status line, or the error when refused."""
    obj = bpy.context.active_object
    try:
        assert bpy.ops.tendon.solve() == {"FINISHED"}
    except RuntimeError as error:
        return f"refused: {error}"
    return obj.tendon.status


def reached(status: str) -> bool:
    return "effector(s) reached in Blender's pose" in status


def chain_with_target() -> tuple[bpy.types.Object, bpy.types.Object]:
    """A four-bone chain whose tip reaches, with a chain of three (b1-b3), for a target the
    chain can reach: where its tip is with those three bones turned."""
    obj = rigs.chain(4)
    for name, turn in (("b1", (0.95, 0.2, 0.1, 0.0)), ("b2", (0.95, -0.1, 0.25, 0.1)), ("b3", (0.97, 0.2, 0.0, 0.1))):
        obj.pose.bones[name].rotation_mode = "QUATERNION"
        obj.pose.bones[name].rotation_quaternion = turn
    target = rigs.empty("target", rigs.tail_world(obj, "b3").copy())
    for name in ("b1", "b2", "b3"):
        obj.pose.bones[name].rotation_quaternion = (1.0, 0.0, 0.0, 0.0)
    rigs.update()
    rigs.add_effector(obj, "b3", target, chain_length=3)
    return obj, target


def test_the_rig_is_built_once_and_each_event_makes_the_cache_forget(tmp_path: Path) -> None:
    obj, _target = chain_with_target()
    assert reached(solve())
    first = cached(obj)
    assert reached(solve()) and cached(obj) is first, "a solve with nothing changed rebuilt the rig"
    # A joint limit (its update callback).
    obj.pose.bones["b1"].tendon.use_limit_x = True
    limited = cached(obj)
    assert limited is not first and '"b1"' in limited.rig.to_json()
    obj.pose.bones["b1"].tendon.limit_roll = 0.3
    rolled = cached(obj)
    assert rolled is not limited
    assert [b["limits"]["roll"] for b in json_bones(rolled) if b["name"] == "b1"] == [pytest.approx(0.3)]
    # A chain bone renamed: no event says so reliably, but the solve sees its name gone.
    obj.data.bones["b2"].name = "middle"
    rigs.update()
    assert reached(solve())
    renamed = cached(obj)
    assert renamed is not rolled and renamed.names[2] == "middle"
    # The effector's own bone renamed: skipped by its old name, found by its new one.
    obj.data.bones["b3"].name = "tip"
    assert "has no bone 'b3' (renamed or deleted?)" in solve()
    obj.tendon.effectors[0].bone = "tip"
    assert reached(solve())
    renamed = cached(obj)
    # Edit Mode (the relations are rebuilt).
    bpy.ops.object.mode_set(mode="EDIT")
    obj.data.edit_bones["tip"].tail.z += 0.1
    bpy.ops.object.mode_set(mode="POSE")
    edited = cached(obj)
    assert edited is not renamed and edited.lengths[3] != renamed.lengths[3]
    # Undo.
    bpy.ops.ed.undo_push(message="before")
    obj.pose.bones["middle"].rotation_quaternion = (0.9, 0.1, 0.0, 0.0)
    bpy.ops.ed.undo_push(message="after")
    bpy.ops.ed.undo()
    obj = bpy.data.objects["Chain"]
    assert cached(obj) is not edited
    undone = cached(obj)
    # A file saved and opened again.
    path = str(tmp_path / "cache.blend")
    bpy.ops.wm.save_as_mainfile(filepath=path)
    bpy.ops.wm.open_mainfile(filepath=path)
    obj = bpy.data.objects["Chain"]
    rigs.activate(obj)
    assert cached(obj) is not undone
    assert reached(solve())


def json_bones(entry: object) -> list[dict]:
    import json

    return json.loads(entry.rig.to_json())["bones"]  # type: ignore[attr-defined]


def test_a_constraint_added_after_a_solve_is_refused_at_the_next() -> None:
    obj, _target = chain_with_target()
    assert reached(solve())
    first = cached(obj)
    constraint = obj.pose.bones["b2"].constraints.new("COPY_ROTATION")
    constraint.target, constraint.subtarget = obj, "b0"
    refused = solve()
    assert refused.startswith("refused") and "Copy Rotation constraint" in refused, refused
    assert cached(obj) is not first
    # Muting it, or its influence at zero, is read at each solve (it may be animated).
    constraint.mute = True
    assert reached(solve())
    constraint.mute, constraint.influence = False, 0.0
    assert reached(solve())
    constraint.influence = 1.0
    assert "Copy Rotation constraint" in solve()
    obj.pose.bones["b2"].constraints.remove(constraint)
    assert reached(solve())


def test_a_driver_added_after_a_solve_is_refused_at_the_next() -> None:
    obj, _target = chain_with_target()
    assert reached(solve())
    driver = obj.pose.bones["b1"].driver_add("rotation_quaternion", 1).driver
    driver.expression = "0.1"
    refused = solve()
    assert "has a driver on its rotation_quaternion" in refused, refused
    obj.pose.bones["b1"].driver_remove("rotation_quaternion", 1)
    assert reached(solve())


def test_a_bone_that_stops_inheriting_its_parents_rotation_is_still_caught() -> None:
    """Inheritance options change without an event the cache hears of: the rig keeps what it
    read, but a chain bone Blender no longer puts where its channels say is refused anyway
    (here the bone above the chain is turned, so b1 no longer follows it)."""
    obj, target = chain_with_target()
    obj.pose.bones["b0"].rotation_mode = "XYZ"
    obj.pose.bones["b0"].rotation_euler = (0.4, 0.0, 0.2)
    rigs.update()
    # The target moves with the bone above the chain, so it stays within reach.
    target.location = rigs.tail_world(obj, "b3") + 0.3 * (target.location - rigs.tail_world(obj, "b3"))
    rigs.update()
    assert reached(solve())
    obj.data.bones["b1"].use_inherit_rotation = False
    rigs.update()
    refused = solve()
    assert refused.startswith("refused") and "'b1'" in refused, refused
    assert "Inherit Rotation is off" in refused or "not where its own channels put it" in refused, refused
    obj.data.bones["b1"].use_inherit_rotation = True
    rigs.update()
    assert reached(solve())


def test_a_rig_cached_with_another_bone_count_is_built_again() -> None:
    """A safety net below the events: the pose is read into arrays sized for the cached rig,
    and a count that does not match (one bone more, or fewer) makes the solve rebuild it."""
    obj, target = chain_with_target()
    assert reached(solve())
    key = (obj.as_pointer(), False)
    entries = rig_cache()._rigs  # type: ignore[attr-defined]
    real = entries[key]
    for count in (real.count - 1, real.count + 1):
        entries[key] = dataclasses.replace(real, count=count)
        target.location.x += 0.02
        rigs.update()
        assert reached(solve())
        assert entries[key].count == real.count


def test_live_mode_finds_armatures_switched_on_duplicated_or_loaded(tmp_path: Path) -> None:
    obj, target = chain_with_target()
    obj.tendon.live = True
    target.location.z += 0.02
    rigs.update()
    assert "Live: 1 effector(s) reached" in obj.tendon.status
    # A copy of the armature (live mode and all) is found once the relations change.
    copy = obj.copy()
    copy.data = obj.data.copy()
    bpy.context.scene.collection.objects.link(copy)
    rigs.update()
    target.location.z -= 0.02
    rigs.update()
    assert copy.tendon.status.startswith("Live: 1 effector(s)"), copy.tendon.status
    path = str(tmp_path / "live.blend")
    bpy.ops.wm.save_as_mainfile(filepath=path)
    bpy.ops.wm.open_mainfile(filepath=path)
    target = bpy.data.objects["target"]
    target.location.z += 0.02
    rigs.update()
    obj = bpy.data.objects["Chain"]
    assert obj.tendon.status.startswith("Live: 1 effector(s)"), obj.tendon.status


def chain_rotations(obj: bpy.types.Object) -> list[float]:
    """The quaternions of b1 to b3, one flat list."""
    return [value for name in ("b1", "b2", "b3") for value in obj.pose.bones[name].rotation_quaternion]


def test_a_clean_solve_leaves_a_shortcut_that_steps_aside_for_anything_out_of_the_ordinary() -> None:
    """A solve that refused and skipped nothing leaves a shortcut: while the effectors'
    settings stay the same, the next solves read only the targets and the pose. It gives
    the whole way's answer, and whatever the whole way refuses is still refused, named."""
    obj, target = chain_with_target()
    assert reached(solve())
    entry = cached(obj)
    settings, shortcut = entry.memo["shortcut"]
    assert [entry.names[bone] for bone in shortcut.moving] == ["b1", "b2", "b3"]
    start = chain_rotations(obj)
    target.location.x += 0.05
    rigs.update()
    assert reached(solve())
    assert entry.memo["shortcut"][1] is shortcut, "a solve with the same settings did not take the shortcut"
    assert shortcut.native_plan is not None, "the shortcut did not solve in its one native call"
    through_shortcut = chain_rotations(obj)
    # The same solve the whole way, from the same start.
    for k, name in enumerate(("b1", "b2", "b3")):
        obj.pose.bones[name].rotation_quaternion = start[4 * k : 4 * k + 4]
    rigs.update()
    del entry.memo["shortcut"]
    assert reached(solve())
    assert chain_rotations(obj) == pytest.approx(through_shortcut, abs=1e-6)
    assert start != pytest.approx(through_shortcut, abs=1e-3), "the target moved: the chain must have turned"
    # Settings changed: a new shortcut for them.
    obj.tendon.effectors[0].weight = 0.5
    assert reached(solve())
    assert entry.memo["shortcut"][1] is not shortcut and entry.memo["shortcut"][0] != settings
    # A chain bone scaled to zero, then a target the library refuses: named as ever.
    obj.pose.bones["b2"].scale = (0.0, 1.0, 1.0)
    rigs.update()
    refused = solve()
    assert refused.startswith("refused") and "bone 'b2' is scaled to zero" in refused, refused
    obj.pose.bones["b2"].scale = (1.0, 1.0, 1.0)
    rigs.update()
    assert reached(solve())
    x = target.location.x
    target.location.x = float("nan")
    rigs.update()
    refused = solve()
    assert refused.startswith("refused") and "target of the goal for bone 'b3' is not finite" in refused, refused
    target.location.x = x
    rigs.update()
    assert reached(solve())
    # A goal skipped for a loop (its target a bone its own chain moves): the whole way
    # every time, so the skip is always said.
    loop = obj.tendon.effectors.add()
    loop.bone, loop.target, loop.subtarget, loop.chain_length = "b2", obj, "b1", 2
    status = solve()
    assert reached(status) and "(a loop)" in status, status
    # Setting a target rebuilds the relations, so the rig cache may have started afresh.
    entry = cached(obj)
    assert "shortcut" not in entry.memo
    target.location.x += 0.02
    rigs.update()
    status = solve()
    assert reached(status) and "(a loop)" in status, status
    assert "shortcut" not in entry.memo


def test_the_shortcut_writes_each_bone_in_its_own_rotation_mode() -> None:
    """The shortcut's one native call writes the channels of each bone's own mode (here an
    Euler order, axis-angle and a quaternion in one chain), nearest their current values,
    and leaves every other channel as it was: the same pose as the whole way."""
    obj, target = chain_with_target()
    modes = {"b1": "ZXY", "b2": "AXIS_ANGLE", "b3": "QUATERNION"}
    for name, mode in modes.items():
        obj.pose.bones[name].rotation_mode = mode
    # An Euler angle a full turn round: the written angle must stay near it, not jump back.
    obj.pose.bones["b1"].rotation_euler = (0.0, 2 * 3.141592653589793, 0.0)
    rigs.update()
    assert reached(solve())
    entry = cached(obj)
    shortcut = entry.memo["shortcut"][1]

    def channels() -> dict[str, list[float]]:
        return {
            f"{name}.{path}": list(getattr(obj.pose.bones[name], path))
            for name in ("b1", "b2", "b3")
            for path in ("rotation_quaternion", "rotation_euler", "rotation_axis_angle")
        }

    before = channels()
    target.location.x += 0.05
    rigs.update()
    assert reached(solve())
    assert shortcut.native_plan is not None and entry.memo["shortcut"][1] is shortcut
    after = channels()
    active = {"b1": "rotation_euler", "b2": "rotation_axis_angle", "b3": "rotation_quaternion"}
    for key, values in after.items():
        name, path = key.split(".")
        if path == active[name]:
            assert values != pytest.approx(before[key], abs=1e-4), f"{key} did not turn"
        else:
            assert values == pytest.approx(before[key], abs=0.0), f"{key} is not {name}'s mode, yet changed"
    # Still a full turn round about Y, like the channels it started from.
    assert abs(after["b1.rotation_euler"][1] - 2 * 3.141592653589793) < 1.0
    through_shortcut = {key: after[key] for key in (f"{name}.{path}" for name, path in active.items())}
    # The whole way from the same start gives the same channels.
    for key, values in before.items():
        name, path = key.split(".")
        setattr(obj.pose.bones[name], path, values)
    rigs.update()
    del entry.memo["shortcut"]
    assert reached(solve())
    whole_way = channels()
    for key, values in through_shortcut.items():
        assert whole_way[key] == pytest.approx(values, abs=1e-5), key


def test_the_shortcut_places_a_head_effector_whose_bone_has_a_pose_location() -> None:
    """A head effector (its tail not counted, no rotation target) does not turn its own
    bone, yet that bone's pose location places its head: the shortcut's native call starts
    it where Blender shows it, and reaches like the whole way."""
    obj = rigs.chain(4)
    bpy.ops.object.mode_set(mode="EDIT")
    obj.data.edit_bones["b3"].use_connect = False
    bpy.ops.object.mode_set(mode="POSE")
    obj.pose.bones["b3"].location = (0.3, 0.2, -0.1)

    def head_reached_with(turns: dict[str, tuple[float, ...]]) -> Vector:
        for name, turn in turns.items():
            obj.pose.bones[name].rotation_mode = "QUATERNION"
            obj.pose.bones[name].rotation_quaternion = turn
        rigs.update()
        point = obj.matrix_world @ obj.pose.bones["b3"].head
        for name in turns:
            obj.pose.bones[name].rotation_quaternion = (1.0, 0.0, 0.0, 0.0)
        rigs.update()
        return point.copy()

    target = rigs.empty("target", head_reached_with({"b1": (0.95, 0.2, 0.1, 0.0), "b2": (0.95, -0.1, 0.25, 0.1)}))
    rigs.add_effector(obj, "b3", target, chain_length=3)
    obj.tendon.effectors[0].use_tail = False
    assert reached(solve())
    entry = cached(obj)
    shortcut = entry.memo["shortcut"][1]
    target.location = head_reached_with({"b1": (0.9, -0.2, 0.3, 0.1), "b2": (0.97, 0.2, 0.0, 0.1)})
    rigs.update()
    assert reached(solve()), obj.tendon.status
    assert entry.memo["shortcut"][1] is shortcut and shortcut.native_plan is not None
    assert (obj.matrix_world @ obj.pose.bones["b3"].head - target.location).length < 1e-4


def test_a_chain_bone_with_local_location_off_and_a_location_reaches_both_ways() -> None:
    """Local Location off places a bone's location channels in another space than the
    rig's: the solve starts every chain bone's translation where Blender shows it, so the
    whole way reaches, like the shortcut, and both give the same pose."""
    obj = rigs.chain(5)
    for pose_bone in obj.pose.bones:
        pose_bone.rotation_mode = "QUATERNION"
    bpy.ops.object.mode_set(mode="EDIT")
    obj.data.edit_bones["b2"].use_connect = False
    obj.data.edit_bones["b2"].use_local_location = False
    bpy.ops.object.mode_set(mode="POSE")
    obj.pose.bones["b2"].location = (0.3, 0.1, -0.2)
    obj.pose.bones["b1"].rotation_quaternion = (0.9, 0.3, 0.1, 0.2)
    turns = {"b2": (0.95, 0.2, 0.1, 0.0), "b3": (0.95, -0.1, 0.25, 0.1), "b4": (0.97, 0.2, 0.0, 0.1)}
    for name, turn in turns.items():
        obj.pose.bones[name].rotation_quaternion = turn
    target = rigs.empty("target", rigs.tail_world(obj, "b4").copy())
    for name in turns:
        obj.pose.bones[name].rotation_quaternion = (1.0, 0.0, 0.0, 0.0)
    rigs.update()
    rigs.add_effector(obj, "b4", target, chain_length=3)
    assert reached(solve()), obj.tendon.status
    whole_way = [value for name in turns for value in obj.pose.bones[name].rotation_quaternion]
    entry = cached(obj)
    for name in turns:
        obj.pose.bones[name].rotation_quaternion = (1.0, 0.0, 0.0, 0.0)
    rigs.update()
    assert reached(solve()), obj.tendon.status
    assert entry.memo["shortcut"][1].native_plan is not None
    shortcut = [value for name in turns for value in obj.pose.bones[name].rotation_quaternion]
    assert shortcut == pytest.approx(whole_way, abs=1e-5)


def test_a_solves_own_update_does_not_read_the_rest_again_and_a_scale_applied_after_is_heard(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The update that evaluates the pose a solve wrote follows one that saw everything
    else: the armature's rest is not read again there (on the generated Rigify rig that
    read was a third of the solve's own time). Any other update of the armature's data
    still reads it, so a scale applied after the solve makes the cache forget."""
    module = rig_cache()
    obj, target = chain_with_target()
    assert reached(solve())
    reads = []

    numpy = module.np

    class CountingNumpy:
        """numpy, counting the arrays made for the rest's read."""

        def __getattr__(self, name: str) -> object:
            return getattr(numpy, name)

        def empty(self, *args: object, **kwargs: object) -> object:
            reads.append(1)
            return numpy.empty(*args, **kwargs)

    monkeypatch.setattr(module, "np", CountingNumpy())
    target.location.x += 0.05
    rigs.update()
    assert reached(solve())
    assert reads == [], "the solve's own update read the rest again"
    # The same pose change made outside a solve: read.
    obj.pose.bones["b1"].rotation_quaternion = (0.99, 0.1, 0.0, 0.0)
    rigs.update()
    assert reads, "a pose change outside a solve no longer checks the rest"
    first = cached(obj)
    bpy.ops.object.mode_set(mode="OBJECT")
    obj.scale = (1.5, 1.5, 1.5)
    rigs.update()
    assert bpy.ops.object.transform_apply(location=False, rotation=False, scale=True) == {"FINISHED"}
    bpy.ops.object.mode_set(mode="POSE")
    # Solved right after: with the new rest.
    assert reached(solve())
    after = module.read_rig(obj)
    assert after is not first and float(after.lengths[after.index["b1"]]) == pytest.approx(1.5)
