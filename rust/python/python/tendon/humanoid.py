"""Human limits in one call: recognise a humanoid's bones and give them anatomical joint limits.

Pure Python and numpy (no Blender needed)::

    from tendon import humanoid

    found = humanoid.recognize(names, parents, heads, tails)
    found.roles["shin.L"]        # 'shin.L' on a Rigify metarig, 'mixamorig:LeftLeg' on Mixamo, ...
    limits = humanoid.human_limits(found, names, heads, tails, rest_matrices)
    rig = tendon.Rig.from_arrays(names, parents, rest_matrices, lengths, json.dumps(limits))

Arrays are in armature space, in the order of `names`: `heads` and `tails` (n, 3), the rest
matrices (n, 4, 4) row-major (Blender's ``bone.matrix_local``), `parents` indices (-1 for
roots).

**Roles.** ``hips``; ``spine.1`` .. ``spine.N`` (from the hips up) and ``chest`` (the top
spine bone, where the arms hang); ``neck.1`` .. ``neck.N`` and ``head``; per side (``.L``,
``.R``) ``clavicle``, ``upper_arm``, ``forearm``, ``hand``, ``thigh``, ``shin``, ``foot``,
``toe``. Bones found by a naming convention (Rigify metarig, the generated Rigify rig's FK
controls, ORG- or DEF- bones, Mixamo/HumanIK, both cgspeed CMU BVH conventions and CMU's ASF
names, Character Creator, Unreal mannequin, VRoid/VRM, Unity humanoid, Daz, 3ds Max Biped),
else by topology (the hips are where the two legs and the spine part, the chest where the
two arms and the neck part, left and right from the rest positions).

**Limit frames.** Each joint's limits are Euler angles (in the order given) of its rotation
from a neutral standing pose, about the bone's own axes turned about its Y axis by ``roll``
(the native library's ``"roll"`` and ``"neutral"`` fields): Euler angles of
``N^-1 R^-1 q R``, R the turn about local Y by roll, N the neutral's rotation from rest in
those axes, q the bone's local pose rotation. The roll is chosen from geometry, never from
the rig's own bone roll: positive X is flexion for every joint (the thigh and upper arm swing
forward, the knee bends the heel back, the elbow brings the hand forward, the spine, neck
and head bend forward, the ankle and toes lift the toes (dorsiflexion), the clavicle rises);
Y is the twist along the bone (positive: internal rotation, pronation, the spine turning to
its left); Z is the third axis (positive: abduction for a left limb, lateral bending to the
right for the spine). Right limbs mirror the left: the same X, Y and Z mirrored.

**Rest poses that are not standing.** Anatomical ranges are measured from a neutral
standing pose (legs and arms hanging, elbows and knees straight, spine as in rest). Each
limb bone's rest direction is compared with its neutral one (thigh, shin, upper arm,
forearm and hand hang down; the foot points forward and down; the toe forward; the
clavicle sideways): the rotation between them (the smallest swing; a limb pointing
straight up is taken as raised sideways) is the neutral, and the ranges are the body's own
numbers from there, whatever the rest: a T-pose's shoulder gets abduction [-30, 180]
degrees from the hanging arm, a rig resting with every bone pointing up gets a thigh
flexion of [-30, 120] from the leg hanging down. The shoulder's box is in the order whose
outermost axis carries most of the turn from rest (abduction outermost for a rest with the
arms raised sideways). When the rest pose says
too little (motion capture whose rest has every bone pointing up, so elbows' bend planes
and the spine's curve are unknown), pass ``pose_matrices``: a pose where the character
stands (any frame of a walk): directions and bend planes are then read from that pose and
mapped back to rest through each bone's pose rotation; the spine's neutral is that pose.

**Sources** of the ranges (degrees), cited at each entry of `ANATOMY`:
AAOS values as tabulated in Norkin & White, "Measurement of Joint Motion", table A.1
(shoulder flexion 180, extension 60, abduction 180, internal rotation 70, external 90;
elbow flexion 150; pronation 80, supination 80; wrist flexion 80, extension 70, radial
deviation 20, ulnar 30); the glenohumeral and sternoclavicular appendix of "Joint Structure
and Function" (AccessPhysiotherapy, appendix 1: horizontal adduction 135, horizontal
abduction 45; clavicle elevation 45, depression 5, protraction 15, retraction 15); the
Merck Manual's "Normal Values for Range of Motion of Joints" (hip flexion 125, extension
15, abduction 45, adduction 45, rotation 45 each way; knee flexion 130; ankle plantar
flexion 50, dorsiflexion 20; inversion 35, eversion 25; toes flexion 30, extension 80);
AAOS thoracolumbar spine (flexion 80, extension 25, lateral flexion 35, rotation 45) and
cervical spine (flexion 45, extension 45, lateral flexion 45, rotation 60).
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import numpy.typing as npt

__all__ = [
    "ANATOMY",
    "CONVENTIONS",
    "Humanoid",
    "HumanoidError",
    "human_limits",
    "limb_tails",
    "recognize",
    "rotation_parts",
    "standing_rest",
]

FloatArray = npt.NDArray[np.float64]

SIDES = ("L", "R")
LIMB_ROLES = ("clavicle", "upper_arm", "forearm", "hand", "thigh", "shin", "foot", "toe")
#: Roles without which no humanoid is recognised.
ESSENTIAL = tuple(f"{role}.{side}" for role in ("thigh", "shin", "upper_arm", "forearm") for side in SIDES)


class HumanoidError(ValueError):
    """No humanoid was found, or a given role mapping is invalid (the message says which)."""


@dataclass
class Humanoid:
    """A recognised humanoid: which bone plays which role, and how that was found."""

    #: Role -> bone name (``"thigh.L"`` -> ``"mixamorig:LeftUpLeg"``).
    roles: dict[str, str]
    #: Role -> how it was found: ``"name (<convention>)"``, ``"topology"`` or ``"given"``.
    how: dict[str, str]
    #: The naming convention most roles were found by, or ``"topology"``.
    convention: str
    #: Bones between a joint and its parent joint that carry no joint of their own (a BVH
    #: file's ``LHipJoint`` or ``LeftWrist``, Character Creator's ``CC_Base_Pelvis``, a
    #: Rigify FK control's ``MCH-`` parent): locked on every axis by `human_limits`, so no
    #: solver turns them and they keep whatever rotation they have.
    between: list[str] = field(default_factory=list)
    #: Every other bone (fingers, face, twist and helper bones): left as they are.
    unrecognised: list[str] = field(default_factory=list)
    #: Remarks for the user (e.g. where limits go on a generated Rigify rig).
    notes: list[str] = field(default_factory=list)
    #: The armature's bone names and parent indices, as recognised (`human_limits` relates
    #: each joint to its parent bone and finds the fingers of a hand with them).
    names: list[str] = field(default_factory=list)
    parents: list[int] = field(default_factory=list)

    def summary(self) -> str:
        return (
            f"{len(self.roles)} joints recognised ({self.convention}), {len(self.between)} held, "
            f"{len(self.unrecognised)} bones unrecognised"
        )


# --- Naming conventions -------------------------------------------------------------------


@dataclass(frozen=True)
class Convention:
    """A naming convention: normalised names (lower case, letters and digits only) per role.

    Patterns hold ``{side}`` (the convention's long side word, ``left``/``right``) or ``{s}``
    (its one-letter side, ``l``/``r``). Spine and neck list every segment a rig of this
    convention may have, from the bottom up."""

    name: str
    roles: dict[str, tuple[str, ...]]
    #: A regular expression for a vendor prefix the names may carry (tried with and without).
    prefix: str = ""
    #: Found whenever this many of its limb names match, whatever other conventions score.
    preferred_at: int = 0


def _convention(name: str, prefix: str = "", preferred_at: int = 0, **roles: tuple[str, ...] | str) -> Convention:
    return _convention_of(name, roles, prefix, preferred_at)


def _convention_of(
    name: str, roles: Mapping[str, tuple[str, ...] | str], prefix: str = "", preferred_at: int = 0
) -> Convention:
    return Convention(
        name,
        {role: (value,) if isinstance(value, str) else value for role, value in roles.items()},
        prefix,
        preferred_at,
    )


_RIGIFY: dict[str, str | tuple[str, ...]] = {
    "hips": "spine",
    "spine": ("spine001", "spine002", "spine003"),
    "neck": ("spine004", "spine005"),
    "head": "spine006",
    "clavicle": "shoulder{s}",
    "upper_arm": "upperarm{s}",
    "forearm": "forearm{s}",
    "hand": "hand{s}",
    "thigh": "thigh{s}",
    "shin": "shin{s}",
    "foot": "foot{s}",
    "toe": "toe{s}",
}


def _prefixed(roles: Mapping[str, str | tuple[str, ...]], prefix: str) -> dict[str, str | tuple[str, ...]]:
    return {
        role: tuple(prefix + v for v in ((value,) if isinstance(value, str) else value))
        for role, value in roles.items()
    }


#: The conventions tried, best first on a tie.
CONVENTIONS: tuple[Convention, ...] = (
    # The rig Rigify generates: limits go on the FK controls, the bones an animator (and
    # Tendon) turns; the ORG and DEF bones follow them through constraints. The spine's
    # lower FK bones run against the hierarchy (spine_fk.001 is the parent of spine_fk), so
    # only the upper two take spine limits.
    _convention(
        "Rigify generated rig (FK controls)",
        preferred_at=12,
        hips="torso",
        spine=("spinefk002", "spinefk003"),
        neck="neck",
        head="head",
        clavicle="shoulder{s}",
        upper_arm="upperarmfk{s}",
        forearm="forearmfk{s}",
        hand="handfk{s}",
        thigh="thighfk{s}",
        shin="shinfk{s}",
        foot="footfk{s}",
        toe=("toefk{s}", "toe{s}"),
    ),
    _convention_of("Rigify metarig", _RIGIFY),
    _convention_of("Rigify ORG bones", _prefixed(_RIGIFY, "org")),
    _convention_of("Rigify DEF bones", _prefixed(_RIGIFY, "def")),
    _convention(
        "Mixamo / HumanIK",
        prefix=r"^(mixamorig\d*|character\d*)",
        hips="hips",
        spine=("lowerback", "spine", "spine1", "spine2", "spine3"),
        neck=("neck", "neck1", "neck2"),
        head="head",
        clavicle="{side}shoulder",
        upper_arm="{side}arm",
        forearm="{side}forearm",
        hand="{side}hand",
        thigh="{side}upleg",
        shin="{side}leg",
        foot="{side}foot",
        toe="{side}toebase",
    ),
    # cgspeed's "3ds Max friendly" CMU conversion: bones named after the joint at their head
    # (LeftHip is the thigh, LeftShoulder the upper arm, LeftElbow the forearm).
    _convention(
        "CMU BVH (cgspeed, 3ds Max names)",
        hips="hips",
        spine=("lowerback", "chest", "chest2"),
        neck=("lowerneck", "neck"),
        head="head",
        clavicle="{side}collar",
        upper_arm="{side}shoulder",
        forearm="{side}elbow",
        hand="{s}hand",
        thigh="{side}hip",
        shin="{side}knee",
        foot="{side}ankle",
        toe="{side}toe",
    ),
    _convention(
        "CMU ASF names",
        hips="root",
        spine=("lowerback", "upperback", "thorax"),
        neck=("lowerneck", "upperneck"),
        head="head",
        clavicle="{s}clavicle",
        upper_arm="{s}humerus",
        forearm="{s}radius",
        hand="{s}hand",
        thigh="{s}femur",
        shin="{s}tibia",
        foot="{s}foot",
        toe="{s}toes",
    ),
    _convention(
        "Character Creator",
        hips="ccbasehip",
        spine=("ccbasewaist", "ccbasespine01", "ccbasespine02"),
        neck=("ccbasenecktwist01", "ccbasenecktwist02"),
        head="ccbasehead",
        clavicle="ccbase{s}clavicle",
        upper_arm="ccbase{s}upperarm",
        forearm="ccbase{s}forearm",
        hand="ccbase{s}hand",
        thigh="ccbase{s}thigh",
        shin="ccbase{s}calf",
        foot="ccbase{s}foot",
        toe="ccbase{s}toebase",
    ),
    _convention(
        "Unreal mannequin",
        hips="pelvis",
        spine=("spine01", "spine02", "spine03", "spine04", "spine05"),
        neck=("neck01", "neck02"),
        head="head",
        clavicle="clavicle{s}",
        upper_arm="upperarm{s}",
        forearm="lowerarm{s}",
        hand="hand{s}",
        thigh="thigh{s}",
        shin="calf{s}",
        foot="foot{s}",
        toe="ball{s}",
    ),
    _convention(
        "VRoid / VRM",
        hips="jbipchips",
        spine=("jbipcspine", "jbipcchest", "jbipcupperchest"),
        neck="jbipcneck",
        head="jbipchead",
        clavicle="jbip{s}shoulder",
        upper_arm="jbip{s}upperarm",
        forearm="jbip{s}lowerarm",
        hand="jbip{s}hand",
        thigh="jbip{s}upperleg",
        shin="jbip{s}lowerleg",
        foot="jbip{s}foot",
        toe="jbip{s}toebase",
    ),
    _convention(
        "Unity humanoid",
        hips="hips",
        spine=("spine", "chest", "upperchest"),
        neck="neck",
        head="head",
        clavicle="{side}shoulder",
        upper_arm="{side}upperarm",
        forearm="{side}lowerarm",
        hand="{side}hand",
        thigh="{side}upperleg",
        shin="{side}lowerleg",
        foot="{side}foot",
        toe="{side}toes",
    ),
    _convention(
        "Daz",
        hips="hip",
        spine=("abdomen", "abdomenlower", "abdomenupper", "chest", "chestlower", "chestupper"),
        neck=("neck", "necklower", "neckupper"),
        head="head",
        clavicle="{s}collar",
        upper_arm=("{s}shldr", "{s}shldrbend"),
        forearm=("{s}forearm", "{s}forearmbend"),
        hand="{s}hand",
        thigh=("{s}thigh", "{s}thighbend"),
        shin="{s}shin",
        foot="{s}foot",
        toe="{s}toe",
    ),
    _convention(
        "3ds Max Biped",
        prefix=r"^bip\d*",
        hips="pelvis",
        spine=("spine", "spine1", "spine2", "spine3"),
        neck=("neck", "neck1"),
        head="head",
        clavicle="{s}clavicle",
        upper_arm="{s}upperarm",
        forearm="{s}forearm",
        hand="{s}hand",
        thigh="{s}thigh",
        shin="{s}calf",
        foot="{s}foot",
        toe="{s}toe0",
    ),
)


def normalise(name: str) -> str:
    """A bone name without namespace (``mixamorig:``, ``Armature|``), case or separators."""
    name = re.split(r"[:|]", name)[-1]
    return re.sub(r"[^a-z0-9]", "", name.lower())


def _expand(pattern: str, side: str) -> str:
    return pattern.replace("{side}", "left" if side == "L" else "right").replace("{s}", side.lower())


def _table(convention: Convention) -> dict[str, tuple[str, int]]:
    """Normalised name -> (role kind with side, segment index for spine and neck)."""
    table: dict[str, tuple[str, int]] = {}
    for role, patterns in convention.roles.items():
        for index, pattern in enumerate(patterns):
            if role in LIMB_ROLES:
                for side in SIDES:
                    table.setdefault(_expand(pattern, side), (f"{role}.{side}", 0))
            else:
                table.setdefault(pattern, (role, index))
    return table


def _by_names(names: Sequence[str], parents: Sequence[int]) -> tuple[dict[str, str], str]:
    """Roles found by the best-matching naming convention, and its name."""
    keys = [normalise(n) for n in names]
    best: tuple[int, int, dict[str, int], str] | None = None
    for rank, convention in enumerate(CONVENTIONS):
        table = _table(convention)
        found: dict[str, list[tuple[int, int]]] = {}
        for i, key in enumerate(keys):
            candidates = [key]
            if convention.prefix:
                stripped = re.sub(convention.prefix, "", key)
                if stripped != key:
                    candidates.append(stripped)
            for candidate in candidates:
                if candidate in table:
                    role, index = table[candidate]
                    found.setdefault(role, []).append((index, i))
                    break
        picked = {role: min(hits)[1] for role, hits in found.items() if role not in ("spine", "neck")}
        for kind in ("spine", "neck"):
            for index, bone in sorted(found.get(kind, [])):
                picked[f"{kind}:{index}"] = bone
        limbs = sum(1 for role in picked if role.split(".")[0] in LIMB_ROLES)
        if convention.preferred_at and limbs >= convention.preferred_at:
            return _name_roles(picked, names, parents), convention.name
        score = len(picked)
        if score and (best is None or score > best[0]):
            best = (score, -rank, picked, convention.name)
    if best is None:
        return {}, ""
    return _name_roles(best[2], names, parents), best[3]


def _depth(parents: Sequence[int], i: int) -> int:
    d = 0
    while parents[i] >= 0:
        i = parents[i]
        d += 1
    return d


def _is_ancestor(parents: Sequence[int], ancestor: int, bone: int) -> bool:
    while bone >= 0:
        if bone == ancestor:
            return True
        bone = parents[bone]
    return False


def _name_roles(picked: dict[str, int], names: Sequence[str], parents: Sequence[int]) -> dict[str, str]:
    """Final role names: spine segments ordered from the hips up (the top one is the chest),
    neck segments likewise (the head on top). Segments off the main line are dropped."""
    roles = {role: names[i] for role, i in picked.items() if ":" not in role}
    for kind in ("spine", "neck"):
        bones = [i for role, i in picked.items() if role.startswith(kind + ":")]
        bones.sort(key=lambda i: _depth(parents, i))
        line: list[int] = []
        for bone in bones:
            if not line or _is_ancestor(parents, line[-1], bone):
                line.append(bone)
        if kind == "spine" and line:
            roles["chest"] = names[line[-1]]
            line = line[:-1]
        for k, bone in enumerate(line, start=1):
            roles[f"{kind}.{k}"] = names[bone]
    return roles


# --- Topology -----------------------------------------------------------------------------


class _Tree:
    def __init__(self, parents: Sequence[int], heads: FloatArray, tails: FloatArray) -> None:
        self.parents = list(parents)
        self.n = len(self.parents)
        self.children: list[list[int]] = [[] for _ in range(self.n)]
        for i, p in enumerate(self.parents):
            if p >= 0:
                self.children[p].append(i)
        self.heads = heads
        self.tails = tails
        # Each bone's subtree as index arrays, built bottom-up once.
        order = sorted(range(self.n), key=lambda i: -_depth(self.parents, i))
        subtree: list[list[int]] = [[i] for i in range(self.n)]
        for i in order:
            for c in self.children[i]:
                subtree[i].extend(subtree[c])
        self.subtree = [np.array(s) for s in subtree]

    def far(self, bone: int, origin: FloatArray) -> float:
        """The largest distance from `origin` to a head or tail in `bone`'s subtree."""
        s = self.subtree[bone]
        points = np.concatenate([self.heads[s], self.tails[s]])
        return float(np.linalg.norm(points - origin, axis=1).max())

    def reach(self, bone: int) -> float:
        return self.far(bone, self.heads[bone])

    def main_path(self, bone: int) -> list[int]:
        """From `bone` down, at each step the child with the most bones below it, among
        equals the one that goes on most nearly along its parent: a hand's fingers, not a
        prop bone held in it that reaches further (a sword under one hand made the arms no
        mirror pair, and no humanoid was found; QA helper)."""
        path = [bone]
        while self.children[path[-1]]:
            last = path[-1]
            along = _unit(self.tails[last] - self.heads[last])

            def onward(c: int, along: FloatArray = along) -> tuple[int, float]:
                return len(self.subtree[c]), float(np.dot(_unit(self.tails[c] - self.heads[c]), along))

            path.append(max(self.children[last], key=onward))
        return path

    def profile(self, bone: int) -> list[float]:
        """The first three joint-to-joint lengths along `main_path` (a limb's shape)."""
        path = self.main_path(bone)[:4]
        return [float(np.linalg.norm(self.heads[b] - self.heads[a])) for a, b in zip(path, path[1:], strict=False)]

    def lca(self, a: int, b: int) -> int:
        ancestors = set()
        while a >= 0:
            ancestors.add(a)
            a = self.parents[a]
        while b >= 0 and b not in ancestors:
            b = self.parents[b]
        return b


def _segments(tree: _Tree, path: list[int]) -> list[float]:
    """Joint-to-joint lengths along a path (the last bone's own length): robust to the
    tails BVH importers give bones with several children."""
    out = [float(np.linalg.norm(tree.heads[path[k + 1]] - tree.heads[path[k]])) for k in range(len(path) - 1)]
    out.append(float(np.linalg.norm(tree.tails[path[-1]] - tree.heads[path[-1]])))
    return out


def _limb(tree: _Tree, root: int, end_share: float = 0.3) -> tuple[list[int], int, int | None] | None:
    """A limb from its first bone: (the long bones before its end, the end, the bone after
    the end or None). The end (hand or foot) is the first bone past two long ones whose
    subtree reaches less than `end_share` of the limb. Tiny bones (under 2% of the limb)
    never count as long."""
    path = tree.main_path(root)
    segments = _segments(tree, path)
    total = sum(segments)
    if total <= 0:
        return None
    solid = [k for k, s in enumerate(segments) if s >= 0.02 * total]
    for position, k in enumerate(solid):
        # How far the path reaches from here (not a prop bone held in the hand).
        here = tree.heads[path[k]]
        onward = np.concatenate([tree.heads[path[k:]], tree.tails[path[k:]]])
        if position >= 2 and float(np.linalg.norm(onward - here, axis=1).max()) <= end_share * total:
            after = path[k + 1] if k + 1 < len(path) else None
            return [path[j] for j in solid[:position]], path[k], after
    return None


def _by_topology(tree: _Tree, names: Sequence[str]) -> dict[str, str]:
    """Roles from the hierarchy and rest positions alone (see the module's docstring)."""
    n = tree.n
    # Mirror pairs: siblings with equal subtrees (size) and reach within 15%; or, a few
    # bones apart (a prop or socket bone held in one hand), with the same first three
    # joint-to-joint lengths within 15%.
    pairs: list[tuple[float, int, int]] = []
    for p in range(n):
        kids = tree.children[p]
        for a_i, a in enumerate(kids):
            for b in kids[a_i + 1 :]:
                ra, rb = tree.reach(a), tree.reach(b)
                if min(ra, rb) <= 0:
                    continue
                size_a, size_b = len(tree.subtree[a]), len(tree.subtree[b])
                if size_a == size_b:
                    alike = min(ra, rb) / max(ra, rb) >= 0.85
                else:
                    pa, pb = tree.profile(a), tree.profile(b)
                    alike = (
                        len(pa) == len(pb) == 3
                        and abs(size_a - size_b) <= 0.25 * max(size_a, size_b)
                        and all(min(x, y) > 0 and min(x, y) / max(x, y) >= 0.85 for x, y in zip(pa, pb, strict=True))
                    )
                if alike:
                    pairs.append((min(ra, rb), a, b))
    pairs.sort(reverse=True)
    # The legs and the arms are the two largest pairs (fingers, eyes and breasts are far
    # smaller); the legs hang nearer the root, or are the longer pair from the same bone.
    big = [pair for pair in pairs if pair[0] >= 0.3 * pairs[0][0]] if pairs else []
    if len(big) < 2:
        return {}
    first, second = big[0], big[1]
    depth = {pair: _depth(tree.parents, tree.parents[pair[1]]) for pair in (first, second)}
    legs, arms = (first, second) if depth[first] <= depth[second] else (second, first)
    if any(_is_ancestor(tree.parents, root, tree.parents[other[1]]) for root in legs[1:] for other in (arms,)):
        return {}
    if any(_is_ancestor(tree.parents, root, tree.parents[other[1]]) for root in arms[1:] for other in (legs,)):
        return {}
    chest = tree.parents[arms[1]]
    hips = tree.lca(tree.parents[legs[1]], chest)
    if hips < 0:
        return {}
    roles: dict[str, int] = {"hips": hips, "chest": chest}
    spine = []
    bone = tree.parents[chest]
    while bone >= 0 and bone != hips:
        spine.append(bone)
        bone = tree.parents[bone]
    for k, bone in enumerate(reversed(spine), start=1):
        roles[f"spine.{k}"] = bone
    # Limbs, sides still unknown: "a" and "b".
    limbs: dict[str, dict[str, int]] = {"a": {}, "b": {}}
    # The arm on the same side as leg "a" goes with it.
    up = _unit(tree.heads[chest] - tree.heads[hips])
    across = _reject(tree.heads[legs[1]] - tree.heads[legs[2]], up)
    if float(np.dot(_reject(tree.heads[arms[1]] - tree.heads[arms[2]], up), across)) < 0:
        arms = (arms[0], arms[2], arms[1])
    for key, leg, arm in (("a", legs[1], arms[1]), ("b", legs[2], arms[2])):
        found = _limb(tree, leg)
        if found and len(found[0]) >= 2:
            before, foot, toe = found
            limbs[key].update(thigh=before[-2], shin=before[-1], foot=foot)
            if toe is not None:
                limbs[key]["toe"] = toe
        found = _limb(tree, arm)
        if found and len(found[0]) >= 2:
            before, hand, _ = found
            limbs[key].update(upper_arm=before[-2], forearm=before[-1], hand=hand)
            if len(before) >= 3:
                limbs[key]["clavicle"] = before[-3]
    # Neck and head: the chest's farthest-reaching child that is not an arm.
    others = [c for c in tree.children[chest] if c not in (arms[1], arms[2])]
    if others:
        neck_root = max(others, key=lambda c: tree.far(c, tree.heads[chest]))
        path = [neck_root]
        near = 0.01 * tree.reach(neck_root)
        while tree.children[path[-1]]:
            here = tree.heads[path[-1]]
            # Bones starting at their parent's head (face rigs' roots) end the line, and so
            # do bones hanging down, 120 degrees or more from up (long hair under the head
            # took the head's role, the head a neck's; QA helper).
            onward = [
                c
                for c in tree.children[path[-1]]
                if np.linalg.norm(tree.heads[c] - here) > near
                and float(np.dot(_unit(tree.tails[c] - tree.heads[c]), up)) > -0.5
            ]
            if not onward:
                break
            path.append(max(onward, key=lambda c: tree.far(c, here)))
        top = tree.far(neck_root, tree.heads[neck_root])
        head = path[0]
        for bone in path:
            if np.linalg.norm(tree.heads[bone] - tree.heads[neck_root]) <= 0.75 * top:
                head = bone
        roles["head"] = head
        for k, bone in enumerate(path[: path.index(head)], start=1):
            roles[f"neck.{k}"] = bone
    named = {role: names[i] for role, i in roles.items()}
    sides = _assign_sides(tree, limbs, hips, chest)
    for key, side in sides.items():
        for role, bone in limbs[key].items():
            named[f"{role}.{side}"] = names[bone]
    return named


def _assign_sides(tree: _Tree, limbs: dict[str, dict[str, int]], hips: int, chest: int) -> dict[str, str]:
    """Which of the unlabelled limbs "a" and "b" is the left: its left is up x forward, and
    the character faces where its feet point, else where its knees bend, else Blender's
    front (-Y) when the rest pose shows neither (a clear cue is a fifth of the feet's
    length, or two degrees of knee bend)."""
    return _sides(tree, limbs, hips, chest)[0]


def _sides(tree: _Tree, limbs: dict[str, dict[str, int]], hips: int, chest: int) -> tuple[dict[str, str], bool]:
    """`_assign_sides`, and whether the rest pose showed a clear cue (feet or knees)."""
    up = _unit(tree.heads[chest] - tree.heads[hips])
    a, b = limbs["a"], limbs["b"]
    if "thigh" not in a or "thigh" not in b:
        return {"a": "L", "b": "R"}, False
    forward_if_a_left = np.cross(_reject(tree.heads[a["thigh"]] - tree.heads[b["thigh"]], up), up)
    feet = np.zeros(3)
    length = 0.0
    knees = np.zeros(3)
    for limb in (a, b):
        if "foot" in limb:
            foot = tree.tails[limb["foot"]] - tree.heads[limb["foot"]]
            feet += _reject(foot, up)
            length += float(np.linalg.norm(foot))
        if "shin" in limb:
            hip, knee = tree.heads[limb["thigh"]], tree.heads[limb["shin"]]
            # The foot's head: a BVH shin's tail may sit between its children.
            ankle = tree.heads[limb["foot"]] if "foot" in limb else tree.tails[limb["shin"]]
            line = _unit(ankle - hip)
            off = _reject(_reject(knee - hip, line), up)
            if np.linalg.norm(off) >= math.sin(math.radians(2.0)) * np.linalg.norm(knee - hip):
                knees += off
    clear = True
    if np.linalg.norm(feet) >= 0.2 * length > 0:
        cue = feet
    elif np.linalg.norm(knees) > 0:
        cue = knees
    else:
        cue, clear = np.array([0.0, -1.0, 0.0]), False
    sides = {"a": "L", "b": "R"} if float(np.dot(cue, forward_if_a_left)) >= 0 else {"a": "R", "b": "L"}
    return sides, clear


def _named_sides_swapped(roles: dict[str, str], names: Sequence[str], tree: _Tree) -> bool:
    """Whether bones named for the character's left stand on its right, as the feet or
    knees tell (a mirror applied to a rig: named rigs' sides were never checked, and with
    the limits mirrored the knees bent backwards, the status saying reached; QA helper)."""
    index = {name: i for i, name in enumerate(names)}
    if "hips" not in roles or not ({"chest", "head"} & roles.keys()):
        return False
    limbs = {
        key: {part: index[roles[f"{part}.{side}"]] for part in ("thigh", "shin", "foot") if f"{part}.{side}" in roles}
        for key, side in (("a", "L"), ("b", "R"))
    }
    top = index[roles.get("chest", roles.get("head", ""))]
    sides, clear = _sides(tree, limbs, index[roles["hips"]], top)
    return clear and sides["a"] == "R"


# --- Recognition --------------------------------------------------------------------------


#: Parent role of each role: where a between-bone search stops.
def _parent_role(role: str, roles: dict[str, str]) -> str | None:
    base, _, side = role.partition(".")
    limb_parent = {
        "thigh": "hips",
        "shin": "thigh",
        "foot": "shin",
        "toe": "foot",
        "clavicle": "chest",
        "upper_arm": "clavicle",
        "forearm": "upper_arm",
        "hand": "forearm",
    }
    if base in limb_parent:
        parent = limb_parent[base]
        if parent in ("hips", "chest"):
            return parent
        if parent == "clavicle" and f"clavicle.{side}" not in roles:
            return "chest"
        return f"{parent}.{side}"
    spine = sorted((r for r in roles if r.startswith("spine.")), key=lambda r: int(r.split(".")[1]))
    neck = sorted((r for r in roles if r.startswith("neck.")), key=lambda r: int(r.split(".")[1]))
    column = ["hips", *spine, "chest", *neck, "head"]
    if role in column and column.index(role) > 0:
        return column[column.index(role) - 1]
    return None


def _between(roles: dict[str, str], names: Sequence[str], parents: Sequence[int]) -> list[str]:
    """The bone on the way from a joint up to its parent joint, when there is exactly one
    that is no joint itself (a BVH hip or wrist bone, an FK control's MCH parent)."""
    index = {name: i for i, name in enumerate(names)}
    role_bones = set(roles.values())
    found: list[str] = []
    for role, bone in roles.items():
        parent_role = _parent_role(role, roles)
        if parent_role is None or parent_role not in roles:
            continue
        target = index[roles[parent_role]]
        walk: list[str] = []
        i = parents[index[bone]]
        while i >= 0 and i != target and len(walk) <= 1:
            if names[i] not in role_bones:
                walk.append(names[i])
            i = parents[i]
        if i == target and len(walk) == 1:
            found.extend(w for w in walk if w not in found)
    return found


def recognize(
    names: Sequence[str],
    parents: Sequence[int],
    heads: npt.ArrayLike,
    tails: npt.ArrayLike,
    rest_matrices: npt.ArrayLike | None = None,
    overrides: dict[str, str] | None = None,
) -> Humanoid:
    """Recognises a humanoid's bones (see the module's docstring): by the naming convention
    that matches most bones, then by topology for the essential roles names missed.

    `overrides` (role -> bone name, ``""`` to drop a role) correct what was found: a role
    mapping shown to the user and edited comes back here. Raises `HumanoidError` when no
    humanoid is found (no two legs and two arms), naming what is missing, and when an
    override names a bone that does not exist or gives one bone two roles."""
    names = list(names)
    n = len(names)
    if n == 0:
        raise HumanoidError("No humanoid found: the armature has no bones")
    if len(parents) != n:
        raise HumanoidError(f"{len(parents)} parents for {n} bones")
    for i, p in enumerate(parents):
        if not -1 <= int(p) < n or int(p) == i:
            raise HumanoidError(f"Bone '{names[i]}' has parent index {p}, not -1 or another bone's index")
    head_array = _points(heads, n, "heads")
    tail_array = _points(tails, n, "tails")
    del rest_matrices  # Recognition needs positions only; the argument mirrors human_limits.
    roles, convention = _by_names(names, parents)
    how = {role: f"name ({convention})" for role in roles}
    if any(role not in roles for role in ESSENTIAL):
        found = _by_topology(_Tree(parents, head_array, tail_array), names)
        used = set(roles.values())
        for role, bone in found.items():
            if role not in roles and bone not in used:
                roles[role] = bone
                how[role] = "topology"
                used.add(bone)
        if not convention or sum(h == "topology" for h in how.values()) > len(how) / 2:
            convention = "topology"
    if all(role in roles for role in ESSENTIAL) and _misplaced_limbs(roles, how, names, parents):
        # Names that put the limbs on the wrong trunk bone (a rig named like Rigify's metarig,
        # whose `spine` is the hips, with a `hips` bone of its own above it): the bones' tree
        # decides, when it finds a humanoid whose limbs hang where they should.
        found = _by_topology(_Tree(parents, head_array, tail_array), names)
        by_tree = {role: "topology" for role in found}
        if all(role in found for role in ESSENTIAL) and not _misplaced_limbs(found, by_tree, names, parents):
            roles, how, convention = dict(found), by_tree, "topology"
    notes = []
    if all(role in roles for role in ESSENTIAL) and _named_sides_swapped(
        roles, names, _Tree(parents, head_array, tail_array)
    ):
        roles = {_other_side(role): bone for role, bone in roles.items()}
        how = {_other_side(role): found for role, found in how.items()}
        notes.append(
            "Bones named for the character's left stand on its right (a mirror applied?): their sides are "
            "taken from where the feet and knees point"
        )
    for role, bone in (overrides or {}).items():
        if not bone:
            roles.pop(role, None)
            how.pop(role, None)
            continue
        if bone not in names:
            raise HumanoidError(f"Role {role}: no bone '{bone}' in this armature")
        roles[role] = bone
        how[role] = "given"
    seen: dict[str, str] = {}
    for role, bone in roles.items():
        if bone in seen:
            raise HumanoidError(f"Bone '{bone}' has two roles, {seen[bone]} and {role}")
        seen[bone] = role
    missing = [role for role in ESSENTIAL if role not in roles]
    if missing:
        raise HumanoidError(
            "No humanoid found: no bones for " + ", ".join(missing) + " (by the names of "
            f"{len(CONVENTIONS)} conventions or by topology: two legs and a spine from the hips, "
            "two arms and a neck from the chest)"
        )
    misplaced = _misplaced_limbs(roles, how, names, parents)
    if misplaced:
        raise HumanoidError(
            f"No humanoid found: {misplaced}, so the names fit another creature (the Rigify "
            "metarigs of four-legged animals reuse the human names)"
        )
    if convention.startswith("Rigify generated"):
        notes.append(
            "Generated Rigify rig: limits go on the FK controls (IK/FK switch at 1, FK), which the "
            "deforming ORG and DEF bones follow through constraints"
        )
    between = _between(roles, names, parents)
    taken = set(roles.values()) | set(between)
    unrecognised = [name for name in names if name not in taken]
    return Humanoid(roles, how, convention, between, unrecognised, notes, names, [int(p) for p in parents])


def _other_side(role: str) -> str:
    """``"thigh.L"`` -> ``"thigh.R"``; a role without a side as it is."""
    base, dot, side = role.partition(".")
    return f"{base}.{'R' if side == 'L' else 'L'}" if dot and side in SIDES else role


def _rigify_base(name: str) -> str:
    """A Rigify bone's name without its layer prefix (``DEF-``, ``ORG-``, ``MCH-``)."""
    for prefix in ("DEF-", "ORG-", "MCH-"):
        if name.startswith(prefix):
            return name[len(prefix) :]
    return name


def _misplaced_limbs(roles: dict[str, str], how: dict[str, str], names: Sequence[str], parents: Sequence[int]) -> str:
    """The first limb, if any, that does not hang from its trunk bone (thighs from the hips,
    upper arms from the chest), said in words; roles given by hand are taken as they are."""
    index = {name: i for i, name in enumerate(names)}

    def above(bone: int, ancestor: int) -> bool:
        # Or under its Rigify twin: an FBX export of deforming bones only hangs the DEF-
        # thighs from ORG-spine, not DEF-spine (the names were dropped for the bones' tree,
        # which took a breast bone for the head and bent the knees backwards; QA helper).
        twin = _rigify_base(names[ancestor])
        while bone >= 0 and bone != ancestor and _rigify_base(names[bone]) != twin:
            bone = int(parents[bone])
        return bone >= 0

    for limb, trunk in (("thigh", "hips"), ("upper_arm", "chest")):
        for side in SIDES:
            role = f"{limb}.{side}"
            if trunk not in roles or how.get(role) == "given" or how.get(trunk) == "given":
                continue
            if not above(index[roles[role]], index[roles[trunk]]):
                return f"{role} '{roles[role]}' does not hang from the {trunk} '{roles[trunk]}'"
    return ""


#: How far (degrees) a leg may point from straight down along the spine for the body to
#: count as upright: a crouch stays well inside; a four-legged animal's legs stand square
#: to its spine (Rigify's horse 95 degrees, cat 72).
UPRIGHT_DEGREES = 60.0


def upright(humanoid: Humanoid, heads: npt.ArrayLike, tails: npt.ArrayLike) -> bool:
    """Whether both legs (hip to ankle) hang within `UPRIGHT_DEGREES` of straight down
    against the spine's up (hips to the chest's or head's tail) in these positions (rest,
    or a pose's). A humanoid is upright in its rest pose or in a pose of it standing; a
    four-legged rig whose bone names fit a humanoid's is in neither."""
    n = len(humanoid.names)
    head_array, tail_array = _points(heads, n, "heads"), _points(tails, n, "tails")
    index = {name: i for i, name in enumerate(humanoid.names)}
    roles = {role: index[bone] for role, bone in humanoid.roles.items()}
    top = roles.get("chest", roles.get("head"))
    base = roles.get("hips", humanoid.parents[roles["thigh.L"]])
    if top is None or base < 0:
        return True
    up = _unit(tail_array[top] - head_array[base])
    for side in SIDES:
        leg = _unit(tail_array[roles[f"shin.{side}"]] - head_array[roles[f"thigh.{side}"]])
        if not leg.any() or _angle(leg, -up) > UPRIGHT_DEGREES:
            return False
    return bool(up.any())


def standing_rest(humanoid: Humanoid, heads: npt.ArrayLike, tails: npt.ArrayLike) -> bool:
    """Whether the rest pose stands: thighs and shins within 45 degrees of straight down
    (against the spine's up). Motion capture often rests otherwise (Character Creator BVH
    files rest with every bone pointing up); pass a standing pose to `human_limits` then."""
    n = len(humanoid.names)
    head_array, tail_array = _points(heads, n, "heads"), _points(tails, n, "tails")
    index = {name: i for i, name in enumerate(humanoid.names)}
    roles = {role: index[bone] for role, bone in humanoid.roles.items()}
    top, base = roles.get("chest", roles.get("head")), roles.get("hips")
    if top is None or base is None:
        return True
    up = _unit(tail_array[top] - head_array[base])
    for role in ("thigh.L", "thigh.R", "shin.L", "shin.R"):
        if role in roles:
            bone = roles[role]
            if _angle(_unit(tail_array[bone] - head_array[bone]), -up) > 45.0:
                return False
    return True


def _points(values: npt.ArrayLike, n: int, what: str) -> FloatArray:
    array = np.asarray(values, dtype=np.float64)
    if array.shape != (n, 3):
        raise HumanoidError(f"{what} must be ({n}, 3), not {array.shape}")
    if not np.isfinite(array).all():
        raise HumanoidError(f"{what} hold non-finite numbers")
    return array


# --- Rotations ----------------------------------------------------------------------------

_AXIS = {"X": 0, "Y": 1, "Z": 2}
ORDERS = ("XYZ", "XZY", "YXZ", "YZX", "ZXY", "ZYX")


def _unit(v: FloatArray) -> FloatArray:
    norm = float(np.linalg.norm(v))
    return v / norm if norm > 1e-12 else np.zeros(3)


def _reject(v: FloatArray, axis: FloatArray) -> FloatArray:
    """`v` without its component along unit `axis`."""
    return v - float(np.dot(v, axis)) * axis


def _axis_angle(axis: FloatArray, angle: float) -> FloatArray:
    x, y, z = _unit(axis)
    c, s = math.cos(angle), math.sin(angle)
    t = 1.0 - c
    return np.array(
        [
            [t * x * x + c, t * x * y - s * z, t * x * z + s * y],
            [t * x * y + s * z, t * y * y + c, t * y * z - s * x],
            [t * x * z - s * y, t * y * z + s * x, t * z * z + c],
        ]
    )


def _swing(frm: FloatArray, to: FloatArray, fallback: FloatArray) -> FloatArray:
    """The smallest rotation taking unit `frm` to unit `to`; half a turn about `fallback`
    (made perpendicular to `frm`) when they are opposite."""
    axis = np.cross(frm, to)
    s, c = float(np.linalg.norm(axis)), float(np.dot(frm, to))
    if s < 1e-9:
        if c > 0:
            return np.eye(3)
        other = _reject(fallback, frm)
        if np.linalg.norm(other) < 1e-9:
            other = _reject(np.array([1.0, 0.0, 0.0]) if abs(frm[0]) < 0.9 else np.array([0.0, 1.0, 0.0]), frm)
        return _axis_angle(other, math.pi)
    return _axis_angle(axis, math.atan2(s, c))


def _elementary(axis: int, angles: FloatArray) -> FloatArray:
    """Rotation matrices (k, 3, 3) about one axis."""
    c, s = np.cos(angles), np.sin(angles)
    m = np.zeros((len(angles), 3, 3))
    i, j = [(1, 2), (2, 0), (0, 1)][axis]
    m[:, axis, axis] = 1.0
    m[:, i, i] = c
    m[:, j, j] = c
    m[:, i, j] = -s
    m[:, j, i] = s
    return m


def euler_to_matrices(angles: FloatArray, order: str) -> FloatArray:
    """Rotation matrices from Euler angles (k, 3) stored by axis [x, y, z]; `order` names
    the axes in the order they apply (Blender's 'XYZ' is Rz @ Ry @ Rx)."""
    angles = np.atleast_2d(angles)
    m = np.broadcast_to(np.eye(3), (len(angles), 3, 3)).copy()
    for letter in order:
        a = _AXIS[letter]
        m = _elementary(a, angles[:, a]) @ m
    return m


def matrices_to_euler(m: FloatArray, order: str) -> FloatArray:
    """Euler angles [x, y, z] (k, 3) of rotation matrices in `order`, the middle angle in
    [-pi/2, pi/2]."""
    i, j, k = (_AXIS[letter] for letter in order)
    parity = 1.0 if (i, j, k) in ((0, 1, 2), (1, 2, 0), (2, 0, 1)) else -1.0
    m = np.atleast_3d(m).reshape(-1, 3, 3)
    middle = np.arcsin(np.clip(-parity * m[:, k, i], -1.0, 1.0))
    first = np.arctan2(parity * m[:, k, j], m[:, k, k])
    last = np.arctan2(parity * m[:, j, i], m[:, i, i])
    # At the gimbal lock the first and last angles combine: put it all in the first.
    locked = np.abs(m[:, k, i]) > 1.0 - 1e-9
    if locked.any():
        first[locked] = np.arctan2(-parity * m[locked, j, k], m[locked, j, j])
        last[locked] = 0.0
    out = np.empty((len(m), 3))
    out[:, i], out[:, j], out[:, k] = first, middle, last
    return out


def _covering_arc(angles: FloatArray) -> tuple[float, float]:
    """The shortest interval (on the circle, centred in (-pi, pi]) holding every angle."""
    a = np.sort(np.mod(angles, 2 * math.pi))
    gaps = np.diff(np.concatenate([a, [a[0] + 2 * math.pi]]))
    g = int(np.argmax(gaps))
    start = a[(g + 1) % len(a)]
    width = 2 * math.pi - float(gaps[g])
    centre = start + width / 2
    shift = 2 * math.pi * round(centre / (2 * math.pi))
    return float(start - shift), float(start - shift + width)


# --- Anatomy ------------------------------------------------------------------------------


@dataclass(frozen=True)
class Joint:
    """A joint's human range for a left limb (degrees; right limbs mirror Y and Z), in
    Euler order YZX (twist first, flexion last): x flexion, y twist, z the third axis; and
    the tension's rigidity per axis for negative and positive angles."""

    x: tuple[float, float]
    y: tuple[float, float]
    z: tuple[float, float]
    rigidity: tuple[tuple[float, float], tuple[float, float], tuple[float, float]]
    #: The Euler order the range is a box in (axes in the order they apply).
    order: str = "YZX"


#: Per role: the range about each axis (see `Joint`) and its sources. Spine and neck are
#: the whole column's range, shared out among its segments (see `column_share`).
ANATOMY: dict[str, Joint] = {
    # Hip (Merck: flexion 125; AAOS: extension 30, adduction 30; abduction 45, rotation 45
    # each way). z: abduction positive; y: internal rotation positive.
    "thigh": Joint((-30, 120), (-45, 45), (-30, 45), ((1.5, 0.5), (2.0, 2.0), (1.5, 1.0))),
    # Knee (AAOS 0-135), a one-way hinge: flexion only; the tibia's small axial rotation
    # (10 degrees each way with the knee bent) and no side bend.
    "shin": Joint((0, 135), (-10, 10), (-5, 5), ((5.0, 0.3), (3.0, 3.0), (5.0, 5.0))),
    # Ankle, the foot turned out 15 degrees from the knee's facing (see _neutral) (Merck:
    # plantar flexion 50; dorsiflexion 35, the weight-bearing lunge test's
    # normal 30-40 rather than the 20 of the foot lifted off the ground; inversion 35,
    # eversion 25 about the foot's long axis, +y eversion for a left foot; the forefoot's
    # ab/adduction about 15).
    "foot": Joint((-50, 35), (-35, 25), (-15, 15), ((0.8, 1.2), (1.5, 1.5), (2.0, 2.0))),
    # Toes (Merck: flexion 30, extension 80; x positive lifts the toes).
    "toe": Joint((-30, 80), (-5, 5), (-10, 10), ((1.5, 1.5), (3.0, 3.0), (3.0, 3.0))),
    # Sternoclavicular joint (elevation 45, depression 5, protraction and retraction 15;
    # +z retraction for a left clavicle) and its rotation about the clavicle's length.
    "clavicle": Joint((-5, 45), (-30, 30), (-15, 15), ((3.0, 2.0), (3.0, 3.0), (2.0, 2.0))),
    # Shoulder (AAOS: flexion 180, extension 60, internal rotation 70, external 90;
    # adduction across the trunk 30). Abduction stops short of the horizontal (85): there
    # the twist and flexion axes meet (gimbal lock), and an Euler box cannot hold both a
    # full flexion and a full abduction; higher arms rise by flexing.
    "upper_arm": Joint((-60, 180), (-90, 70), (-30, 85), ((1.5, 0.5), (2.0, 2.0), (1.5, 0.7))),
    # Elbow (AAOS: flexion 150, extension 0), a one-way hinge; the forearm's pronation
    # (+y for a left arm) and supination, 80 each (AAOS).
    "forearm": Joint((0, 150), (-80, 80), (-5, 5), ((5.0, 0.3), (1.0, 1.0), (5.0, 5.0))),
    # Wrist (AAOS: flexion 80, extension 70, ulnar deviation 30, radial 20), as symmetric
    # ranges (75 and 25) since which side is the palm is not in the geometry. The twist is
    # half the forearm's pronation: many rigs (and motion capture) turn the hand for it.
    "hand": Joint((-75, 75), (-40, 40), (-25, 25), ((1.0, 1.0), (2.0, 2.0), (1.5, 1.5))),
    # Thoracolumbar spine (AAOS: flexion 80, extension 25, lateral flexion 35 each side,
    # rotation 45 each side), shared among the spine segments and the chest.
    "spine": Joint((-25, 80), (-45, 45), (-35, 35), ((3.0, 2.0), (3.0, 3.0), (3.0, 3.0))),
    # Cervical spine (AAOS: flexion 45, extension 45, lateral flexion 45, rotation 60),
    # shared among the neck segments and the head.
    "neck": Joint((-45, 45), (-60, 60), (-45, 45), ((1.5, 1.5), (1.5, 1.5), (2.0, 2.0))),
}

#: The shoulder as a box in order YXZ: abduction outermost (to 180), flexion in the middle
#: (to 85). No Euler box holds both a full flexion and a full abduction; this one is used
#: when the rest's arm is raised sideways (a T- or A-pose), whose abduction is then exactly
#: a shift of the outer angle, and the arm reaches forward and up the other way round.
RAISED_ARM = Joint((-60, 85), (-90, 70), (-30, 180), ((1.5, 0.5), (2.0, 2.0), (1.5, 0.7)), order="YXZ")


def column_share(segments: int) -> float:
    """The share of the whole spine's (or neck's) range each of its `segments` bones may
    take: up to half of it with three segments (two thirds with two, all with one, 2/(n+1)
    in general), so a bend spreads over the column but can gather where people bend most,
    as motion capture shows (the CMU actors' upper neck alone turns 40 degrees)."""
    return min(1.0, 2.0 / (segments + 1))


def _range(joint: Joint, mirrored: bool, share: float) -> list[tuple[float, float]]:
    out = []
    for axis, (low, high) in zip("xyz", (joint.x, joint.y, joint.z), strict=True):
        low, high = math.radians(low * share), math.radians(high * share)
        if mirrored and axis != "x":
            low, high = -high, -low
        out.append((low, high))
    return out


# --- Human limits -------------------------------------------------------------------------


@dataclass
class _Frame:
    up: FloatArray
    forward: FloatArray
    left: FloatArray


def _character_frame(roles: dict[str, int], heads: FloatArray, tails: FloatArray) -> _Frame:
    """Up against the legs (hip to ankle, both legs summed so a splay cancels), or from the
    hips to the chest when the legs point elsewhere (a rest with the legs up); left from the
    right thigh (or arm) to the left one; forward = left x up."""
    top = roles.get("chest", roles.get("head"))
    base = roles.get("hips")
    if top is not None and base is not None and np.linalg.norm(tails[top] - heads[base]) > 1e-9:
        up = _unit(tails[top] - heads[base])
    else:
        up = np.array([0.0, 0.0, 1.0])
    legs = np.zeros(3)
    for side in SIDES:
        thigh, shin = roles.get(f"thigh.{side}"), roles.get(f"shin.{side}")
        if thigh is not None and shin is not None:
            legs += heads[thigh] - tails[shin]
    if np.linalg.norm(legs) > 1e-9 and float(np.dot(_unit(legs), up)) >= math.cos(math.radians(30.0)):
        up = _unit(legs)
    across = np.zeros(3)
    for role in ("thigh", "upper_arm", "clavicle"):
        if f"{role}.L" in roles and f"{role}.R" in roles:
            across = _reject(heads[roles[f"{role}.L"]] - heads[roles[f"{role}.R"]], up)
            if np.linalg.norm(across) > 1e-9:
                break
    if np.linalg.norm(across) <= 1e-9:
        across = _reject(np.array([1.0, 0.0, 0.0]), up)
    left = _unit(across)
    return _Frame(up, _unit(np.cross(left, up)), left)


def _role_parts(role: str) -> tuple[str, str]:
    base, _, side = role.partition(".")
    return base, side


@dataclass
class _Geometry:
    """Where the bones are in the pose directions are read from (rest or given), and at rest."""

    heads: FloatArray
    tails: FloatArray
    rest_heads: FloatArray
    rest_tails: FloatArray
    frame: _Frame
    rest_frame: _Frame
    parents: list[int]
    #: Heads, tails and rest-to-pose rotations of a pose read for hinges only, or None.
    hinge_pose: tuple[FloatArray, FloatArray, FloatArray] | None = None
    #: Whether `heads` and `tails` are a given pose's (else the rest's, whose bends are a
    #: shape the rig was built in rather than a flexion).
    posed: bool = False

    def direction(self, bone: int) -> FloatArray:
        return _unit(self.tails[bone] - self.heads[bone])

    def rest_direction(self, bone: int) -> FloatArray:
        return _unit(self.rest_tails[bone] - self.rest_heads[bone])


#: A bone's tail this far (degrees) off the direction to the next joint of its limb or
#: column points elsewhere (an FBX import's sideways bone), not along the limb.
SIDEWAYS = 30.0


def _next_joints(roles: Mapping[str, int]) -> dict[str, str]:
    """Each role's next joint along its limb or the column, where the rig has it."""
    column = ["hips", *(f"spine.{k}" for k in range(1, 10)), "chest", *(f"neck.{k}" for k in range(1, 10)), "head"]
    present = [role for role in column if role in roles]
    following = dict(zip(present, present[1:], strict=False))
    for side in SIDES:
        limbs = (("clavicle", "upper_arm", "forearm", "hand"), ("thigh", "shin", "foot", "toe"))
        for limb in limbs:
            parts = [f"{part}.{side}" for part in limb if f"{part}.{side}" in roles]
            following.update(zip(parts, parts[1:], strict=False))
    return following


def limb_tails(
    humanoid: Humanoid, heads: npt.ArrayLike, tails: npt.ArrayLike, rest_matrices: npt.ArrayLike
) -> FloatArray:
    """The tails to read limb and column directions from: each bone's own, except a role
    bone whose tail points more than 30 degrees off its next joint (Blender's FBX importer,
    without Automatic Bone Orientation, points the bones of rigs built with X along the
    bone sideways: their directions made the rest T-pose fall 60-85 degrees outside the
    limits Human Limits gave it, and a 1 cm nudge swung the arm 79 degrees; QA helper):
    its tail is then the next joint's head. A last bone of a limb or the column (hand,
    head, toe) takes the turn its parent needed, in the parent's axes (such rigs point
    every bone the same wrong way in its own axes)."""
    names = humanoid.names
    n = len(names)
    head_array, tail_array = _points(heads, n, "heads"), _points(tails, n, "tails")
    rest = np.asarray(rest_matrices, dtype=np.float64)
    if rest.shape not in ((n, 4, 4), (n, 3, 3)) or not np.isfinite(rest).all():
        raise HumanoidError(f"rest_matrices must be finite and ({n}, 4, 4), not {rest.shape}")
    rest_rot = _orthonormal(rest[:, :3, :3])
    index = {name: i for i, name in enumerate(names)}
    roles = {role: index[bone] for role, bone in humanoid.roles.items()}
    out = tail_array.copy()
    along: dict[int, FloatArray] = {}
    following = _next_joints(roles)
    for role, bone in roles.items():
        after = following.get(role)
        if after is None:
            continue
        to_next = head_array[roles[after]] - head_array[bone]
        own = tail_array[bone] - head_array[bone]
        if np.linalg.norm(to_next) <= 1e-9 or np.linalg.norm(own) <= 1e-9:
            continue
        if _angle(_unit(to_next), _unit(own)) > SIDEWAYS:
            out[bone] = head_array[roles[after]]
            along[bone] = rest_rot[bone].T @ _unit(to_next)
    for role, bone in roles.items():
        parent = humanoid.parents[bone]
        if role in following or bone in along or parent not in along:
            continue
        length = float(np.linalg.norm(tail_array[bone] - head_array[bone]))
        out[bone] = head_array[bone] + rest_rot[bone] @ along[parent] * length
    return out


def human_limits(
    humanoid: Humanoid,
    names: Sequence[str],
    heads: npt.ArrayLike,
    tails: npt.ArrayLike,
    rest_matrices: npt.ArrayLike,
    pose_matrices: npt.ArrayLike | None = None,
    pose_for: str = "all",
) -> dict[str, dict[str, Any]]:
    """Anatomical limits per recognised bone, in the native library's JSON form (bone name ->
    ``{"order", "x", "y", "z", "tension", "roll", "neutral"}``, angles in radians, the
    neutral a quaternion ``[w, x, y, z]`` left out when it is rest), ready for
    ``json.dumps`` and ``tendon.Rig.from_arrays(..., limits=...)``. Bones between joints
    (`Humanoid.between`) are locked on every axis, which solvers read as "leave it as it
    is": a BVH file's wrist bone carries the clip's wrist turn (held at rest, 35 degrees of
    hand on a CMU clip were thrown away); the hips bone gets none.

    The arrays are the ones `recognize` was given (same bones, same order);
    `rest_matrices` (n, 4, 4) row-major armature-space rest matrices. `pose_matrices`
    (optional, same form, Blender's ``pose_bone.matrix``): with `pose_for` ``"all"``,
    directions and bends are read from that pose instead of rest (see the module's
    docstring); with ``"hinges"``, everything comes from rest except the hinge of a knee or
    elbow bent in the pose by 10 degrees or more and at least 5 more than in rest: its
    axis is read from the pose. A rest bend (3 degrees or more) gives the hinge only when
    it lies within 45 degrees of the anatomical one (an A-pose forearm drooping across the
    body is a shape, not a flexion)."""
    if pose_for not in ("all", "hinges"):
        raise HumanoidError(f"pose_for must be 'all' or 'hinges', not {pose_for!r}")
    names = list(names)
    n = len(names)
    if names != humanoid.names:
        raise HumanoidError("human_limits needs the bones recognize was given, in the same order")
    parents = humanoid.parents
    index = {name: i for i, name in enumerate(names)}
    head_rest = _points(heads, n, "heads")
    tail_rest = _points(tails, n, "tails")
    rest = np.asarray(rest_matrices, dtype=np.float64)
    if rest.shape not in ((n, 4, 4), (n, 3, 3)) or not np.isfinite(rest).all():
        raise HumanoidError(f"rest_matrices must be finite and ({n}, 4, 4), not {rest.shape}")
    rest_rot = _orthonormal(rest[:, :3, :3])
    # Directions along the limbs, whatever way the rig's bones point (see `limb_tails`).
    tail_rest = limb_tails(humanoid, head_rest, tail_rest, rest)
    if pose_matrices is None:
        pose_rot = np.broadcast_to(np.eye(3), (n, 3, 3))
        head_geo, tail_geo = head_rest, tail_rest
    else:
        pose = np.asarray(pose_matrices, dtype=np.float64)
        if pose.shape != (n, 4, 4) or not np.isfinite(pose).all():
            raise HumanoidError(f"pose_matrices must be finite and ({n}, 4, 4), not {pose.shape}")
        posed = _orthonormal(pose[:, :3, :3])
        pose_rot = posed @ np.transpose(rest_rot, (0, 2, 1))
        head_geo = pose[:, :3, 3]
        tail_geo = head_geo + np.einsum("nij,nj->ni", pose_rot, tail_rest - head_rest)
    hinge_pose = None
    if pose_for == "hinges" and pose_matrices is not None:
        hinge_pose = (head_geo, tail_geo, pose_rot)
        pose_rot = np.broadcast_to(np.eye(3), (n, 3, 3))
        head_geo, tail_geo = head_rest, tail_rest
        pose_matrices = None
    roles = {role: index[bone] for role, bone in humanoid.roles.items()}
    frame = _character_frame(roles, head_geo, tail_geo)
    rest_frame = _character_frame(roles, head_rest, tail_rest)
    geometry = _Geometry(
        head_geo, tail_geo, head_rest, tail_rest, frame, rest_frame, parents, hinge_pose, pose_matrices is not None
    )

    # Parents first: each bone's turn from where it is (rest or pose) to where it is in the
    # neutral standing pose, and each joint's flexion axis there.
    role_of = {bone: role for role, bone in roles.items()}
    to_neutral: list[FloatArray] = [np.eye(3)] * n
    flexion: dict[int, FloatArray] = {}
    for bone in sorted(range(n), key=lambda i: _depth(parents, i)):
        carry = to_neutral[parents[bone]] if parents[bone] >= 0 else np.eye(3)
        role = role_of.get(bone)
        if role is None or role == "hips":
            to_neutral[bone] = carry
            if role == "hips":
                flexion[bone] = frame.left
            continue
        to_neutral[bone], flexion[bone] = _neutral(role, bone, roles, geometry, carry, flexion)

    spine_count = 1 + sum(1 for r in roles if r.startswith("spine."))
    neck_count = 1 + sum(1 for r in roles if r.startswith("neck."))
    limits: dict[str, dict[str, Any]] = {}
    for role, bone in roles.items():
        base, side = _role_parts(role)
        if base == "hips":
            continue
        if base in ("spine", "chest"):
            joint, share = ANATOMY["spine"], column_share(spine_count)
        elif base in ("neck", "head"):
            joint, share = ANATOMY["neck"], column_share(neck_count)
        else:
            joint, share = ANATOMY[base], 1.0
        parent = parents[bone]
        t_bone = to_neutral[bone] @ pose_rot[bone]
        t_parent = to_neutral[parent] @ pose_rot[parent] if parent >= 0 else np.eye(3)
        # The limit frame at rest (world columns X, Y, Z): Y along the limb (the bone's own
        # Y, or the turn `to_limb` takes it there for a bone pointing elsewhere), and the
        # neutral flexion axis carried back to rest is X, reached by a roll about that Y.
        along = rest_rot[bone].T @ geometry.rest_direction(bone)
        to_limb = (
            np.eye(3)
            if _angle(along, np.array([0.0, 1.0, 0.0])) < 0.01
            else _swing(np.array([0.0, 1.0, 0.0]), along, np.array([1.0, 0.0, 0.0]))
        )
        x_local = to_limb.T @ rest_rot[bone].T @ t_bone.T @ flexion[bone]
        roll = math.atan2(-x_local[2], x_local[0])
        frame_rest = rest_rot[bone] @ to_limb @ _axis_angle(np.array([0.0, 1.0, 0.0]), roll)
        # The neutral pose's rotation from rest, in the limit frame.
        offset = frame_rest.T @ t_parent.T @ t_bone @ frame_rest
        variants = (joint, RAISED_ARM) if base == "upper_arm" else (joint,)
        joint = _box_order(variants, offset)
        box = _range(joint, side == "R", share)
        limits[names[bone]] = _limits_json(box, joint, side == "R", roll, offset, to_limb)
    for name in humanoid.between:
        limits[name] = {"order": "XYZ", "x": {"mode": "locked"}, "y": {"mode": "locked"}, "z": {"mode": "locked"}}
    return limits


def rotation_parts(matrices: npt.ArrayLike) -> FloatArray:
    """The rotations of (n, 3, 3) matrices without their scale (polar decomposition)."""
    return _orthonormal(np.asarray(matrices, dtype=np.float64))


def _orthonormal(m: FloatArray) -> FloatArray:
    """Rotation parts without scale (polar decomposition by SVD)."""
    u, _, vt = np.linalg.svd(m)
    r = u @ vt
    flip = np.linalg.det(r) < 0
    if flip.any():
        u[flip, :, 2] *= -1
        r = u @ vt
    return np.asarray(r, dtype=np.float64)


def _angle(a: FloatArray, b: FloatArray) -> float:
    return math.degrees(math.acos(float(np.clip(np.dot(a, b), -1.0, 1.0))))


def _neutral(
    role: str, bone: int, roles: dict[str, int], geometry: _Geometry, carry: FloatArray, flexion: dict[int, FloatArray]
) -> tuple[FloatArray, FloatArray]:
    """The world rotation from the bone's place (rest or pose) to its neutral one, and its
    flexion axis there. `carry` is the parent's: the bone first moves with its parent (its
    own joint unchanged), then its joint straightens to the neutral direction by the
    smallest swing (half a turn about forward when opposite: raised sideways)."""
    base, side = _role_parts(role)
    frame = geometry.frame
    up, forward = frame.up, frame.forward
    out = frame.left if side != "R" else -frame.left
    d = carry @ geometry.direction(bone)
    if base in ("spine", "chest", "neck", "head"):
        # The column's neutral is its rest curve, unless a segment points far from up (a
        # rest pose that is not standing): from 30 degrees off up it leans towards up, up
        # itself from 60 (all or nothing at 60 made a cliff). A pose given to stand in is
        # the neutral curve as it is: a clip's 5 cm waist, an offset pointing 66 degrees
        # forward in its standing frame, read as that much flexion lay 38 degrees outside
        # its limits on every frame, and a 2 cm nudge of the head turned it 26 (QA
        # helper). (The neck's and head's bones point anywhere a rig likes, a head bone
        # towards the face: their rest is their neutral, up to the 60 degrees.)
        tilt = _angle(d, up)
        if geometry.posed and base in ("spine", "chest"):
            share = 0.0
        elif base in ("spine", "chest"):
            share = min(max((tilt - 30.0) / 30.0, 0.0), 1.0)
        else:
            share = float(tilt > 60.0)
        axis = np.cross(d, up)
        if share >= 1.0:
            n = up
        elif share > 0.0 and np.linalg.norm(axis) > 1e-9:
            n = _unit(_axis_angle(_unit(axis), math.radians(tilt) * share) @ d)
        else:
            n = d
        motion = forward
    elif base == "clavicle":
        n, motion = (d if _angle(d, out) <= 45.0 else out), up
    elif base in ("foot", "toe"):
        # Turned out from where the knee faces as in rest (see _foot_turn), else forward;
        # the foot tilted down by its own angle to the shin (see _foot_tilt).
        shin = roles.get(f"shin.{side}")
        heading = forward
        if shin is not None and shin in flexion:
            facing = _unit(np.cross(-up, flexion[shin]))
            torsion = _foot_turn(bone, side, roles, geometry)
            heading = _unit(math.cos(torsion) * facing + math.sin(torsion) * _unit(_reject(out, facing)))
        tilt = _foot_tilt(bone, side, roles, geometry) if base == "foot" else 0.0
        n, motion = math.cos(tilt) * heading - math.sin(tilt) * up, up
    elif base == "shin":
        n, motion = -up, -forward
    elif base == "hand":
        # A wrist bent in rest (or in the pose) is taken as its neutral: a hand bone's
        # direction depends on where the rig puts its tail (between the fingers and thumb).
        n, motion = (d if _angle(d, -up) <= 45.0 else -up), forward
    else:  # thigh, upper_arm, forearm
        n, motion = -up, forward
    turn = _swing(d, n, forward) @ carry
    x = _unit(np.cross(n, _unit(_reject(motion, n))))
    if base in ("shin", "forearm"):
        upper = roles.get(f"{'thigh' if base == 'shin' else 'upper_arm'}.{side}")
        if upper is not None:
            bend = np.cross(geometry.direction(upper), geometry.direction(bone))
            posed_bend = geometry.posed
            if geometry.hinge_pose is not None:
                # A bend in the given pose, carried back by the bone's turn, when it bends
                # clearly more than the rest does (a flexion, not the rest's shape again): a
                # slight rest bend shows its plane poorly.
                heads, tails, turns = geometry.hinge_pose
                posed = np.cross(_unit(tails[upper] - heads[upper]), _unit(tails[bone] - heads[bone]))
                rest_bend = float(np.linalg.norm(bend))
                if np.linalg.norm(posed) >= max(math.sin(math.radians(10.0)), rest_bend + math.sin(math.radians(5.0))):
                    bend = turns[bone].T @ posed
            # A bend of 3 degrees or more shows the hinge: flexion continues it (the other
            # way when it bends clearly against the character's forward: a hyperextended
            # rest). A rest's bend, or one read from the current pose for straight hinges
            # (Auto), only when it lies within 45 degrees of the anatomical hinge: an elbow
            # drooping or bent across the body in an A- or T-pose rest (a shape, not a
            # flexion) put the hinge 90 degrees off, the elbow flexing into the body, and
            # the pose an unlimited solve had left, elbows bent upwards, made "flexion" lift
            # the wrist (QA helper). The bend of a pose given for everything (the user's
            # reference) is a flexion whatever its plane.
            if np.linalg.norm(bend) >= math.sin(math.radians(3.0)):
                hinge = _unit(_reject(turn @ _unit(bend), n))
                if posed_bend or abs(float(np.dot(hinge, x))) >= math.cos(math.radians(45.0)):
                    x = hinge if float(np.dot(hinge, x)) > -math.cos(math.radians(45.0)) else -hinge
    elif base == "hand":
        knuckles = _knuckle_line(bone, geometry)
        if knuckles is not None:
            line = _unit(_reject(turn @ knuckles, n))
            if np.linalg.norm(line) > 0.5:
                # Its sign from the flexion axis; across it (where that says nothing and
                # rounding chose: the same rig with its bones pointing elsewhere got the
                # wrist's axes half a turn apart, and the right hand's did not mirror the
                # left's), the palm faces the body and flexion takes the hand inwards.
                inwards = np.cross(up, out)
                sign = next((d for d in (float(np.dot(line, ref)) for ref in (x, inwards)) if abs(d) > 1e-6), 0.0)
                x = line if sign >= 0 else -line
    return turn, x


def _foot_turn(bone: int, side: str, roles: dict[str, int], geometry: _Geometry) -> float:
    """How far the foot turns out from where the knee faces: the rest's angle when it is
    plausible (35 degrees either way or less), else the tibia's normal external torsion
    (the thigh-foot angle, 10 to 20 degrees in adults: 15)."""
    shin, thigh = roles.get(f"shin.{side}"), roles.get(f"thigh.{side}")
    if shin is not None and thigh is not None:
        down = geometry.rest_direction(shin)
        heading = _reject(geometry.rest_direction(bone), down)
        bend = np.cross(geometry.rest_direction(thigh), down)
        if np.linalg.norm(bend) >= math.sin(math.radians(3.0)):
            hinge = _unit(bend)
        else:
            hinge = _unit(_reject(geometry.rest_frame.left, down))
        if float(np.dot(hinge, geometry.rest_frame.left)) < 0:
            hinge = -hinge
        facing = _unit(np.cross(down, hinge))
        if np.linalg.norm(heading) >= 0.3 and np.linalg.norm(facing) > 0.5:
            heading = _unit(heading)
            # Positive turns towards the character's left about up (against the shin).
            turn = math.degrees(
                math.atan2(float(np.dot(np.cross(facing, heading), -down)), float(np.dot(facing, heading)))
            )
            outward = turn if side != "R" else -turn
            if abs(outward) <= 35.0:
                return math.radians(outward)
    return math.radians(15.0)


def _foot_tilt(bone: int, side: str, roles: dict[str, int], geometry: _Geometry) -> float:
    """How far below a right angle to the shin the foot points: the rest's angle when it is
    plausible (0 to 50 degrees), else 20 degrees (a pose's ankle angle is a pose, not the
    neutral)."""
    shin = roles.get(f"shin.{side}")
    if shin is not None:
        beyond = 90.0 - _angle(geometry.rest_direction(shin), geometry.rest_direction(bone))
        if 0.0 <= beyond <= 50.0:
            return math.radians(beyond)
    return math.radians(20.0)


def _knuckle_line(bone: int, geometry: _Geometry) -> FloatArray | None:
    """Across the hand: the main direction of its children's heads (the finger roots, three
    or more), perpendicular to the hand; None without fingers."""
    children = [i for i, p in enumerate(geometry.parents) if p == bone]
    if len(children) < 3:
        return None
    d = geometry.direction(bone)
    points = np.array([_reject(geometry.heads[c] - geometry.heads[bone], d) for c in children])
    _, s, vt = np.linalg.svd(points - points.mean(axis=0))
    return _unit(vt[0]) if s[0] > 1e-9 else None


def _rotation_angle(m: FloatArray) -> float:
    return math.acos(float(np.clip((np.trace(m) - 1.0) / 2.0, -1.0, 1.0)))


def _box_order(joints: Sequence[Joint], offset: FloatArray) -> Joint:
    """Which of `joints` (the same range as boxes in different Euler orders) to use, given
    `offset`, the neutral pose's rotation from rest in the limit frame: the order whose
    outermost axis carries most of it (abduction outermost for an arm raised sideways in
    rest), since no Euler box holds both a full flexion and a full abduction."""
    best: tuple[float, Joint] | None = None
    for joint in joints:
        outer = _AXIS[joint.order[2]]
        shift = float(matrices_to_euler(offset[None], joint.order)[0][outer])
        turn = np.zeros(3)
        turn[outer] = -shift
        left = _rotation_angle(euler_to_matrices(turn[None], joint.order)[0] @ offset)
        # A later order must carry at least a degree more to be preferred.
        if best is None or left < best[0] - math.radians(1.0):
            best = (left, joint)
    assert best is not None
    return best[1]


def _quaternion(m: FloatArray) -> list[float]:
    """A rotation matrix as a unit quaternion [w, x, y, z] (w >= 0)."""
    w2, x2, y2, z2 = (
        1.0 + m[0, 0] + m[1, 1] + m[2, 2],
        1.0 + m[0, 0] - m[1, 1] - m[2, 2],
        1.0 - m[0, 0] + m[1, 1] - m[2, 2],
        1.0 - m[0, 0] - m[1, 1] + m[2, 2],
    )
    # From the largest diagonal term, which is far from zero (Shepperd's choice).
    largest = int(np.argmax([w2, x2, y2, z2]))
    if largest == 0:
        w = math.sqrt(w2) / 2
        q = [w, (m[2, 1] - m[1, 2]) / (4 * w), (m[0, 2] - m[2, 0]) / (4 * w), (m[1, 0] - m[0, 1]) / (4 * w)]
    elif largest == 1:
        x = math.sqrt(x2) / 2
        q = [(m[2, 1] - m[1, 2]) / (4 * x), x, (m[0, 1] + m[1, 0]) / (4 * x), (m[0, 2] + m[2, 0]) / (4 * x)]
    elif largest == 2:
        y = math.sqrt(y2) / 2
        q = [(m[0, 2] - m[2, 0]) / (4 * y), (m[0, 1] + m[1, 0]) / (4 * y), y, (m[1, 2] + m[2, 1]) / (4 * y)]
    else:
        z = math.sqrt(z2) / 2
        q = [(m[1, 0] - m[0, 1]) / (4 * z), (m[0, 2] + m[2, 0]) / (4 * z), (m[1, 2] + m[2, 1]) / (4 * z), z]
    unit = np.asarray(q, dtype=np.float64)
    unit /= np.linalg.norm(unit)
    return [float(v) for v in (unit if unit[0] >= 0 else -unit)]


def _limits_json(
    box: list[tuple[float, float]],
    joint: Joint,
    mirrored: bool,
    roll: float,
    neutral: FloatArray,
    frame: FloatArray,
) -> dict[str, Any]:
    out: dict[str, Any] = {"order": joint.order}
    tension = []
    for a, axis in enumerate("xyz"):
        low, high = box[a]
        out[axis] = {"mode": "range", "min": low, "max": high}
        negative, positive = joint.rigidity[a]
        if mirrored and axis != "x":
            negative, positive = positive, negative
        # The ranges hold the neutral (zero): each side's wall at its bound.
        sides = {
            "negative": {"threshold": max(-low, 0.05), "rigidity": negative},
            "positive": {"threshold": max(high, 0.05), "rigidity": positive},
        }
        tension.append(sides)
    out["tension"] = tension
    out["roll"] = roll
    if _rotation_angle(frame) > 1e-6:
        out["frame"] = _quaternion(frame)
    if _rotation_angle(neutral) > 1e-6:
        out["neutral"] = _quaternion(neutral)
    return out
