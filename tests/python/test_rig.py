"""The Rig: construction, bone orders, pickling, forward kinematics, errors."""

import json
import pickle

import numpy as np
import pytest

import tendon

from conftest import bent_chain


def test_json_round_trip_and_orders(humanoid: tendon.Rig) -> None:
    assert len(humanoid) == 50
    assert humanoid.names[0] == "hips"
    assert humanoid.parents[humanoid.index("forearm.L")] == humanoid.index("upper_arm.L")
    assert humanoid.parents[humanoid.index("hips")] == -1
    order = humanoid.dfs_order
    assert sorted(order) == list(range(50))
    position = {caller: k for k, caller in enumerate(order)}
    for bone, parent in enumerate(humanoid.parents):
        if parent >= 0:
            assert position[parent] < position[bone], "parents come first in depth-first order"
    again = tendon.Rig.from_json(humanoid.to_json())
    assert again.to_json() == humanoid.to_json()


def test_pickling(humanoid: tendon.Rig) -> None:
    copy = pickle.loads(pickle.dumps(humanoid))
    assert copy.to_json() == humanoid.to_json()
    rest = humanoid.rest_rotations()
    np.testing.assert_array_equal(copy.forward_kinematics(rest), humanoid.forward_kinematics(rest))


def test_forward_kinematics_follows_blender(humanoid: tendon.Rig) -> None:
    world = humanoid.forward_kinematics(humanoid.rest_rotations())
    assert world.dtype == np.float32 and world.shape == (50, 4, 4)
    hand = world[humanoid.index("hand.L")]
    # Row-major: the head is the translation column, the tail lies along the bone's +Y.
    np.testing.assert_allclose(hand[:3, 3], [0.70, 0.0, 1.43], atol=1e-5)
    length = next(b["length"] for b in json.loads(humanoid.to_json())["bones"] if b["name"] == "hand.L")
    np.testing.assert_allclose(hand @ [0.0, length, 0.0, 1.0], [0.80, 0.0, 1.42, 1.0], atol=1e-5)


def test_from_arrays_rebuilds_the_rig(humanoid: tendon.Rig) -> None:
    world = humanoid.forward_kinematics(humanoid.rest_rotations())
    lengths = np.array([b["length"] for b in json.loads(humanoid.to_json())["bones"]], dtype=np.float32)
    rebuilt = tendon.Rig.from_arrays(humanoid.names, humanoid.parents, world, lengths)
    np.testing.assert_allclose(rebuilt.forward_kinematics(rebuilt.rest_rotations()), world, atol=1e-5)
    # Float64 and nested lists are converted.
    again = tendon.Rig.from_arrays(
        humanoid.names, humanoid.parents, world.astype(np.float64).tolist(), lengths.tolist()
    )
    np.testing.assert_allclose(again.forward_kinematics(again.rest_rotations()), world, atol=1e-5)


def test_limits_from_arrays(humanoid: tendon.Rig) -> None:
    world = humanoid.forward_kinematics(humanoid.rest_rotations())
    lengths = np.ones(50, dtype=np.float32) * 0.1
    limits = json.dumps(
        {"forearm.L": {"order": "XYZ", "x": {"mode": "range", "min": 0.0, "max": 2.0}, "y": {"mode": "locked"}}}
    )
    rig = tendon.Rig.from_arrays(humanoid.names, humanoid.parents, world, lengths, limits)
    stored = next(b for b in json.loads(rig.to_json())["bones"] if b["name"] == "forearm.L")
    assert stored["limits"]["y"] == {"mode": "locked"}
    with pytest.raises(tendon.LimitError, match="min 3 is greater than max 2"):
        bad = json.dumps({"forearm.L": {"x": {"mode": "range", "min": 3.0, "max": 2.0}}})
        tendon.Rig.from_arrays(humanoid.names, humanoid.parents, world, lengths, bad)
    with pytest.raises(tendon.TendonError, match="no bone 'elbow'"):
        tendon.Rig.from_arrays(humanoid.names, humanoid.parents, world, lengths, json.dumps({"elbow": {}}))
    # The roll or neutral is the joint's, not an axis's (a zero neutral was "invalid y limit").
    with pytest.raises(tendon.LimitError, match="invalid joint limits on bone 'forearm.L': the neutral rotation"):
        bad = json.dumps({"forearm.L": {"neutral": [0.0, 0.0, 0.0, 0.0]}})
        tendon.Rig.from_arrays(humanoid.names, humanoid.parents, world, lengths, bad)
    # A misspelt key is an error naming the bone and the key: it was left out silently,
    # and the joint free (a bone meant locked turned 90 degrees).
    for typo, key in (({"X": {"mode": "locked"}}, "`X`"), ({"euler_order": "XYZ"}, "`euler_order`")):
        with pytest.raises(tendon.LimitError, match=f"limits of bone 'forearm.L': unknown field {key}"):
            tendon.Rig.from_arrays(humanoid.names, humanoid.parents, world, lengths, json.dumps({"forearm.L": typo}))
    # NaN or infinity, as json.dumps writes them (JSON has neither): the bone is named (the
    # message gave a line and column, as if the structure were wrong; QA helper).
    for value in (float("nan"), float("inf"), -float("inf")):
        bad = json.dumps({"hand.L": {"order": "XYZ"}, "forearm.L": {"roll": value}})
        with pytest.raises(tendon.LimitError, match="limits of bone 'forearm.L': a value is NaN or infinite"):
            tendon.Rig.from_arrays(humanoid.names, humanoid.parents, world, lengths, bad)


def test_a_misspelt_key_in_rig_json_is_an_error() -> None:
    """A `parnet` typo made the bone a root, a `limit` typo dropped its limits, silently."""
    root = {"name": "a", "length": 1.0}
    for bone, key in (({"name": "b", "parnet": "a", "length": 1.0}, "parnet"), ({"name": "b", "limit": {}}, "limit")):
        with pytest.raises(tendon.RigError, match=f"unknown field `{key}`"):
            tendon.Rig.from_json(json.dumps({"bones": [root, bone]}))


def test_errors_name_the_culprit(humanoid: tendon.Rig) -> None:
    world = humanoid.forward_kinematics(humanoid.rest_rotations())
    names, parents, lengths = humanoid.names, humanoid.parents, np.ones(50, np.float32)
    with pytest.raises(tendon.ShapeError, match=r"rest_matrices has shape \(49, 4, 4\), expected \(50, 4, 4\)"):
        tendon.Rig.from_arrays(names, parents, world[:49], lengths)
    broken = world.copy()
    broken[3, 0, 0] = np.nan
    with pytest.raises(tendon.NonFiniteError, match=f"rest matrix of bone '{names[3]}'"):
        tendon.Rig.from_arrays(names, parents, broken, lengths)
    with pytest.raises(tendon.BoneIndexError, match="parent of bone 'spine' is 77"):
        tendon.Rig.from_arrays(names, [-1, 77] + parents[2:], world, lengths)
    with pytest.raises(tendon.RigError, match="'spine' is used more than once"):
        tendon.Rig.from_arrays(["hips", "spine", "spine"], [-1, 0, 1], world[:3], lengths[:3])
    with pytest.raises(tendon.RigError, match="invalid JSON"):
        tendon.Rig.from_json("{")
    with pytest.raises(tendon.ShapeError, match="array of numbers"):
        tendon.Rig.from_arrays(names, parents, "not an array", lengths)
    with pytest.raises(tendon.BoneIndexError, match="no bone 'tail.9'"):
        humanoid.index("tail.9")
    assert issubclass(tendon.TendonError, ValueError)


def test_pose_inputs_of_any_layout() -> None:
    rig = bent_chain(6)
    rng = np.random.default_rng(3)
    rotations = rng.normal(size=(6, 4)).astype(np.float32)
    rotations /= np.linalg.norm(rotations, axis=1, keepdims=True)
    expected = rig.forward_kinematics(rotations)
    np.testing.assert_array_equal(rig.forward_kinematics(rotations.astype(np.float64)), expected)
    strided = np.zeros((12, 4), dtype=np.float32)
    strided[::2] = rotations
    np.testing.assert_array_equal(rig.forward_kinematics(strided[::2]), expected)
    fortran = np.asfortranarray(rotations)
    np.testing.assert_array_equal(rig.forward_kinematics(fortran), expected)
    frozen = rotations.copy()
    frozen.setflags(write=False)
    np.testing.assert_array_equal(rig.forward_kinematics(frozen), expected)
    np.testing.assert_array_equal(rig.forward_kinematics(rotations.tolist()), expected)
    with pytest.raises(tendon.ShapeError, match=r"rotations has shape \(6, 3\), expected \(6, 4\)"):
        rig.forward_kinematics(rotations[:, :3])
    with pytest.raises(tendon.TendonError, match="zero quaternion"):
        rig.forward_kinematics(np.zeros((6, 4), np.float32))


def test_pose_from_world_inverts_forward_kinematics(humanoid: tendon.Rig) -> None:
    # A pose with translations and a uniformly scaled spine: reading its armature-space
    # matrices back gives the same world matrices (the add-on reads Blender's evaluated
    # pose this way) and, where nothing is degenerate, the same channels.
    rng = np.random.default_rng(7)
    n = len(humanoid)
    rotations = rng.normal(size=(n, 4)).astype(np.float32)
    rotations /= np.linalg.norm(rotations, axis=1, keepdims=True)
    rotations[rotations[:, 0] < 0] *= -1
    translations = rng.uniform(-0.05, 0.05, size=(n, 3)).astype(np.float32)
    scales = np.ones((n, 3), np.float32)
    scales[humanoid.index("spine")] = 1.2
    world = humanoid.forward_kinematics(rotations, translations, scales)
    back_rotations, back_translations, back_scales = humanoid.pose_from_world(world)
    sign = np.where(np.sum(back_rotations * rotations, axis=1) < 0, -1.0, 1.0)[:, None]
    np.testing.assert_allclose(back_rotations * sign, rotations, atol=2e-5)
    np.testing.assert_allclose(back_translations, translations, atol=2e-5)
    np.testing.assert_allclose(back_scales, scales, atol=2e-5)
    again = humanoid.forward_kinematics(back_rotations, back_translations, back_scales)
    np.testing.assert_allclose(again, world, atol=2e-5)
    # Column-major input (Blender's foreach_get layout) gives the same pose.
    column_major = humanoid.pose_from_world(np.ascontiguousarray(world.transpose(0, 2, 1)), column_major=True)
    np.testing.assert_allclose(column_major[0], back_rotations, atol=1e-6)
    with pytest.raises(tendon.ShapeError, match="matrices"):
        humanoid.pose_from_world(world[:3])


def test_euler_orders_and_default_limits_are_the_ones_rigs_use() -> None:
    orders = tendon.euler_orders()
    assert orders == ["XYZ", "XZY", "YXZ", "YZX", "ZXY", "ZYX"]
    defaults = tendon.default_limits()
    assert defaults["order"] == orders[0]
    assert (defaults["x"], defaults["y"], defaults["z"], defaults["roll"]) == ({"mode": "free"},) * 3 + (0.0,)
    # A bone whose limits name only an order gets exactly these (its own order kept).
    for order in orders:
        rig = tendon.Rig.from_arrays(
            ["b"], [-1], np.eye(4, dtype=np.float32)[None], np.ones(1, np.float32), json.dumps({"b": {"order": order}})
        )
        assert json.loads(rig.to_json())["bones"][0]["limits"] == {**defaults, "order": order}
    side = defaults["tension"][0]["negative"]
    assert side["threshold"] == pytest.approx(np.pi / 2) and side["rigidity"] == 1.0
    # Any other order is refused by name.
    with pytest.raises(tendon.TendonError, match="XYZ"):
        tendon.Rig.from_arrays(
            ["b"], [-1], np.eye(4, dtype=np.float32)[None], np.ones(1, np.float32), '{"b": {"order": "XXY"}}'
        )


def test_start_pose_takes_the_listed_bones_from_their_channels(humanoid: tendon.Rig) -> None:
    """What a solve in Blender starts from: the evaluated pose, but the moving bones from
    their own channels; how far each of those is from where it is shown; scales that flatten."""
    rng = np.random.default_rng(11)
    n = len(humanoid)
    rotations = rng.normal(size=(n, 4)).astype(np.float32)
    rotations /= np.linalg.norm(rotations, axis=1, keepdims=True)
    world = humanoid.forward_kinematics(rotations)
    shown = humanoid.pose_from_world(world)
    # The channels: the shown pose, but two bones turned elsewhere and one scaled to zero.
    basis = np.tile(np.eye(4, dtype=np.float32), (n, 1, 1))
    channels = shown[0].copy()
    moved, flat = humanoid.index("forearm.L"), humanoid.index("shin.R")
    channels[moved] = (0.6, 0.8, 0.0, 0.0)
    for bone in range(n):
        w, x, y, z = channels[bone]
        basis[bone, :3, :3] = [
            [1 - 2 * (y * y + z * z), 2 * (x * y - w * z), 2 * (x * z + w * y)],
            [2 * (x * y + w * z), 1 - 2 * (x * x + z * z), 2 * (y * z - w * x)],
            [2 * (x * z - w * y), 2 * (y * z + w * x), 1 - 2 * (x * x + y * y)],
        ]
        basis[bone, :3, 3] = shown[1][bone]
    basis[flat, :3, 1] = 0.0
    bones = [humanoid.index("hand.L"), moved, humanoid.index("upper_arm.L")]
    start, translations, scales, differences, smallest = humanoid.start_pose(basis, world, bones)
    others = [bone for bone in range(n) if bone not in bones]
    np.testing.assert_allclose(start[others], shown[0][others], atol=1e-6)
    sign = np.where(np.sum(start[bones] * channels[bones], axis=1) < 0, -1.0, 1.0)[:, None]
    np.testing.assert_allclose(start[bones] * sign, channels[bones], atol=2e-5)
    np.testing.assert_allclose(translations[bones], shown[1][bones], atol=1e-5)
    np.testing.assert_allclose(scales, 1.0, atol=2e-5)
    assert differences[1] > 0.1 and differences[0] < 1e-5 and differences[2] < 1e-5
    assert smallest[flat] == 0.0 and np.all(np.delete(smallest, flat) > 0.99)
    # Column-major input (Blender's foreach_get layout) gives the same.
    again = humanoid.start_pose(basis.transpose(0, 2, 1).copy(), world.transpose(0, 2, 1).copy(), bones, True)
    np.testing.assert_allclose(again[0], start, atol=1e-6)
    with pytest.raises(tendon.BoneIndexError, match="index 99 is out of range"):
        humanoid.start_pose(basis, world, [99])
