"""tendon.humanoid: recognising humanoids by naming convention and by topology, and the
limits it gives them (valid for the native library, axes from geometry, flexion signs)."""

from __future__ import annotations

import json
import math
import re
from pathlib import Path

import numpy as np
import pytest

import tendon
from tendon import humanoid

MOCAP = Path(__file__).resolve().parent.parent / "fixtures" / "mocap"

# --- A synthetic humanoid, named by each convention ----------------------------------------

SIDES = {"L": 1.0, "R": -1.0}


def humanoid_rows(
    names: dict[str, str], spine: list[str], neck: list[str], pose: str = "T", extras: dict[str, str] | None = None
) -> list[tuple[str, str | None, tuple[float, ...], tuple[float, ...]]]:
    """Bones (name, parent, head, tail) of a 1.8 m humanoid facing -Y (Blender's front), left
    at +X. `names`: role -> bone name for hips, head and the limbs (sides .L/.R); `spine`
    and `neck`: their segments from the bottom up (the last spine one is the chest); `pose`:
    "T" (arms out) or "A" (arms 45 degrees down). `extras`: role -> name of a bone inserted
    between that joint and its parent (a BVH hip or wrist bone). Each hand gets three
    fingers and the upper arm a twist bone beside the forearm, as real rigs have."""
    extras = extras or {}
    rows: list[tuple[str, str | None, tuple[float, ...], tuple[float, ...]]] = []

    def add(name: str, parent: str | None, head: tuple[float, ...], tail: tuple[float, ...]) -> None:
        rows.append((name, parent, tuple(head), tuple(tail)))

    add(names["hips"], None, (0, 0.02, 1.0), (0, 0.0, 1.1))
    bottom, top = 1.1, 1.5
    parent = names["hips"]
    for k, name in enumerate(spine):
        z0 = bottom + (top - bottom) * k / len(spine)
        z1 = bottom + (top - bottom) * (k + 1) / len(spine)
        add(name, parent, (0, 0.0, z0), (0, 0.0, z1))
        parent = name
    chest = spine[-1]
    for k, name in enumerate(neck):
        z0 = 1.5 + 0.1 * k / len(neck)
        add(name, parent, (0, 0.0, z0), (0, -0.005, 1.5 + 0.1 * (k + 1) / len(neck)))
        parent = name
    add(names["head"], parent, (0, -0.005, 1.6), (0, -0.01, 1.8))
    for side, s in SIDES.items():

        def named(role: str, side: str = side) -> str:
            return names[f"{role}.{side}"]

        def chain(role: str, parent: str, head: tuple, tail: tuple, side: str = side) -> str:
            extra = extras.get(f"{role}.{side}")
            if extra:
                add(extra, parent, head, tuple(np.add(head, (0, 0, 0.005))))
                parent = extra
            add(named(role), parent, head, tail)
            return named(role)

        shoulder = (s * 0.17, 0.02, 1.48)
        if pose == "T":
            elbow, wrist, knuckles = (s * 0.45, 0.02, 1.48), (s * 0.72, 0.02, 1.48), (s * 0.8, 0.02, 1.48)
        else:
            c = math.cos(math.radians(45))
            elbow = (s * (0.17 + 0.28 * c), 0.02, 1.48 - 0.28 * c)
            wrist = (s * (0.17 + 0.55 * c), 0.02, 1.48 - 0.55 * c)
            knuckles = (s * (0.17 + 0.63 * c), 0.02, 1.48 - 0.63 * c)
        clavicle = chain("clavicle", chest, (s * 0.02, 0.02, 1.48), shoulder)
        upper = chain("upper_arm", clavicle, shoulder, elbow)
        add(f"twist_{side}", upper, shoulder, elbow)
        fore = chain("forearm", upper, elbow, wrist)
        hand = chain("hand", fore, wrist, knuckles)
        for f, dy in enumerate((-0.03, 0.0, 0.03)):
            base = (knuckles[0], knuckles[1] + dy, knuckles[2])
            add(f"finger_{side}{f}", hand, base, tuple(np.add(base, (s * 0.08, 0, 0)) if pose == "T" else base))
            if pose != "T":
                rows[-1] = (rows[-1][0], hand, base, tuple(np.add(base, (s * 0.06, 0, -0.06))))
        # Knees a little bent (forward), arms straight.
        thigh = chain("thigh", names["hips"], (s * 0.1, 0.0, 1.0), (s * 0.1, -0.015, 0.55))
        shin = chain("shin", thigh, (s * 0.1, -0.015, 0.55), (s * 0.1, 0.0, 0.1))
        foot = chain("foot", shin, (s * 0.1, 0.0, 0.1), (s * 0.1, -0.1, 0.03))
        chain("toe", foot, (s * 0.1, -0.1, 0.03), (s * 0.1, -0.16, 0.03))
    return rows


def limb_names(pattern: dict[str, str], sides: dict[str, str]) -> dict[str, str]:
    """role.L/.R -> name from patterns holding {side}."""
    return {f"{role}.{side}": p.format(side=token) for role, p in pattern.items() for side, token in sides.items()}


CONVENTIONS: dict[str, tuple[dict[str, str], list[str], list[str], dict[str, str]]] = {
    "Rigify metarig": (
        {"hips": "spine", "head": "spine.006"}
        | limb_names(
            {
                "clavicle": "shoulder.{side}",
                "upper_arm": "upper_arm.{side}",
                "forearm": "forearm.{side}",
                "hand": "hand.{side}",
                "thigh": "thigh.{side}",
                "shin": "shin.{side}",
                "foot": "foot.{side}",
                "toe": "toe.{side}",
            },
            {"L": "L", "R": "R"},
        ),
        ["spine.001", "spine.002", "spine.003"],
        ["spine.004", "spine.005"],
        {},
    ),
    "Mixamo / HumanIK": (
        {"hips": "mixamorig:Hips", "head": "mixamorig:Head"}
        | limb_names(
            {
                "clavicle": "mixamorig:{side}Shoulder",
                "upper_arm": "mixamorig:{side}Arm",
                "forearm": "mixamorig:{side}ForeArm",
                "hand": "mixamorig:{side}Hand",
                "thigh": "mixamorig:{side}UpLeg",
                "shin": "mixamorig:{side}Leg",
                "foot": "mixamorig:{side}Foot",
                "toe": "mixamorig:{side}ToeBase",
            },
            {"L": "Left", "R": "Right"},
        ),
        ["mixamorig:Spine", "mixamorig:Spine1", "mixamorig:Spine2"],
        ["mixamorig:Neck"],
        {},
    ),
    "CMU BVH (cgspeed, 3ds Max names)": (
        {"hips": "Hips", "head": "Head", "hand.L": "lhand", "hand.R": "rhand"}
        | limb_names(
            {
                "clavicle": "{side}Collar",
                "upper_arm": "{side}Shoulder",
                "forearm": "{side}Elbow",
                "thigh": "{side}Hip",
                "shin": "{side}Knee",
                "foot": "{side}Ankle",
                "toe": "{side}Toe",
            },
            {"L": "Left", "R": "Right"},
        ),
        ["lowerback", "Chest", "Chest2"],
        ["lowerneck", "Neck"],
        {"thigh.L": "LHipJoint", "thigh.R": "RHipJoint", "hand.L": "LeftWrist", "hand.R": "RightWrist"},
    ),
    "CMU ASF names": (
        {"hips": "root", "head": "head"}
        | limb_names(
            {
                "clavicle": "{side}clavicle",
                "upper_arm": "{side}humerus",
                "forearm": "{side}radius",
                "hand": "{side}hand",
                "thigh": "{side}femur",
                "shin": "{side}tibia",
                "foot": "{side}foot",
                "toe": "{side}toes",
            },
            {"L": "l", "R": "r"},
        ),
        ["lowerback", "upperback", "thorax"],
        ["lowerneck", "upperneck"],
        {"thigh.L": "lhipjoint", "thigh.R": "rhipjoint", "hand.L": "lwrist", "hand.R": "rwrist"},
    ),
    "Character Creator": (
        {"hips": "CC_Base_Hip", "head": "CC_Base_Head"}
        | limb_names(
            {
                "clavicle": "CC_Base_{side}_Clavicle",
                "upper_arm": "CC_Base_{side}_Upperarm",
                "forearm": "CC_Base_{side}_Forearm",
                "hand": "CC_Base_{side}_Hand",
                "thigh": "CC_Base_{side}_Thigh",
                "shin": "CC_Base_{side}_Calf",
                "foot": "CC_Base_{side}_Foot",
                "toe": "CC_Base_{side}_ToeBase",
            },
            {"L": "L", "R": "R"},
        ),
        ["CC_Base_Waist", "CC_Base_Spine01", "CC_Base_Spine02"],
        ["CC_Base_NeckTwist01", "CC_Base_NeckTwist02"],
        {},
    ),
    "Unreal mannequin": (
        {"hips": "pelvis", "head": "head"}
        | limb_names(
            {
                "clavicle": "clavicle_{side}",
                "upper_arm": "upperarm_{side}",
                "forearm": "lowerarm_{side}",
                "hand": "hand_{side}",
                "thigh": "thigh_{side}",
                "shin": "calf_{side}",
                "foot": "foot_{side}",
                "toe": "ball_{side}",
            },
            {"L": "l", "R": "r"},
        ),
        ["spine_01", "spine_02", "spine_03", "spine_04", "spine_05"],
        ["neck_01", "neck_02"],
        {},
    ),
    "VRoid / VRM": (
        {"hips": "J_Bip_C_Hips", "head": "J_Bip_C_Head"}
        | limb_names(
            {
                "clavicle": "J_Bip_{side}_Shoulder",
                "upper_arm": "J_Bip_{side}_UpperArm",
                "forearm": "J_Bip_{side}_LowerArm",
                "hand": "J_Bip_{side}_Hand",
                "thigh": "J_Bip_{side}_UpperLeg",
                "shin": "J_Bip_{side}_LowerLeg",
                "foot": "J_Bip_{side}_Foot",
                "toe": "J_Bip_{side}_ToeBase",
            },
            {"L": "L", "R": "R"},
        ),
        ["J_Bip_C_Spine", "J_Bip_C_Chest", "J_Bip_C_UpperChest"],
        ["J_Bip_C_Neck"],
        {},
    ),
    "Unity humanoid": (
        {"hips": "Hips", "head": "Head"}
        | limb_names(
            {
                "clavicle": "{side}Shoulder",
                "upper_arm": "{side}UpperArm",
                "forearm": "{side}LowerArm",
                "hand": "{side}Hand",
                "thigh": "{side}UpperLeg",
                "shin": "{side}LowerLeg",
                "foot": "{side}Foot",
                "toe": "{side}Toes",
            },
            {"L": "Left", "R": "Right"},
        ),
        ["Spine", "Chest", "UpperChest"],
        ["Neck"],
        {},
    ),
    "Daz": (
        {"hips": "hip", "head": "head"}
        | limb_names(
            {
                "clavicle": "{side}Collar",
                "upper_arm": "{side}ShldrBend",
                "forearm": "{side}ForearmBend",
                "hand": "{side}Hand",
                "thigh": "{side}ThighBend",
                "shin": "{side}Shin",
                "foot": "{side}Foot",
                "toe": "{side}Toe",
            },
            {"L": "l", "R": "r"},
        ),
        ["abdomenLower", "abdomenUpper", "chestLower", "chestUpper"],
        ["neckLower", "neckUpper"],
        {},
    ),
    "3ds Max Biped": (
        {"hips": "Bip01 Pelvis", "head": "Bip01 Head"}
        | limb_names(
            {
                "clavicle": "Bip01 {side} Clavicle",
                "upper_arm": "Bip01 {side} UpperArm",
                "forearm": "Bip01 {side} Forearm",
                "hand": "Bip01 {side} Hand",
                "thigh": "Bip01 {side} Thigh",
                "shin": "Bip01 {side} Calf",
                "foot": "Bip01 {side} Foot",
                "toe": "Bip01 {side} Toe0",
            },
            {"L": "L", "R": "R"},
        ),
        ["Bip01 Spine", "Bip01 Spine1", "Bip01 Spine2"],
        ["Bip01 Neck"],
        {},
    ),
    "Rigify ORG bones": (
        {"hips": "ORG-spine", "head": "ORG-spine.006"}
        | limb_names(
            {
                "clavicle": "ORG-shoulder.{side}",
                "upper_arm": "ORG-upper_arm.{side}",
                "forearm": "ORG-forearm.{side}",
                "hand": "ORG-hand.{side}",
                "thigh": "ORG-thigh.{side}",
                "shin": "ORG-shin.{side}",
                "foot": "ORG-foot.{side}",
                "toe": "ORG-toe.{side}",
            },
            {"L": "L", "R": "R"},
        ),
        ["ORG-spine.001", "ORG-spine.002", "ORG-spine.003"],
        ["ORG-spine.004", "ORG-spine.005"],
        {},
    ),
}


def arrays(
    rows: list[tuple[str, str | None, tuple[float, ...], tuple[float, ...]]],
) -> tuple[list[str], list[int], np.ndarray, np.ndarray]:
    names = [r[0] for r in rows]
    index = {name: i for i, name in enumerate(names)}
    parents = [index[r[1]] if r[1] else -1 for r in rows]
    return names, parents, np.array([r[2] for r in rows], float), np.array([r[3] for r in rows], float)


def rest_matrices(heads: np.ndarray, tails: np.ndarray, roll: np.ndarray | None = None) -> np.ndarray:
    """Blender's bone matrices for heads and tails (its rule for roll 0: the smallest turn
    from +Y), turned about the bone by `roll`, as (n, 4, 4) row-major."""
    out = np.zeros((len(heads), 4, 4))
    for i, (h, t) in enumerate(zip(heads, tails, strict=True)):
        y = (t - h) / np.linalg.norm(t - h)
        axis = np.cross([0.0, 1.0, 0.0], y)
        s, c = np.linalg.norm(axis), float(np.dot([0.0, 1.0, 0.0], y))
        if s < 1e-9:
            m = np.eye(3) if c > 0 else np.diag([-1.0, -1.0, 1.0])
        else:
            m = rotation(axis / s, math.atan2(s, c))
        if roll is not None:
            m = rotation(y, roll[i]) @ m
        out[i, :3, :3] = m
        out[i, :3, 3] = h
        out[i, 3, 3] = 1.0
    return out


def rotation(axis: np.ndarray, angle: float) -> np.ndarray:
    """Rodrigues' formula, written out here so the tests do not lean on the module's own."""
    k = np.array([[0, -axis[2], axis[1]], [axis[2], 0, -axis[0]], [-axis[1], axis[0], 0]])
    return np.eye(3) + math.sin(angle) * k + (1 - math.cos(angle)) * (k @ k)


EXPECTED_ROLES = {
    "hips",
    "chest",
    "head",
    *(f"{p}.{s}" for p in ("clavicle", "upper_arm", "forearm", "hand", "thigh", "shin", "foot", "toe") for s in "LR"),
}


@pytest.mark.parametrize("convention", sorted(CONVENTIONS))
def test_recognises_each_naming_convention(convention: str) -> None:
    names_by_role, spine, neck, extras = CONVENTIONS[convention]
    rows = humanoid_rows(names_by_role, spine, neck, extras=extras)
    names, parents, heads, tails = arrays(rows)
    found = humanoid.recognize(names, parents, heads, tails)
    assert found.convention == convention
    for role in EXPECTED_ROLES:
        assert found.roles[role] == (names_by_role[role] if role != "chest" else spine[-1]), role
        assert found.how[role] == f"name ({convention})"
    assert [found.roles[f"spine.{k + 1}"] for k in range(len(spine) - 1)] == spine[:-1]
    assert [found.roles[f"neck.{k + 1}"] for k in range(len(neck))] == neck
    assert sorted(found.between) == sorted(extras.values())
    assert set(found.unrecognised) == {n for n in names if n.startswith(("twist_", "finger_"))}


def test_names_on_the_other_side_of_the_body_take_their_sides_from_the_feet() -> None:
    """A named rig mirrored with the mirror applied: the bones named left stand on the
    character's right while the feet still point forward (-Y). Its sides come from the
    geometry, and it says so (taken from the names, the limits were mirrored and knees
    bent backwards; QA helper). Unmirrored, the names stand."""
    names_by_role, spine, neck, extras = CONVENTIONS["Mixamo / HumanIK"]
    rows = humanoid_rows(names_by_role, spine, neck, extras=extras)
    names, parents, heads, tails = arrays(rows)
    mirror = np.array([-1.0, 1.0, 1.0])
    found = humanoid.recognize(names, parents, heads * mirror, tails * mirror)
    for role in ("thigh", "shin", "upper_arm", "forearm", "hand", "foot"):
        assert found.roles[f"{role}.L"] == names_by_role[f"{role}.R"], role
        assert found.roles[f"{role}.R"] == names_by_role[f"{role}.L"], role
    assert any("stand on its right" in note for note in found.notes), found.notes
    found = humanoid.recognize(names, parents, heads, tails)
    assert found.roles["thigh.L"] == names_by_role["thigh.L"]
    assert not any("stand on its right" in note for note in found.notes)


def test_mixamo_names_without_namespace_and_cgspeed_motionbuilder_names() -> None:
    """cgspeed's MotionBuilder-friendly CMU files use Mixamo's names, no namespace."""
    names_by_role, spine, neck, _ = CONVENTIONS["Mixamo / HumanIK"]
    plain = {role: name.split(":")[1] for role, name in names_by_role.items()}
    rows = humanoid_rows(plain, ["LowerBack", "Spine", "Spine1"], ["Neck", "Neck1"], extras={"thigh.L": "LHipJoint"})
    found = humanoid.recognize(*arrays(rows))
    assert found.convention == "Mixamo / HumanIK"
    assert found.roles["upper_arm.L"] == "LeftArm" and found.roles["clavicle.R"] == "RightShoulder"
    assert found.roles["spine.1"] == "LowerBack" and found.roles["chest"] == "Spine1"
    assert found.between == ["LHipJoint"]


def test_cgspeed_max_names_are_not_mistaken_for_mixamo() -> None:
    """'LeftShoulder' is the clavicle in Mixamo's names and the upper arm in cgspeed's 3ds
    Max names: the convention that matches most bones decides."""
    rows = humanoid_rows(*CONVENTIONS["CMU BVH (cgspeed, 3ds Max names)"][:3])
    found = humanoid.recognize(*arrays(rows))
    assert found.roles["upper_arm.L"] == "LeftShoulder" and found.roles["clavicle.L"] == "LeftCollar"


def test_case_and_separators_do_not_matter() -> None:
    names_by_role, spine, neck, _ = CONVENTIONS["Unreal mannequin"]
    shout = {role: name.upper().replace("_", "-") for role, name in names_by_role.items()}
    rows = humanoid_rows(shout, [s.upper().replace("_", " ") for s in spine], [n.upper() for n in neck])
    found = humanoid.recognize(*arrays(rows))
    assert found.convention == "Unreal mannequin"
    assert found.roles["shin.R"] == "CALF-R" and found.roles["spine.1"] == "SPINE 01"


def test_generated_rigify_rig_prefers_the_fk_controls() -> None:
    """The generated rig has ORG-, DEF- and FK bones for every joint: limits go on the FK
    controls, which the others follow."""
    fk = {"hips": "torso", "head": "head"} | limb_names(
        {
            "clavicle": "shoulder.{side}",
            "upper_arm": "upper_arm_fk.{side}",
            "forearm": "forearm_fk.{side}",
            "hand": "hand_fk.{side}",
            "thigh": "thigh_fk.{side}",
            "shin": "shin_fk.{side}",
            "foot": "foot_fk.{side}",
            "toe": "toe_fk.{side}",
        },
        {"L": "L", "R": "R"},
    )
    rows = humanoid_rows(fk, ["spine_fk.002", "spine_fk.003"], ["neck"], extras={"hand.L": "MCH-hand_fk.L"})
    org = humanoid_rows(*CONVENTIONS["Rigify ORG bones"][:3])
    deform = [
        (name.replace("ORG-", "DEF-"), parent and parent.replace("ORG-", "DEF-"), h, t) for name, parent, h, t in org
    ]
    rename = {r[0]: r[0] + "_" for r in org + deform if r[0].startswith(("twist", "finger"))}
    rows += [(rename.get(n, n), rename.get(p, p) if p else None, h, t) for n, p, h, t in org + deform]
    found = humanoid.recognize(*arrays(rows))
    assert found.convention == "Rigify generated rig (FK controls)"
    assert found.roles["forearm.L"] == "forearm_fk.L" and found.roles["chest"] == "spine_fk.003"
    assert found.between == ["MCH-hand_fk.L"]
    assert any("FK controls" in note for note in found.notes)


def test_rigify_deforming_bones_exported_alone_keep_their_names() -> None:
    """An FBX export of a generated rig's deforming bones: the DEF- bones hang from ORG-
    ones (the thighs from ORG-spine, not DEF-spine). By name, with the trunk's ORG- twin
    counting as the trunk (the tree was taken instead: a breast bone became the head and
    the knees bent backwards; QA helper)."""
    org = humanoid_rows(*CONVENTIONS["Rigify ORG bones"][:3])
    deform = [
        (name.replace("ORG-", "DEF-"), parent and parent.replace("ORG-", "DEF-"), h, t) for name, parent, h, t in org
    ]
    # The ORG- trunk, each DEF- limb under the ORG- twin of its trunk bone, as the export
    # leaves them.
    hang = {"DEF-thigh.L": "ORG-spine", "DEF-thigh.R": "ORG-spine"}
    hang |= {f"DEF-shoulder.{side}": "ORG-spine.003" for side in "LR"}
    trunk = [(n, p, h, t) for n, p, h, t in org if n.startswith("ORG-spine")]
    rows = trunk + [(n, hang.get(n, p), h, t) for n, p, h, t in deform]
    found = humanoid.recognize(*arrays(rows))
    assert found.convention == "Rigify DEF bones", found.convention
    assert found.roles["thigh.L"] == "DEF-thigh.L" and found.roles["hips"] == "DEF-spine"
    assert found.roles["head"].startswith("DEF-spine"), found.roles["head"]


def scrambled(rows: list, seed: int) -> tuple[list, dict[str, str]]:
    """The same skeleton with meaningless names, in a shuffled order."""
    rng = np.random.default_rng(seed)
    order = rng.permutation(len(rows))
    rename = {rows[i][0]: f"bone{k:03d}" for k, i in enumerate(order)}
    out = [(rename[rows[i][0]], rename[rows[i][1]] if rows[i][1] else None, rows[i][2], rows[i][3]) for i in order]
    # Parents must exist before use only for the caller's index: keep the shuffled order.
    return out, {new: old for old, new in rename.items()}


@pytest.mark.parametrize("pose", ["T", "A"])
@pytest.mark.parametrize("convention", ["Rigify metarig", "Unreal mannequin", "CMU BVH (cgspeed, 3ds Max names)"])
def test_topology_finds_every_role_without_names(convention: str, pose: str) -> None:
    names_by_role, spine, neck, extras = CONVENTIONS[convention]
    rows = humanoid_rows(names_by_role, spine, neck, pose=pose, extras=extras)
    rows, original = scrambled(rows, seed=len(convention))
    found = humanoid.recognize(*arrays(rows))
    assert found.convention == "topology"
    for role in EXPECTED_ROLES:
        assert original[found.roles[role]] == (names_by_role[role] if role != "chest" else spine[-1]), role
        assert found.how[role] == "topology"
    assert [original[found.roles[f"spine.{k + 1}"]] for k in range(len(spine) - 1)] == spine[:-1]
    assert [original[found.roles[f"neck.{k + 1}"]] for k in range(len(neck))] == neck
    assert sorted(original[b] for b in found.between) == sorted(extras.values())


@pytest.mark.parametrize("prop", [0.1, 0.25, 0.5, 0.9])
def test_topology_finds_every_role_with_a_prop_bone_in_one_hand(prop: float) -> None:
    """A weapon bone held in the right hand: the arms are still a mirror pair and the hand
    is the hand (no humanoid was found; QA helper)."""
    names_by_role, spine, neck, extras = CONVENTIONS["Unreal mannequin"]
    rows = humanoid_rows(names_by_role, spine, neck, extras=extras)
    hand = next(r for r in rows if r[0] == names_by_role["hand.R"])
    rows.append(("weapon_r", hand[0], hand[3], tuple(np.add(hand[3], (0.0, -prop, 0.0)))))
    rows, original = scrambled(rows, seed=3)
    found = humanoid.recognize(*arrays(rows))
    assert found.convention == "topology"
    for role in EXPECTED_ROLES:
        assert original[found.roles[role]] == (names_by_role[role] if role != "chest" else spine[-1]), role


def test_topology_does_not_take_long_hair_for_the_head() -> None:
    """Four bones of hair hanging down the back from the head: the head is the head, the
    neck the neck (the hair's end took the head's role; QA helper)."""
    names_by_role, spine, neck, extras = CONVENTIONS["Unreal mannequin"]
    rows = humanoid_rows(names_by_role, spine, neck, extras=extras)
    head = next(r for r in rows if r[0] == names_by_role["head"])
    parent, top = head[0], np.add(head[2], (0.0, 0.08, 0.12))
    for k in range(4):
        bottom = np.add(top, (0.0, 0.02, -0.15))
        rows.append((f"hair_{k}", parent, tuple(top), tuple(bottom)))
        parent, top = f"hair_{k}", bottom
    rows, original = scrambled(rows, seed=5)
    found = humanoid.recognize(*arrays(rows))
    assert original[found.roles["head"]] == names_by_role["head"]
    assert [original[found.roles[f"neck.{k + 1}"]] for k in range(len(neck))] == neck
    assert f"neck.{len(neck) + 1}" not in found.roles


# --- The CMU motion-capture skeletons, read from their BVH files ----------------------------


def bvh_rows(path: Path) -> list[tuple[str, str | None, tuple[float, ...], tuple[float, ...]]]:
    """A BVH file's hierarchy as Blender's importer makes bones: the head at the joint, the
    tail at the mean of the children's joints (or the end site), Y-up turned to Z-up."""
    tokens = re.findall(r"[{}]|[^\s{}]+", path.read_text().split("MOTION")[0])
    joints: list[dict] = []
    stack: list[dict] = []
    pending: dict | None = None
    k = 0
    while k < len(tokens):
        token = tokens[k]
        if token in ("ROOT", "JOINT"):
            pending = {"name": tokens[k + 1], "parent": stack[-1] if stack else None, "children": [], "end": None}
            joints.append(pending)
            k += 2
        elif token == "End":
            pending = {"end_of": stack[-1]}
            k += 2
        elif token == "{":
            stack.append(pending)
            k += 1
        elif token == "}":
            stack.pop()
            k += 1
        elif token == "OFFSET":
            offset = np.array([float(t) for t in tokens[k + 1 : k + 4]])
            top = stack[-1]
            if "end_of" in top:
                top["end_of"]["end"] = offset
            else:
                top["offset"] = offset
            k += 4
        else:
            k += 1
    for joint in joints:
        parent = joint["parent"]
        joint["head"] = joint["offset"] + (parent["head"] if parent else 0.0)
        if parent:
            parent["children"].append(joint)

    def blender(v: np.ndarray) -> tuple[float, ...]:
        return (float(v[0]), float(-v[2]), float(v[1]))

    rows = []
    for joint in joints:
        if joint["children"]:
            tail = np.mean([c["head"] for c in joint["children"]], axis=0)
        else:
            tail = joint["head"] + (joint["end"] if joint["end"] is not None else 0.0)
        if np.linalg.norm(tail - joint["head"]) < 1e-6:
            tail = joint["head"] + np.array([0.0, 0.1, 0.0])
        rows.append(
            (joint["name"], joint["parent"]["name"] if joint["parent"] else None, blender(joint["head"]), blender(tail))
        )
    return rows


BVH_EXPECTED = {
    "cmu_102_01_max.bvh": (
        "CMU BVH (cgspeed, 3ds Max names)",
        {
            "hips": "Hips",
            "spine.1": "lowerback",
            "spine.2": "Chest",
            "chest": "Chest2",
            "neck.1": "lowerneck",
            "neck.2": "Neck",
            "head": "Head",
            "clavicle.L": "LeftCollar",
            "upper_arm.L": "LeftShoulder",
            "forearm.L": "LeftElbow",
            "hand.L": "lhand",
            "thigh.R": "RightHip",
            "shin.R": "RightKnee",
            "foot.R": "RightAnkle",
            "toe.R": "RightToe",
        },
        ["LHipJoint", "RHipJoint", "LeftWrist", "RightWrist"],
    ),
    "cmu_007_01_cc.bvh": (
        "Character Creator",
        {
            "hips": "CC_Base_Hip",
            "spine.1": "CC_Base_Waist",
            "spine.2": "CC_Base_Spine01",
            "chest": "CC_Base_Spine02",
            "neck.1": "CC_Base_NeckTwist01",
            "neck.2": "CC_Base_NeckTwist02",
            "head": "CC_Base_Head",
            "clavicle.R": "CC_Base_R_Clavicle",
            "upper_arm.R": "CC_Base_R_Upperarm",
            "forearm.R": "CC_Base_R_Forearm",
            "hand.R": "CC_Base_R_Hand",
            "thigh.L": "CC_Base_L_Thigh",
            "shin.L": "CC_Base_L_Calf",
            "foot.L": "CC_Base_L_Foot",
            "toe.L": "CC_Base_L_ToeBase",
        },
        ["CC_Base_Pelvis"],
    ),
}


@pytest.mark.parametrize("file", sorted(BVH_EXPECTED))
@pytest.mark.parametrize("by", ["names", "topology"])
def test_cmu_skeletons(file: str, by: str) -> None:
    """Both CMU conventions the project ships, by their names and with the names scrambled
    (the Character Creator file rests with every bone pointing up: left and right then come
    from Blender's front, -Y)."""
    convention, expected, between = BVH_EXPECTED[file]
    rows = bvh_rows(MOCAP / file)
    original = {r[0]: r[0] for r in rows}
    if by == "topology":
        rows, original = scrambled(rows, seed=7)
    found = humanoid.recognize(*arrays(rows))
    assert found.convention == (convention if by == "names" else "topology")
    for role, bone in expected.items():
        assert original[found.roles[role]] == bone, role
    assert sorted(original[b] for b in found.between) == sorted(between)
    assert len(found.roles) == 23


def test_refuses_what_is_not_a_humanoid() -> None:
    rows = [("root", None, (0, 0, 0), (0, 0, 1))] + [
        (f"b{i}", "root" if i == 0 else f"b{i - 1}", (0, 0, i + 1.0), (0, 0, i + 2.0)) for i in range(6)
    ]
    with pytest.raises(humanoid.HumanoidError, match="No humanoid found: no bones for thigh.L"):
        humanoid.recognize(*arrays(rows))
    names, parents, heads, tails = arrays(humanoid_rows(*CONVENTIONS["Unity humanoid"][:3]))
    with pytest.raises(humanoid.HumanoidError, match="heads must be"):
        humanoid.recognize(names, parents, heads[:-1], tails)
    with pytest.raises(humanoid.HumanoidError, match="Bone 'Hips' has parent index 99"):
        humanoid.recognize(names, [99] + parents[1:], heads, tails)


def test_four_legged_rigs_with_human_names_are_refused() -> None:
    """Rigify's four-legged metarigs reuse the human names: thighs that do not hang from
    the hips are no humanoid's, and legs standing square to the spine are not upright."""
    names, parents, heads, tails = arrays(humanoid_rows(*CONVENTIONS["Unity humanoid"][:3]))
    found = humanoid.recognize(names, parents, heads, tails)
    assert humanoid.upright(found, heads, tails)
    # The legs swung forward to horizontal about each hip: square to the spine.
    swung_heads, swung_tails = heads.copy(), tails.copy()
    for side in "LR":
        thigh = names.index(found.roles[f"thigh.{side}"])
        hip = heads[thigh].copy()
        turn = rotation(np.array([1.0, 0.0, 0.0]), -math.pi / 2)
        for bone in [i for i in range(len(names)) if _descends(parents, i, thigh)]:
            swung_heads[bone] = hip + turn @ (heads[bone] - hip)
            swung_tails[bone] = hip + turn @ (tails[bone] - hip)
    assert not humanoid.upright(found, swung_heads, swung_tails)
    # A tail bone named like the hips: the thighs hang from another bone.
    hips = names.index(found.roles["hips"])
    moved = [p if i != names.index(found.roles["thigh.L"]) else -1 for i, p in enumerate(parents)]
    assert moved != parents and hips >= 0
    with pytest.raises(humanoid.HumanoidError, match="thigh.L 'LeftUpperLeg' does not hang from the hips 'Hips'"):
        humanoid.recognize(names, moved, heads, tails)
    # A rig named like Rigify's metarig (whose `spine` is the hips) with a `hips` bone of
    # its own above: the names hang the thighs from no hips, the tree finds the right ones.
    rig = tendon.Rig.from_json((Path(__file__).resolve().parents[1] / "fixtures" / "humanoid.json").read_text())
    bones = json.loads(rig.to_json())["bones"]
    bone_names = [b["name"] for b in bones]
    bone_parents = [bone_names.index(b["parent"]) if b["parent"] else -1 for b in bones]
    world = rig.forward_kinematics(rig.rest_rotations())
    bone_heads = world[:, :3, 3]
    bone_tails = bone_heads + world[:, :3, 1] * np.array([b["length"] for b in bones])[:, None]
    found = humanoid.recognize(bone_names, bone_parents, bone_heads, bone_tails)
    assert (found.roles["hips"], found.roles["thigh.L"], found.convention) == ("hips", "thigh.L", "topology")
    # Given by hand, the mapping stands.
    given = {"thigh.L": "LeftUpperLeg", "hips": "Hips"}
    assert humanoid.recognize(names, moved, heads, tails, overrides=given).roles["thigh.L"] == "LeftUpperLeg"


def test_overrides_correct_and_drop_roles() -> None:
    names, parents, heads, tails = arrays(humanoid_rows(*CONVENTIONS["Unity humanoid"][:3]))
    found = humanoid.recognize(names, parents, heads, tails, overrides={"toe.L": "", "hand.R": "finger_R1"})
    assert "toe.L" not in found.roles and "LeftToes" in found.unrecognised
    assert found.roles["hand.R"] == "finger_R1" and found.how["hand.R"] == "given"
    with pytest.raises(humanoid.HumanoidError, match="Role hand.R: no bone 'nope'"):
        humanoid.recognize(names, parents, heads, tails, overrides={"hand.R": "nope"})
    with pytest.raises(humanoid.HumanoidError, match="Bone 'LeftFoot' has two roles"):
        humanoid.recognize(names, parents, heads, tails, overrides={"toe.L": "LeftFoot"})


# --- Limits --------------------------------------------------------------------------------


def limits_for(
    convention: str, pose: str = "T", roll_seed: int | None = None
) -> tuple[list[str], list[int], np.ndarray, np.ndarray, np.ndarray, humanoid.Humanoid, dict]:
    names_by_role, spine, neck, extras = CONVENTIONS[convention]
    names, parents, heads, tails = arrays(humanoid_rows(names_by_role, spine, neck, pose=pose, extras=extras))
    roll = None if roll_seed is None else np.random.default_rng(roll_seed).uniform(-math.pi, math.pi, len(names))
    rest = rest_matrices(heads, tails, roll)
    found = humanoid.recognize(names, parents, heads, tails, rest)
    return names, parents, heads, tails, rest, found, humanoid.human_limits(found, names, heads, tails, rest)


def test_limits_are_valid_native_json() -> None:
    names, parents, heads, tails, rest, found, limits = limits_for("CMU BVH (cgspeed, 3ds Max names)")
    text = json.dumps(limits)
    lengths = np.linalg.norm(tails - heads, axis=1)
    rig = tendon.Rig.from_arrays(names, parents, rest.astype(np.float32), lengths.astype(np.float32), text)
    assert len(rig) == len(names)
    roles = set(found.roles.values()) - {found.roles["hips"]}
    assert set(limits) == roles | set(found.between)
    for name, joint in limits.items():
        assert joint["order"] in humanoid.ORDERS
        for axis in "xyz":
            limit = joint[axis]
            if limit["mode"] == "range":
                assert math.isfinite(limit["min"]) and limit["min"] <= limit["max"], (name, axis)
            else:
                assert limit["mode"] == "locked" and name in found.between
        if name in found.between:
            continue
        assert math.isfinite(joint["roll"])
        for side in (s for axis in joint["tension"] for s in axis.values()):
            assert side["threshold"] > 0 and side["rigidity"] >= 0
    # The native library keeps what it read (the roll is the lead's "roll" field; until the
    # core reads it, it is ignored and this only checks the limits themselves).
    parsed = json.loads(rig.to_json())
    shin = next(b for b in parsed["bones"] if b["name"] == "LeftKnee")
    assert shin["limits"]["x"]["mode"] == "range"


def flexed_tail(
    rest: np.ndarray, heads: np.ndarray, tails: np.ndarray, bone: int, limit: dict, angle: float
) -> np.ndarray:
    """Where a bone's tail goes when its joint turns `angle` about the limit frame's X (the
    bone's X turned about its Y by the roll) from the neutral: the rotation R N Rx R^-1 in
    the bone's frame."""
    r = rotation(np.array([0.0, 1.0, 0.0]), limit["roll"])
    q = r @ neutral_matrix(limit) @ rotation(np.array([1.0, 0.0, 0.0]), angle) @ r.T
    world = rest[bone, :3, :3] @ q @ rest[bone, :3, :3].T
    return heads[bone] + world @ (tails[bone] - heads[bone])


@pytest.mark.parametrize("pose", ["T", "A"])
@pytest.mark.parametrize("roll_seed", [None, 3, 11])
def test_hinges_flex_the_human_way_whatever_the_bone_roll(pose: str, roll_seed: int | None) -> None:
    """Knees and elbows: the limit frame's X is the hinge (perpendicular to the limb's bend
    plane), and the positive range bends the knee back and the elbow forward, whatever roll
    the rig's bones have."""
    names, _, heads, tails, rest, found, limits = limits_for("Unreal mannequin", pose=pose, roll_seed=roll_seed)
    forward = np.array([0.0, -1.0, 0.0])
    for side in "LR":
        for upper_role, lower_role, sign in (("thigh", "shin", -1.0), ("upper_arm", "forearm", 1.0)):
            upper, lower = (
                names.index(found.roles[f"{upper_role}.{side}"]),
                names.index(found.roles[f"{lower_role}.{side}"]),
            )
            limit = limits[names[lower]]
            assert limit["order"] == "YZX" and limit["y"]["max"] - limit["y"]["min"] <= math.radians(160.1)
            r = rotation(np.array([0.0, 1.0, 0.0]), limit["roll"])
            hinge = rest[lower, :3, :3] @ r @ np.array([1.0, 0.0, 0.0])
            bend = np.cross(tails[upper] - heads[upper], tails[lower] - heads[lower])
            if np.linalg.norm(bend) > 1e-3 * np.linalg.norm(tails[lower] - heads[lower]) ** 2:
                cosine = abs(np.dot(hinge, bend)) / np.linalg.norm(bend)
                assert cosine > math.cos(math.radians(2.0)), f"{lower_role}.{side} hinge off the bend plane"
            half = 0.5 * limit["x"]["max"]
            assert limit["x"]["min"] <= 1e-9 and half > 0.0
            moved = flexed_tail(rest, heads, tails, lower, limit, half) - tails[lower]
            assert sign * np.dot(moved, forward) > 0.05 * np.linalg.norm(tails[lower] - heads[lower]), lower_role
            assert limit["x"]["max"] - limit["x"]["min"] == pytest.approx(
                math.radians(135 if lower_role == "shin" else 150), abs=1e-6
            )


@pytest.mark.parametrize("pose", ["T", "A"])
@pytest.mark.parametrize("droop", [-10.0, -5.0, 5.0, 10.0])
def test_an_elbow_bent_across_the_body_at_rest_still_flexes_forward(pose: str, droop: float) -> None:
    """A rest forearm bent a few degrees in the body's front plane (sagging down or in, as
    A- and T-posed characters often are): that bend is not the elbow's hinge. Taken as
    one, the hinge turned 90 degrees and flexing the elbow moved the hand into the body."""
    names_by_role, spine, neck, extras = CONVENTIONS["Unreal mannequin"]
    rows = humanoid_rows(names_by_role, spine, neck, pose=pose, extras=extras)
    names, parents, heads, tails = arrays(rows)
    forward = np.array([0.0, -1.0, 0.0])
    for side, s in SIDES.items():
        fore = names.index(names_by_role[f"forearm.{side}"])
        elbow = heads[fore].copy()
        turn = rotation(forward, s * math.radians(droop))
        # The forearm and everything below it turned about the elbow, in the front plane.
        below = [i for i in range(len(names)) if i == fore or _descends(parents, i, fore)]
        for i in below:
            heads[i] = elbow + turn @ (heads[i] - elbow)
            tails[i] = elbow + turn @ (tails[i] - elbow)
    rest = rest_matrices(heads, tails)
    found = humanoid.recognize(names, parents, heads, tails, rest)
    limits = humanoid.human_limits(found, names, heads, tails, rest)
    for side in "LR":
        lower = names.index(found.roles[f"forearm.{side}"])
        limit = limits[names[lower]]
        moved = flexed_tail(rest, heads, tails, lower, limit, 0.5 * limit["x"]["max"]) - tails[lower]
        length = np.linalg.norm(tails[lower] - heads[lower])
        assert np.dot(moved, forward) > 0.3 * length, (side, moved)


def neutral_matrix(limit: dict) -> np.ndarray:
    """The limit's neutral ([w, x, y, z], rest when absent) as a rotation matrix, written
    out here rather than taken from the module."""
    w, x, y, z = limit.get("neutral", (1.0, 0.0, 0.0, 0.0))
    return np.array(
        [
            [1 - 2 * (y * y + z * z), 2 * (x * y - w * z), 2 * (x * z + w * y)],
            [2 * (x * y + w * z), 1 - 2 * (x * x + z * z), 2 * (y * z - w * x)],
            [2 * (x * z - w * y), 2 * (y * z + w * x), 1 - 2 * (x * x + y * y)],
        ]
    )


@pytest.mark.parametrize(("pose", "abduction"), [("T", 90.0), ("A", 45.0)])
def test_a_raised_rest_arm_keeps_the_human_range_from_a_hanging_neutral(pose: str, abduction: float) -> None:
    """A T-pose's arm is abducted 90 degrees (an A-pose's 45): the limits are the body's
    own numbers, abduction outermost from -30 (across the body) to 180, measured from a
    neutral that hangs the arm: a turn of exactly the rest's abduction about the limit
    frame's Z, down for the left arm and the right alike."""
    names, _, _, _, _, found, limits = limits_for("Mixamo / HumanIK", pose=pose)
    for side, sign in (("L", -1.0), ("R", 1.0)):
        limit = limits[found.roles[f"upper_arm.{side}"]]
        assert limit["order"] == "YXZ"
        low, high = (-30.0, 180.0) if side == "L" else (-180.0, 30.0)
        assert (math.degrees(limit["z"]["min"]), math.degrees(limit["z"]["max"])) == pytest.approx(
            (low, high), abs=1e-6
        )
        expected = rotation(np.array([0.0, 0.0, 1.0]), sign * math.radians(abduction))
        np.testing.assert_allclose(neutral_matrix(limit), expected, atol=2e-3)


def test_a_rest_with_limbs_pointing_up_keeps_every_range_within_a_turn() -> None:
    """Motion capture whose rest has every bone pointing up (Character Creator's export):
    the neutral hangs the legs and arms, so every range is the body's own, far short of a
    full turn (it came out past a full turn when carried into the rest's frame, which left
    the thigh free)."""
    names_by_role, spine, neck, extras = CONVENTIONS["Character Creator"]
    names, parents, heads, tails = arrays(humanoid_rows(names_by_role, spine, neck, pose="T", extras=extras))
    # Every bone pointing up from its head, as the CC skeletons in the mocap clips rest
    # (there the joints stack up too; here they stand, so the limbs run from joint to joint).
    tails = heads + np.array([0.0, 0.0, 1.0]) * np.linalg.norm(tails - heads, axis=1)[:, None]
    rest = rest_matrices(heads, tails, None)
    found = humanoid.recognize(names, parents, heads, tails, rest)
    limits = humanoid.human_limits(found, names, heads, tails, rest)
    thigh = limits[found.roles["thigh.L"]]
    assert (math.degrees(thigh["x"]["min"]), math.degrees(thigh["x"]["max"])) == pytest.approx((-30.0, 120.0))
    for name, limit in limits.items():
        for axis in "xyz":
            if limit[axis]["mode"] == "range":
                assert limit[axis]["max"] - limit[axis]["min"] <= math.radians(210.0 + 1e-6), (name, axis)
    # The thigh's neutral hangs it: the limit Y axis (along the limb: the bone's Y turned
    # by the frame, here from the tail pointing up to the knee below) points down there.
    frame = neutral_matrix({"neutral": thigh.get("frame", (1.0, 0.0, 0.0, 0.0))})
    r = frame @ rotation(np.array([0.0, 1.0, 0.0]), thigh["roll"])
    bone = names.index(found.roles["thigh.L"])
    down = rest[bone, :3, :3] @ r @ neutral_matrix(thigh) @ r.T @ frame @ np.array([0.0, 1.0, 0.0])
    assert down[2] < -0.99, down


def test_spine_segments_share_the_bend() -> None:
    """Thoracolumbar flexion 80 and extension 25 (AAOS): each of five segments may take 2/6."""
    _, _, _, _, _, found, limits = limits_for("Unreal mannequin")
    share = humanoid.column_share(5)
    assert share == pytest.approx(1 / 3)
    for role in ("spine.1", "spine.4", "chest"):
        x = limits[found.roles[role]]["x"]
        assert (math.degrees(x["min"]), math.degrees(x["max"])) == pytest.approx((-25 * share, 80 * share), abs=0.01)


def test_euler_helpers_match_blender_conventions() -> None:
    """'XYZ' applies X first (Rz Ry Rx); every order round-trips with its middle angle within
    a quarter turn."""
    rng = np.random.default_rng(5)
    angles = rng.uniform(-1.4, 1.4, (50, 3))
    rx = [rotation(np.array([1.0, 0, 0]), a) for a in angles[:, 0]]
    ry = [rotation(np.array([0, 1.0, 0]), a) for a in angles[:, 1]]
    rz = [rotation(np.array([0, 0, 1.0]), a) for a in angles[:, 2]]
    by_hand = np.array([z @ y @ x for x, y, z in zip(rx, ry, rz, strict=True)])
    np.testing.assert_allclose(humanoid.euler_to_matrices(angles, "XYZ"), by_hand, atol=1e-12)
    for order in humanoid.ORDERS:
        m = humanoid.euler_to_matrices(angles, order)
        np.testing.assert_allclose(humanoid.matrices_to_euler(m, order), angles, atol=1e-9)


def test_a_given_pose_reads_bends_the_rest_hides() -> None:
    """A straight-armed rest says nothing of where the elbow bends; a pose that bends it
    does, and the hinge is read there and carried back to rest."""
    names, parents, heads, tails, rest, found, _ = limits_for("Unity humanoid", pose="T", roll_seed=1)
    fore = names.index("LeftLowerArm")
    # Bend the left elbow 60 degrees upward: a turn about the forward axis (-Y).
    pose = rest.copy()
    turn = rotation(np.array([0.0, 1.0, 0.0]), math.radians(-60))
    for i in (i for i in range(len(names)) if _descends(parents, i, fore)):
        pose[i, :3, :3] = turn @ rest[i, :3, :3]
        pose[i, :3, 3] = heads[fore] + turn @ (heads[i] - heads[fore])
    limits = humanoid.human_limits(found, names, heads, tails, rest, pose)
    limit = limits["LeftLowerArm"]
    r = rotation(np.array([0.0, 1.0, 0.0]), limit["roll"])
    hinge = rest[fore, :3, :3] @ r @ np.array([1.0, 0.0, 0.0])
    assert abs(hinge[1]) > math.cos(math.radians(0.1)), hinge
    moved = flexed_tail(rest, heads, tails, fore, limit, 0.5) - tails[fore]
    assert moved[2] > 0.1 * np.linalg.norm(tails[fore] - heads[fore])


@pytest.mark.parametrize("bend", ["forward", "upward"])
def test_straight_hinges_read_from_the_current_pose_only_where_they_flex(bend: str) -> None:
    """Straight hinges read from the current pose (Auto): an elbow bent forward there shows
    its hinge; one bent upwards (as a solve without limits leaves a T-pose's arms) is no
    flexion, and the anatomical hinge stands (read from such a pose, flexion lifted the
    wrist and the arm missed a target in front by 0.065 of the height; QA helper)."""
    names, parents, heads, tails, rest, found, _ = limits_for("Unity humanoid", pose="T", roll_seed=1)
    fore = names.index("LeftLowerArm")
    axis = np.array([0.0, 0.0, 1.0]) if bend == "forward" else np.array([0.0, 1.0, 0.0])
    pose = rest.copy()
    turn = rotation(axis, math.radians(-60))
    for i in (i for i in range(len(names)) if _descends(parents, i, fore)):
        pose[i, :3, :3] = turn @ rest[i, :3, :3]
        pose[i, :3, 3] = heads[fore] + turn @ (heads[i] - heads[fore])
    limit = humanoid.human_limits(found, names, heads, tails, rest, pose, "hinges")["LeftLowerArm"]
    moved = flexed_tail(rest, heads, tails, fore, limit, 0.5) - tails[fore]
    length = np.linalg.norm(tails[fore] - heads[fore])
    # Flexion brings the hand forward (-Y), not up.
    assert moved[1] < -0.3 * length, moved
    assert abs(moved[2]) < 0.1 * length, moved


def _descends(parents: list[int], bone: int, ancestor: int) -> bool:
    while bone >= 0:
        if bone == ancestor:
            return True
        bone = parents[bone]
    return False


@pytest.mark.parametrize("solver", ["jacobian_dls", "tension"])
def test_a_native_solve_bends_the_knee_forward_whatever_the_roll(solver: str) -> None:
    """The native library reads the limits' roll: a foot pulled up towards the hip bends the
    knee forward (-Y) under bone rolls drawn at random."""
    names, parents, heads, tails, rest, found, limits = limits_for("Unreal mannequin", roll_seed=8)
    lengths = np.linalg.norm(tails - heads, axis=1).astype(np.float32)
    rig = tendon.Rig.from_arrays(names, parents, rest.astype(np.float32), lengths, json.dumps(limits))
    thigh, shin = names.index("thigh_l"), names.index("calf_l")
    target = tails[shin] + np.array([0.0, 0.0, 0.3])
    result = tendon.Solver(solver).solve(rig, [tendon.Goal("calf_l", tuple(target), chain_length=2)])
    world = rig.forward_kinematics(result.rotations)
    hip, knee, ankle = (
        world[thigh, :3, 3],
        world[shin, :3, 3],
        world[shin, :3, :3] @ np.array([0.0, lengths[shin], 0.0]),
    )
    ankle = ankle + knee
    assert np.linalg.norm(ankle - target) < 0.01
    line = ankle - hip
    offset = (knee - hip) - line * np.dot(knee - hip, line) / np.dot(line, line)
    assert offset[1] < -0.05, f"knee offset {offset} from the hip-ankle line"


@pytest.mark.parametrize("convention", ["Unreal mannequin", "Rigify metarig"])
@pytest.mark.parametrize("pose", ["T", "A"])
def test_bones_pointing_sideways_get_the_limits_of_bones_along_their_limbs(convention: str, pose: str) -> None:
    """Blender's FBX importer (without Automatic Bone Orientation) points the bones of a rig
    built with X along the bone sideways: the joints are where they were, each bone's X runs
    along its limb. Read from the bones' own directions, the rest T-pose fell 60-85 degrees
    outside the limits just given and a 1 cm nudge swung the arm 79 degrees (QA helper).
    The limit axes (`frame`, then the roll) and ranges are the same in the world as on the
    rig whose bones point along the limbs."""
    names_by_role, spine, neck, extras = CONVENTIONS[convention]
    names, parents, heads, tails = arrays(humanoid_rows(names_by_role, spine, neck, pose=pose, extras=extras))
    rest = rest_matrices(heads, tails)
    found = humanoid.recognize(names, parents, heads, tails, rest)
    along = humanoid.human_limits(found, names, heads, tails, rest)
    # Each bone turned a quarter about its Z: its X where its Y was; the tail sideways.
    sideways = rest.copy()
    sideways[:, :3, :3] = rest[:, :3, :3] @ rotation(np.array([0.0, 0.0, 1.0]), math.pi / 2)
    lengths = np.linalg.norm(tails - heads, axis=1)
    sideways_tails = heads + sideways[:, :3, 1] * lengths[:, None]
    found_sideways = humanoid.recognize(names, parents, heads, sideways_tails, sideways)
    assert found_sideways.roles == found.roles
    limits = humanoid.human_limits(found_sideways, names, heads, sideways_tails, sideways)
    assert set(limits) == set(along)
    for name in limits:
        if name in found.between:
            continue
        bone = names.index(name)
        mine, theirs = limits[name], along[name]
        assert "frame" not in theirs
        assert mine["order"] == theirs["order"]
        for axis in "xyz":
            assert mine[axis] == pytest.approx(theirs[axis], abs=1e-6), (name, axis)
        spin = rotation(np.array([0.0, 1.0, 0.0]), mine["roll"])
        world = sideways[bone, :3, :3] @ neutral_matrix({"neutral": mine["frame"]}) @ spin
        expected = rest[bone, :3, :3] @ rotation(np.array([0.0, 1.0, 0.0]), theirs["roll"])
        turn = world.T @ expected
        # Sideways, a bone's limb runs to its next joint; along, its own tail may point a
        # little off that (this rig's first neck bone, by 5.7 degrees).
        children = [i for i, parent in enumerate(parents) if parent == bone]
        off = 0.0
        if len(children) == 1:
            own, to_child = tails[bone] - heads[bone], heads[children[0]] - heads[bone]
            off = math.degrees(
                math.acos(np.clip(own @ to_child / np.linalg.norm(own) / np.linalg.norm(to_child), -1, 1))
            )
        assert math.degrees(math.acos(np.clip((np.trace(turn) - 1) / 2, -1, 1))) < 0.1 + off, name
        np.testing.assert_allclose(neutral_matrix(mine), neutral_matrix(theirs), atol=1e-6, err_msg=name)
