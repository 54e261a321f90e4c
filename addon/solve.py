"""One solve at the current frame: the effectors as native goals, the refusals, one native
solve, the bulk write, and the outcome measured in the pose Blender evaluates.

Per solve only what may have changed is read: the effectors' settings, the targets' and
the armature's world matrices, the pose (``matrix_basis`` and Blender's evaluated
``matrix``, in bulk) and the muting and influence of the chains' constraints
(``chains.py``). The rig, its limits, which bones carry constraints or drivers, their
inheritance options and what the effectors' settings imply come from the rig cache
(``rig.py``). After a solve in which every checked effector became a goal, a `Shortcut`
on the rig keeps the goals' chains, the bones they move and how to measure them: while
the effectors' settings stay the same, a solve reads only the targets and the pose, makes
one native call for the start pose and one for the solve, and writes in bulk.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass, field
from typing import Any, NamedTuple

import bpy
import numpy as np
from mathutils import Euler, Matrix, Quaternion, Vector

from . import chains, keys, native, pose, space
from .native import TendonUserError
from .rig import RigEntry, forget, read_rig

#: Rotations closer than this (per quaternion component) count as unchanged.
UNCHANGED = 1e-7

#: Blender evaluates the pose in float32 along another path than Tendon's: a solved point
#: lands a few 1e-7 of its chain's length from where Tendon put it. Measured in Blender's
#: pose, an effector counts as reached within the solver's tolerance plus this much of its
#: chain's length...
MEASURE_SLACK = 2e-6
#: ...and this much of its target's distance from the armature's origin: five float32
#: steps there (a fingertip 1.5 m up, on its target to 5e-7, was "not reached" against
#: 2.5e-7 of its 2 cm chain; QA helper). (2e-6, seventeen steps, said a finger 1 km from
#: the origin reached 1.5 mm off; regression pass.)
POSITION_NOISE = 6e-7
#: The largest angle (radians) between an effector bone and a rotation target it must meet
#: that counts as met in Blender's pose: the solvers' own tolerance (1e-4) and as much
#: again for Blender's evaluation in single precision.
ROTATION_TOLERANCE = 2e-4


def armature_problem(obj: bpy.types.Object | None, need_pose_mode: bool = True) -> str | None:
    """Why Tendon cannot pose `obj`, or None when it can."""
    if obj is None:
        return "No active object: select an armature"
    if obj.type != "ARMATURE":
        return f"Active object '{obj.name}' is not an armature"
    if obj.library is not None:
        return f"Armature '{obj.name}' is linked from '{obj.library.filepath}': make a library override to pose it"
    if need_pose_mode and obj.mode != "POSE":
        return f"Armature '{obj.name}' is not in Pose Mode"
    if not obj.data.bones:
        return f"Armature '{obj.name}' has no bones"
    return None


def rest_position_problem(obj: bpy.types.Object) -> str | None:
    """Why nothing solved would show: the armature displays its rest position (Blender
    evaluates every bone at rest, so a solve, live mode or a bake would measure and key
    the rest, not the pose)."""
    if obj.data.pose_position == "REST":
        return (
            f"Armature '{obj.name}' shows its Rest Position: switch it to Pose Position "
            "(Armature properties) to solve or bake"
        )
    return None


def chain_bones(entry: RigEntry, bone: int, chain_length: int) -> list[int]:
    """The effector bone and the ancestors its chain may turn (chain length 0: to the root).
    Worked out once per rig: do not change the list."""
    return entry.chain(bone, chain_length)


# --- Goals --------------------------------------------------------------------------------


class Effector(NamedTuple):
    """What a solve reads of one enabled effector, in one go: the checks that depend on
    nothing else are made once per rig and these settings (`GoalPlan`)."""

    bone: str
    target: Any
    subtarget: str
    chain_length: int
    weight: float
    use_tail: bool
    use_rotation: bool
    rotation_weight: float
    pole_target: Any
    pole_subtarget: str
    pole_angle: float
    use_scale: bool


def read_effectors(obj: bpy.types.Object) -> tuple[Effector | None, ...]:
    """The armature's effectors (None for a disabled one), as the solve needs them: a
    setting that only counts with another (the rotation weight without a rotation target,
    the pole's bone and angle without a pole target) is not read (live mode reads these on
    every update)."""
    found: list[Effector | None] = []
    for e in obj.tendon.effectors:
        if not e.enabled:
            found.append(None)
            continue
        use_rotation, pole_target = e.use_rotation, e.pole_target
        posed = pole_target is not None
        found.append(
            Effector(
                e.bone,
                e.target,
                e.subtarget,
                e.chain_length,
                e.weight,
                e.use_tail,
                use_rotation,
                e.rotation_weight if use_rotation else 0.0,
                pole_target,
                e.pole_subtarget if posed else "",
                e.pole_angle if posed else 0.0,
                e.use_scale,
            )
        )
    return tuple(found)


@dataclass
class GoalSet:
    """The goals of an armature's enabled, valid effectors, and what was skipped and why."""

    goals: list[Any] = field(default_factory=list)
    #: Index into the armature's effector collection of each goal.
    effectors: list[int] = field(default_factory=list)
    #: The settings of each goal's effector.
    settings: list[Effector] = field(default_factory=list)
    #: The (bone index, chain length) of each goal.
    chains: list[tuple[int, int]] = field(default_factory=list)
    #: Each goal's target, armature space (goals, 3).
    points: np.ndarray = field(default_factory=lambda: np.zeros((0, 3), np.float32))
    warnings: list[str] = field(default_factory=list)
    #: The checked effector of each goal.
    sighted: list[Any] = field(default_factory=list)
    #: The plan the goals came from (`GoalPlan`).
    plan: Any = None
    #: What the goals follow from (the effectors' settings and which of them became goals),
    #: under which a rig remembers what it works out from them. Changed by `keep`.
    key: Any = None

    @property
    def use_tail(self) -> list[bool]:
        """Whether each goal's effector point is its bone's tail (else its head)."""
        return [bool(settings.use_tail) for settings in self.settings]

    def keep(self, kept: list[int]) -> None:
        """Keeps only the goals at positions `kept`."""
        self.goals = [self.goals[k] for k in kept]
        self.sighted = [self.sighted[k] for k in kept]
        self.effectors = [self.effectors[k] for k in kept]
        self.settings = [self.settings[k] for k in kept]
        self.chains = [self.chains[k] for k in kept]
        self.points = self.points[kept]
        self.key = (self.key, tuple(kept))


def effector_label(position: int, bone: str) -> str:
    return f"effector {position + 1} ('{bone}')" if bone else f"effector {position + 1} (no bone set)"


@dataclass
class Sighted:
    """An effector that passed the checks."""

    position: int
    settings: Effector
    label: str
    bone: int
    chain_length: int
    #: Whether the goal has a rotation target.
    rotating: bool


@dataclass
class GoalPlan:
    """The effectors that pass the checks which depend only on the rig and the effectors'
    settings, and the warnings those checks gave (worked out once per rig and settings)."""

    sighted: list[Sighted]
    warnings: list[str]
    #: The names this plan relies on: the bones the sighted effectors' chains hold, and the
    #: effector bones it found missing. Renaming a bone tells the rig cache nothing
    #: reliably, so each solve checks these few names are (or are still not) in the pose.
    present: list[str]
    missing: list[str]

    def stale(self, obj: bpy.types.Object) -> bool:
        """Whether a bone this plan relies on was renamed since."""
        pose_bones = obj.pose.bones
        return not all(name in pose_bones for name in self.present) or any(name in pose_bones for name in self.missing)


def unevaluated_and_moving(target: bpy.types.Object) -> bool:
    """Whether `target` is left out of Blender's evaluation (hidden in the viewport, or in
    an excluded collection, with nothing depending on it) while a parent, constraint or
    animation could move it: its world matrix is then where it last was (a bake read a
    parented target frozen at one frame and said every frame reached, 0.6 off in
    playback; QA helper). A target nothing moves stays where it was set."""
    # Shown, or hidden with H (still evaluated): evaluated. Else evaluated only if shown
    # somewhere, as a collection hidden with its eye (an evaluated copy of a target left
    # out stays behind, where it last was, so `is_evaluated` does not tell).
    if target.visible_get() or target.hide_get():
        return False
    depsgraph = bpy.context.evaluated_depsgraph_get()
    shown = {instance.object.original for instance in depsgraph.object_instances}
    if target in shown:
        return False
    # Left out of the view, still evaluated when a shown object depends on it (a mesh its
    # armature deforms, a constraint, a child, a modifier: refused as hidden, a hand that
    # followed such a rig's animated bone stayed 30 cm off; regression pass).
    if any(depends_on(other, target) for other in shown | {o for o in bpy.data.objects if o.hide_get()}):
        return False
    above: bpy.types.Object | None = target
    while above is not None:
        anim = above.animation_data
        animated = anim is not None and (anim.action is not None or len(anim.drivers) or len(anim.nla_tracks))
        if animated or len(above.constraints) or (above is not target and above.type == "ARMATURE"):
            return True
        if above.parent is None:
            return False
        above = above.parent
    return False


def depends_on(obj: bpy.types.Object, target: bpy.types.Object) -> bool:
    """Whether evaluating `obj` needs `target`: its parent, a constraint's or modifier's
    object, or a driver's."""
    if obj == target:
        return False
    if obj.parent == target:
        return True
    for constraint in obj.constraints:
        targets = [getattr(constraint, "target", None), *(t.target for t in getattr(constraint, "targets", ()))]
        if target in targets:
            return True
    if any(getattr(modifier, "object", None) == target for modifier in getattr(obj, "modifiers", ())):
        return True
    anim = obj.animation_data
    return anim is not None and any(
        t.id == target for driver in anim.drivers for variable in driver.driver.variables for t in variable.targets
    )


def sight_effector(
    obj: bpy.types.Object, entry: RigEntry, position: int, effector: Effector, warnings: list[str]
) -> Sighted:
    """One effector checked; raises TendonUserError naming what is wrong."""
    label = effector_label(position, effector.bone)
    if not effector.bone:
        raise TendonUserError(f"{label} has no bone")
    bone = entry.index.get(effector.bone)
    if bone is None:
        raise TendonUserError(f"{label}: armature '{obj.name}' has no bone '{effector.bone}' (renamed or deleted?)")
    if effector.target is None:
        raise TendonUserError(f"{label} has no target object")
    for target, subtarget, role in (
        (effector.target, effector.subtarget, "target"),
        (effector.pole_target, effector.pole_subtarget, "pole target"),
    ):
        if target is None:
            continue
        # Deleting an object in the viewport leaves it in the file while something points
        # at it, in no scene, where it is never evaluated again.
        if not target.users_scene:
            raise TendonUserError(f"{label}: {role} '{target.name}' is in no scene (deleted?)")
        if unevaluated_and_moving(target):
            raise TendonUserError(
                f"{label}: {role} '{target.name}' is hidden in the viewport (its monitor icon) or in an excluded "
                "collection, so Blender does not evaluate it, and where its parent, constraints or animation put it "
                "cannot be read; show it (H hides it and keeps it evaluated)"
            )
        if target == obj and not subtarget:
            raise TendonUserError(
                f"{label}: the {role} is armature '{obj.name}' itself, whose origin moves with it: "
                "set a Target Bone, or pick another object"
            )
    for name, value, used in (
        ("weight", effector.weight, True),
        ("rotation weight", effector.rotation_weight, effector.use_rotation),
        ("pole angle", effector.pole_angle, effector.pole_target is not None),
    ):
        if used and not math.isfinite(value):
            raise TendonUserError(f"{label}: its {name} is {value}: give it a number")
    if effector.weight <= 0.0:
        # Counted for nothing, it was solved by no step and the status blamed "something
        # Tendon does not model" for the miss (QA helper).
        raise TendonUserError(f"{label} has weight 0, so it counts for nothing: give it a weight, or disable it")
    depth = len(chain_bones(entry, bone, 0))
    chain_length = effector.chain_length
    if chain_length > depth:
        warnings.append(
            f"{label}: chain length {chain_length} is longer than the {depth} bones up to the root; using {depth}"
        )
        chain_length = 0
    if effector.use_tail and entry.length(bone) <= 1e-5 * entry.longest:
        warnings.append(f"{label}: bone '{effector.bone}' has (almost) zero length, so its tail is its head")
    # A target bone that is missing is named now (the lookup raises); renaming or deleting a
    # bone makes the rig cache, and with it this plan, forget.
    space.target_world_matrix(effector.target, effector.subtarget, label)
    if effector.pole_target is not None:
        space.target_world_matrix(effector.pole_target, effector.pole_subtarget, label)
    rotating = bool(effector.use_rotation and effector.rotation_weight > 0.0)
    return Sighted(position, effector, label, bone, chain_length, rotating)


def plan_goals(obj: bpy.types.Object, entry: RigEntry, effectors: tuple[Effector | None, ...]) -> GoalPlan:
    warnings: list[str] = []
    sighted = []
    missing = []
    for position, effector in enumerate(effectors):
        if effector is None:
            continue
        try:
            sighted.append(sight_effector(obj, entry, position, effector, warnings))
        except TendonUserError as problem:
            warnings.append(f"{problem}; skipped")
            if effector.bone and effector.bone not in entry.index:
                missing.append(effector.bone)
    present = sorted({entry.names[bone] for s in sighted for bone in chain_bones(entry, s.bone, s.chain_length)})
    return GoalPlan(sighted, warnings, present, missing)


def target_matrix(s: Sighted, world: space.WorldTargets | None, pole: bool = False) -> Matrix:
    """The world matrix of effector `s`'s target (or pole target): from `world` when it was
    read there, else read now."""
    found = world.get(s.position) if world else None
    matrix = found[int(pole)] if found is not None and len(found) > int(pole) else None
    if matrix is not None:
        return matrix
    effector = s.settings
    if pole:
        return space.target_world_matrix(effector.pole_target, effector.pole_subtarget, s.label)
    return space.target_world_matrix(effector.target, effector.subtarget, s.label)


def goal_targets(
    obj: bpy.types.Object, sighted: list[Sighted], world: space.WorldTargets | None = None
) -> space.Targets:
    """The sighted effectors' targets (points, and rotations and poles where they have them)
    in armature space, for one frame (`world`: the targets' world matrices when already
    read)."""
    if not any(s.rotating or s.settings.pole_target is not None for s in sighted):
        # Points alone (the usual case): a few matrix products, cheaper than numpy's calls.
        to_armature = space.world_to_armature(obj)
        points = [x for s in sighted for x in to_armature @ target_matrix(s, world).translation]
        return space.Targets(np.array(points, np.float32).reshape(1, len(sighted), 3), None, None)
    to_armature = space.world_to_armature_array(obj)[None]
    matrices = []
    for s in sighted:
        target = target_matrix(s, world)
        pole = None
        if s.settings.pole_target is not None:
            pole = tuple(target_matrix(s, world, pole=True).translation)
        matrices.append((target, pole))
    rotating = any(s.rotating for s in sighted)
    poles = any(pole is not None for _, pole in matrices)
    # Flat lists into arrays: numpy reads a flat list of floats far faster than vectors.
    count = len(matrices)
    return space.armature_targets(
        to_armature,
        np.array([x for target, _ in matrices for x in target.translation], np.float64).reshape(1, count, 3),
        np.array([x for target, _ in matrices for row in target.to_3x3() for x in row], np.float64).reshape(
            1, count, 3, 3
        )
        if rotating
        else None,
        np.array([x for _, pole in matrices for x in (pole or (0.0, 0.0, 0.0))], np.float64).reshape(1, count, 3)
        if poles
        else None,
    )


#: Farthest a target or pole may lie from the armature's origin: distances to it stay finite
#: in single precision. Blender keeps a location typed as infinity as the largest float
#: (3.4e38), whose distance to the chain overflowed ("largest error inf"; a QA helper).
MAX_TARGET_DISTANCE = 1e18


def first_too_far(targets: space.Targets, goal: int | None = None) -> tuple[str, int, int] | None:
    """The first target or pole (of goal `goal` only, if given) too far to measure, as
    (what, frame index, goal index), or None."""
    for what, points in (("target", targets.points), ("pole target", targets.poles)):
        if points is None:
            continue
        # NaN compares false: not finite is another refusal's.
        far = np.argwhere(
            np.abs(points if goal is None else points[:, goal : goal + 1]).max(axis=2) > MAX_TARGET_DISTANCE
        )
        if len(far):
            return what, int(far[0][0]), goal if goal is not None else int(far[0][1])
    return None


def too_far(label: str, what: str, point: np.ndarray) -> str:
    """Why the effector `label`'s `what` at `point` (armature space) is refused."""
    where = ", ".join(f"{value:.3g}" for value in point)
    return (
        f"{label}: its {what} lies at ({where}) in the armature's space, "
        f"too far to measure (at most {MAX_TARGET_DISTANCE:g})"
    )


def native_goal(s: Sighted, targets: space.Targets, k: int) -> Any:
    """Goal `k`'s native Goal; a target or pole too far to measure is refused by name."""
    far = first_too_far(targets, k)
    if far is not None:
        what, t, _ = far
        raise TendonUserError(too_far(s.label, what, (targets.points if what == "target" else targets.poles)[t, k]))
    return native.native().Goal(s.settings.bone, targets.points[0, k], **goal_arguments(s, targets, k))


def goal_arguments(s: Sighted, targets: space.Targets, k: int) -> dict[str, Any]:
    """The keyword arguments of goal `k`'s native Goal, but its target point."""
    effector = s.settings
    arguments: dict[str, Any] = {
        "weight": effector.weight,
        "chain_length": s.chain_length,
        "point": "tail" if effector.use_tail else "head",
    }
    if s.rotating:
        arguments["rotation"] = targets.rotations[0, k]
        arguments["rotation_weight"] = effector.rotation_weight
    if effector.pole_target is not None:
        arguments["pole"] = targets.poles[0, k]
        arguments["pole_angle"] = effector.pole_angle
    return arguments


def build_goals(
    obj: bpy.types.Object, entry: RigEntry, effectors: tuple[Effector | None, ...] | None = None
) -> GoalSet:
    """Goals in armature space from the enabled effectors; invalid ones are skipped with a
    warning naming them. Per solve only the settings and the targets' matrices are read."""
    tendon = native.native()
    if effectors is None:
        effectors = read_effectors(obj)
    plan = entry.remember(("goals", effectors), lambda: plan_goals(obj, entry, effectors))
    if plan.stale(obj):
        raise pose.StaleRig
    found = GoalSet(warnings=list(plan.warnings), plan=plan)
    if not plan.sighted:
        return found
    readable = list(range(len(plan.sighted)))
    try:
        targets = goal_targets(obj, plan.sighted)
    except TendonUserError:
        # A target gone since the plan was made (a bone of another armature renamed, with
        # nothing yet telling the rig cache): skip that effector, solve the others.
        readable = []
        for k, s in enumerate(plan.sighted):
            try:
                target_matrix(s, None)
                if s.settings.pole_target is not None:
                    target_matrix(s, None, pole=True)
            except TendonUserError as problem:
                found.warnings.append(f"{problem}; skipped")
                continue
            readable.append(k)
        targets = goal_targets(obj, [plan.sighted[k] for k in readable])
    kept, rows = [], []
    for row, k in enumerate(readable):
        s = plan.sighted[k]
        effector = s.settings
        try:
            goal = native_goal(s, targets, row)
        except tendon.TendonError as error:
            found.warnings.append(f"{s.label}: {error}; skipped")
            continue
        except TendonUserError as problem:
            found.warnings.append(f"{problem}; skipped")
            continue
        kept.append(k)
        rows.append(row)
        found.sighted.append(s)
        found.goals.append(goal)
        found.effectors.append(s.position)
        found.settings.append(effector)
        found.chains.append((s.bone, s.chain_length))
    found.points = targets.points[0, rows]
    found.key = (effectors, tuple(kept))
    loops = entry.remember(("loops", found.key), lambda: loop_problems(obj, entry, found))
    if loops:
        found.warnings += [warning for _, warning in loops]
        dropped = {k for k, _ in loops}
        found.keep([k for k in range(len(found.goals)) if k not in dropped])
    return found


#: A generated Rigify rig's limb controls, by name prefix: the bone holding their limb's
#: IK/FK switch (the custom property "IK_FK": 0 shows the IK chain, 1 the FK controls) and
#: the switch's value where the deforming bones follow these controls.
RIGIFY_SWITCHES = {
    "upper_arm_fk": ("upper_arm_parent", 1.0),
    "forearm_fk": ("upper_arm_parent", 1.0),
    "hand_fk": ("upper_arm_parent", 1.0),
    "thigh_fk": ("thigh_parent", 1.0),
    "shin_fk": ("thigh_parent", 1.0),
    "foot_fk": ("thigh_parent", 1.0),
    "upper_arm_ik": ("upper_arm_parent", 0.0),
    "hand_ik": ("upper_arm_parent", 0.0),
    "thigh_ik": ("thigh_parent", 0.0),
    "foot_ik": ("thigh_parent", 0.0),
    "toe_ik": ("thigh_parent", 0.0),
}


def rigify_switch(obj: bpy.types.Object, bone: str) -> tuple[bpy.types.PoseBone, float, float] | None:
    """For an effector on a generated Rigify rig's limb control: the pose bone holding its
    limb's IK/FK switch, the switch's value now and the value that shows the control."""
    prefix, dot, side = bone.partition(".")
    holder, shown = RIGIFY_SWITCHES.get(prefix, (None, 0.0))
    switch = obj.pose.bones.get(f"{holder}.{side}") if holder and dot else None
    value = switch.get("IK_FK") if switch is not None else None
    if not isinstance(value, (int, float)):
        return None
    return switch, float(value), shown


def switch_advice(shown: float, aside: str = "") -> str:
    """What a switch away from `shown` does, `aside` (said before the fix), and the fix."""
    if shown >= 1.0:
        return f"the deforming bones follow the IK chain, not these FK controls{aside}: set it to 1"
    return f"the deforming bones follow the FK controls, not this IK control{aside}: set it to 0"


def fk_switch_warnings(obj: bpy.types.Object, effectors: tuple[Effector | None, ...]) -> list[str]:
    """Effectors on a generated Rigify rig's limb controls whose limb shows the other chain
    (FK controls with the switch below 1, IK controls above 0): the controls reach, the
    deforming bones do not follow them (a review found the status saying reached with the
    arms and legs 0.14-0.98 m off; on IK controls, a QA helper, nothing deformed at all).
    Read at every solve: the switch is a property the user flips or animates."""
    found = []
    for position, effector in enumerate(effectors):
        if effector is None:
            continue
        known = rigify_switch(obj, effector.bone)
        if known is None or known[1] == known[2]:
            continue
        switch, value, shown = known
        label = effector_label(position, effector.bone)
        found.append(f"{label}: '{switch.name}' has its IK/FK switch at {value:g}, so {switch_advice(shown)}")
    return found


#: Constraints that turn or scale their owner but never move it: on the target itself, they
#: follow a bone harmlessly unless the goal takes the target's rotation or scale (a target
#: aimed at a forearm by a Damped Track was refused as a loop; QA helper). On an object
#: above the target they still swing it.
TURNING_ONLY = frozenset({"DAMPED_TRACK", "TRACK_TO", "LOCKED_TRACK", "COPY_ROTATION", "COPY_SCALE", "MAINTAIN_VOLUME"})


def followed_bones(
    obj: bpy.types.Object, target: bpy.types.Object | None, subtarget: str, orientation: bool = True
) -> list[tuple[str, str]]:
    """The bones of armature `obj` whose pose moves `target` (with `subtarget`), each with
    how: the bone itself when the target is the armature; else the bone it or an object
    above it is parented to, and the bones their constraints follow (Child Of, Copy
    Location, the Armature constraint, ...). Without `orientation` (the goal reads only the
    target's position), the target's own turning constraints do not count."""
    if target is None:
        return []
    if target == obj:
        return [(subtarget, "")] if subtarget else []
    found = []
    # A bone of another armature: its constraints, and those of the bones above it, move
    # it too (a Child Of to a chain bone went unseen; the status caught it after the solve).
    if target.type == "ARMATURE" and subtarget and target.pose is not None:
        pose_bone = target.pose.bones.get(subtarget)
        while pose_bone is not None:
            via = "" if pose_bone.name == subtarget else f" through '{pose_bone.name}'"
            for constraint in pose_bone.constraints:
                if constraint.mute or constraint.influence == 0.0:
                    continue
                if pose_bone.name == subtarget and not orientation and constraint.type in TURNING_ONLY:
                    continue
                pairs = [(getattr(constraint, "target", None), getattr(constraint, "subtarget", ""))]
                pairs += [(t.target, t.subtarget) for t in getattr(constraint, "targets", ())]
                found += [
                    (bone, f" (its bone's '{constraint.name}' constraint{via})")
                    for owner, bone in pairs
                    if owner == obj and bone
                ]
            pose_bone = pose_bone.parent
    above, seen = target, set()
    while above is not None and above.name not in seen:
        seen.add(above.name)
        via = "" if above == target else f" through '{above.name}'"
        if above.parent == obj and above.parent_type == "BONE" and above.parent_bone:
            found.append((above.parent_bone, f" (parented to it{via})"))
        for constraint in above.constraints:
            if constraint.mute or constraint.influence == 0.0:
                continue
            if above == target and not orientation and constraint.type in TURNING_ONLY:
                continue
            pairs = [(getattr(constraint, "target", None), getattr(constraint, "subtarget", ""))]
            pairs += [(t.target, t.subtarget) for t in getattr(constraint, "targets", ())]
            found += [
                (bone, f" (its '{constraint.name}' constraint{via})") for owner, bone in pairs if owner == obj and bone
            ]
        above = above.parent
    return found


def loop_problems(obj: bpy.types.Object, entry: RigEntry, found: GoalSet) -> list[tuple[int, str]]:
    """The goals (positions in `found`) whose target or pole moves with a bone of the same
    armature that the solve moves (in or under a chain): a bone of it as the target, or an
    object parented to such a bone or constrained to follow it. Each with a warning naming
    both: the target would move as the chain reaches for it (the pose Blender shows would
    miss what the solve reached), and live mode would chase it for ever."""
    follows = {
        k: [
            (bone, how, role)
            for target, subtarget, role, orientation in (
                (effector.target, effector.subtarget, "target", effector.use_rotation or effector.use_scale),
                (effector.pole_target, effector.pole_subtarget, "pole target", False),
            )
            for bone, how in followed_bones(obj, target, subtarget, orientation)
        ]
        for k, effector in enumerate(found.settings)
    }
    looking = [k for k, bones in follows.items() if bones]
    if not looking:
        return []
    labels = {
        position: effector_label(position, e.bone) for position, e in zip(found.effectors, found.settings, strict=True)
    }
    # Bone -> the effector whose chain turns it; the bones under it move with it.
    turned: dict[int, int] = {}
    for (bone, length), position, effector in zip(found.chains, found.effectors, found.settings, strict=True):
        for moved in chains.moving_bones(entry.parents, [(bone, length, chains.effector_turns(effector))]):
            turned.setdefault(moved, position)
    problems = []
    for k in looking:
        position = found.effectors[k]
        problem = None
        for followed, how, role in follows[k]:
            bone = entry.index.get(followed)
            while bone is not None and bone >= 0 and problem is None:
                owner = turned.get(bone)
                if owner is not None:
                    whose = "its own chain" if owner == position else f"the chain of {labels[owner]}"
                    under = f" (under '{entry.names[bone]}')" if entry.names[bone] != followed else ""
                    what = f"{role} bone '{followed}'" if not how else f"{role} follows bone '{followed}'{how}, which"
                    problem = (
                        f"{labels[position]}: its {what} moves with "
                        f"{whose}{under}, so it would move as the chain reaches for it (a loop); "
                        "pick a target outside the chains; skipped"
                    )
                bone = entry.parents[bone]
        if problem:
            problems.append((k, problem))
    return problems


def drop_unsolvable(
    obj: bpy.types.Object, entry: RigEntry, found: GoalSet, basis: np.ndarray, evaluated: np.ndarray
) -> tuple[list[int], tuple[np.ndarray, ...]]:
    """Skips, with a warning naming the bone and the reason, each goal whose chain holds a
    bone Blender does not pose from its own channels. Returns the bones the kept goals move
    and the pose the solve starts from (`basis` and `evaluated`: (n, 16) column-major, rig
    order): every bone where Blender puts it, the moving bones' rotations from their own
    channels (exact: what the solve turns and writes back), in one native call that also
    tells which moving bones are elsewhere than their channels say."""
    key = found.key
    moves, every = entry.remember(
        ("moves", key),
        lambda: moving_sets(
            entry,
            tuple(
                (bone, length, chains.effector_turns(effector))
                for (bone, length), effector in zip(found.chains, found.settings, strict=True)
            ),
        ),
    )
    # A bone whose pose holds NaN or infinity stands at rest for the start (only the goals
    # whose chains it moves need it: they are skipped, naming it).
    (basis, evaluated), not_finite = pose.finite_rows(basis.reshape(-1, 16), evaluated.reshape(-1, 16))
    matrices = (basis.reshape(-1, 4, 4), evaluated.reshape(-1, 4, 4))
    rotations, translations, scales, differences, smallest = entry.rig.start_pose(*matrices, every, column_major=True)
    far = np.nonzero(differences > chains.CHANNEL_MISMATCH)[0]
    mismatched = [every[k] for k in far.tolist()]
    problems = chains.bone_problems(obj, entry, every, mismatched, smallest, evaluated)
    if not_finite:
        bad = set(not_finite)
        problems.update({bone: pose.non_finite_reason(obj, entry, not_finite, bone) for bone in every if bone in bad})
    problems.update(pose.channel_problems(obj, entry, [bone for bone in every if bone not in problems]))
    if not problems:
        return every, (rotations, translations, scales)
    kept = []
    for k, bones in enumerate(moves):
        # Bones under one collapsed bone share its problem: say it once.
        reasons = list(dict.fromkeys(problems[bone] for bone in bones if bone in problems))
        if reasons:
            label = effector_label(found.effectors[k], found.settings[k].bone)
            found.warnings.append(f"{label}: {'; '.join(reasons)}; skipped")
        else:
            kept.append(k)
    found.keep(kept)
    moving = sorted({bone for k in kept for bone in moves[k]})
    # The skipped chains' bones start where Blender puts them, like every other bone.
    return moving, tuple(entry.rig.start_pose(*matrices, moving, column_major=True)[:3])


def moving_sets(entry: RigEntry, chains_key: tuple[tuple[int, int, bool], ...]) -> tuple[list[list[int]], list[int]]:
    """The bones each goal may turn, and all of them sorted, from (bone, chain length, the
    bone turns) per goal."""
    moves = [chains.moving_bones(entry.parents, [chain]) for chain in chains_key]
    return moves, sorted({bone for bones in moves for bone in bones})


# --- Scale targets ------------------------------------------------------------------------


@dataclass
class ScaleTarget:
    """An effector whose chain scales to match its target's scale."""

    effector: int
    #: The chain's bones (rig indices), root-most first.
    bones: list[int]
    #: Per-bone scale limits (bones, 3) each, or None when no bone has limits.
    low: np.ndarray | None
    high: np.ndarray | None


def scale_targets(obj: bpy.types.Object, entry: RigEntry, found: GoalSet) -> list[ScaleTarget]:
    """The enabled effectors that scale their chains."""
    plans = []
    for position, effector, (bone, chain_length) in zip(found.effectors, found.settings, found.chains, strict=True):
        if not effector.use_scale:
            continue
        bones = chain_bones(entry, bone, chain_length)[::-1]
        limited = [obj.pose.bones[entry.names[b]].tendon for b in bones]
        low = high = None
        if any(limits.use_scale_limit for limits in limited):
            wide = ((1e-3,) * 3, (1e3,) * 3)
            low = np.array([lim.scale_min if lim.use_scale_limit else wide[0] for lim in limited], np.float32)
            high = np.array([lim.scale_max if lim.use_scale_limit else wide[1] for lim in limited], np.float32)
        plans.append(ScaleTarget(position, bones, low, high))
    return plans


def effector_target_scale(obj: bpy.types.Object, effector: Any) -> np.ndarray:
    """The effector target's world scale relative to the armature's, per axis."""
    label = effector_label(0, effector.bone)
    return space.target_scale(obj, space.target_world_matrix(effector.target, effector.subtarget, label))


def inherited_scale(obj: bpy.types.Object, entry: RigEntry, plan: ScaleTarget) -> np.ndarray:
    """The scale a plan's chain inherits from the bones above it, in Blender's evaluated
    pose (per axis, armature space): the chain's own scales make up only the rest."""
    parent = entry.parents[plan.bones[0]]
    if parent < 0:
        return np.ones(3, np.float32)
    return np.array(obj.pose.bones[entry.names[parent]].matrix.to_scale(), np.float32)


def chain_scale_goals(obj: bpy.types.Object, entry: RigEntry, plans: list[ScaleTarget]) -> np.ndarray:
    """Each plan's goal for its chain's own scales (plans, 3): its target's scale over the
    scale the chain inherits (a chain under a parent scaled 2 matched a target of 1.5 with
    an effector of 3)."""
    return np.array(
        [effector_target_scale(obj, obj.tendon.effectors[p.effector]) / inherited_scale(obj, entry, p) for p in plans],
        np.float32,
    ).reshape(len(plans), 3)


def non_uniform_scales(plans: list[ScaleTarget], goals: np.ndarray, frames: np.ndarray | None = None) -> list[str]:
    """Warnings for the plans whose goal scales (goals: (..., plans, 3), one a frame of
    `frames` when baking) differ by axis:
    each chain bone is scaled along its own axes, which a chain turned away from the
    target's axes cannot match in world space (the effector's scale then differs)."""
    goals = np.asarray(goals, np.float64).reshape(-1, len(plans), 3)
    spread = np.ptp(goals, axis=2) / np.maximum(np.abs(goals).max(axis=2), 1e-30)
    uneven = (spread > 1e-4).any(axis=0)
    # The most uneven frame's scale (a bake's first frame showed (1, 1, 1) for a target
    # keyed from (1, 1, 1) to (2, 1, 1); QA helper).
    worst = spread.argmax(axis=0)
    return [
        f"effector {plan.effector + 1}: its target's scale differs by axis "
        f"({', '.join(f'{v:g}' for v in goals[worst[k], k])})"
        f"{f' at frame {frames[worst[k]]:g}' if frames is not None and len(goals) > 1 else ''}: the chain's "
        "bones are scaled along "
        "their own axes, so only a uniform scale is matched exactly in general"
        for k, plan in enumerate(plans)
        if uneven[k]
    ]


def apply_scales(plans: list[ScaleTarget], goals: np.ndarray, scales: np.ndarray) -> list[str]:
    """Sets the pose scales of each plan's chain from its goal scale (goals: plans x 3).
    Returns a note for each plan whose bones' scale limits cannot make up its goal (the
    status said "reached" with the effector at 1.158 for a target of 1.5)."""
    tendon = native.native()
    notes = []
    shared = len({b for plan in plans for b in plan.bones}) < sum(len(plan.bones) for plan in plans)
    if shared:
        share_scales(plans, goals, scales)
    for plan, goal in zip(plans, goals, strict=True):
        if not shared:
            try:
                scales[plan.bones] = tendon.distribute_scale(goal, len(plan.bones), plan.low, plan.high)
            except tendon.TendonError as error:
                raise TendonUserError(f"Scale target of effector {plan.effector + 1}: {error}") from error
        made = np.prod(scales[plan.bones], axis=0)
        if (np.abs(made - goal) > 1e-4 * np.abs(goal).max()).any():
            notes.append(
                f"effector {plan.effector + 1}: the chain's scale limits allow a scale of "
                f"{', '.join(f'{v:.4g}' for v in made)} of the {', '.join(f'{v:.4g}' for v in goal)} "
                "its target needs"
            )
    return notes


def share_scales(plans: list[ScaleTarget], goals: np.ndarray, scales: np.ndarray) -> None:
    """Scales for chains that share bones (two arms' chains through the chest), each plan's
    product its goal where they allow: per axis, the smallest change in the logarithms of
    the scales that meets every goal (least squares where goals conflict), a bone that
    would pass its scale limits held there and the others solved again. Each plan set
    alone, the last listed overwrote the shared bones and the first's target (2.0) ended at
    1.0, reported reached (QA helper)."""
    bones = sorted({b for plan in plans for b in plan.bones})
    column = {bone: k for k, bone in enumerate(bones)}
    incidence = np.zeros((len(plans), len(bones)))
    low = np.full((len(bones), 3), -np.inf)
    high = np.full((len(bones), 3), np.inf)
    for row, plan in enumerate(plans):
        columns = [column[b] for b in plan.bones]
        incidence[row, columns] = 1.0
        if plan.low is not None and plan.high is not None:
            low[columns] = np.maximum(low[columns], np.log(np.maximum(plan.low, 1e-12)))
            high[columns] = np.minimum(high[columns], np.log(np.maximum(plan.high, 1e-12)))
    # (A mirrored goal's sign is not shared out: its plan's note then says what was made.)
    wanted = np.log(np.maximum(np.abs(np.asarray(goals, np.float64)), 1e-12)).reshape(len(plans), 3)
    logs = np.zeros((len(bones), 3))
    for axis in range(3):
        held = np.zeros(len(bones), bool)
        for _ in range(len(bones) + 1):
            rest = wanted[:, axis] - incidence[:, held] @ logs[held, axis]
            logs[~held, axis] = np.linalg.pinv(incidence[:, ~held]) @ rest if (~held).any() else 0.0
            clamped = np.clip(logs[:, axis], low[:, axis], high[:, axis])
            newly = (clamped != logs[:, axis]) & ~held
            logs[:, axis] = clamped
            if not newly.any():
                break
            held |= newly
    scales[bones] = np.exp(logs).astype(scales.dtype)


# --- The solver ---------------------------------------------------------------------------

_solvers: dict[tuple[Any, ...], Any] = {}

#: The add-on's tension references by the native library's names.
TENSION_REFERENCES = {"START": "start", "REST": "rest", "ACTION": "pose"}


def solver_for(settings: Any) -> Any:
    """The native solver the armature's settings ask for (reused while they stay the same)."""
    key = (
        settings.solver,
        settings.tolerance,
        settings.iterations,
        settings.damping,
        settings.exclusive_chains,
        settings.move_root,
        settings.tension_reference,
    )
    solver = _solvers.get(key)
    if solver is None:
        solver = _solvers[key] = new_solver(settings)
    return solver


def new_solver(settings: Any) -> Any:
    tendon = native.native()
    name = native.solver_name(settings.solver)
    defaults = native.solver_defaults(settings.solver)
    options: dict[str, Any] = {"tolerance": settings.tolerance}
    if settings.iterations > 0:
        options["max_iterations"] = settings.iterations
    if "damping" in defaults:
        options["damping"] = settings.damping
    for flag in ("exclusive_chains", "move_root"):
        if flag in defaults:
            options[flag] = getattr(settings, flag)
    if "reference" in defaults:
        options["reference"] = TENSION_REFERENCES[settings.tension_reference]
    try:
        return tendon.Solver(name, **options)
    except tendon.TendonError as error:
        raise TendonUserError(f"Solver settings: {error}") from error


#: A pose bone's rotation channels in an action, by rotation mode.
ROTATION_PATHS = {"QUATERNION": "rotation_quaternion", "AXIS_ANGLE": "rotation_axis_angle"}


def action_rotations(obj: bpy.types.Object, entry: RigEntry, action: bpy.types.Action, frame: float) -> dict[int, Any]:
    """The local rotations (w-first quaternions, by rig index) `action` gives the bones it
    keys at `frame`, each read in its pose bone's rotation mode."""
    channels: dict[tuple[str, str], dict[int, float]] = {}
    for fcurve in keys.action_fcurves(action, obj):
        path = fcurve.data_path
        if not path.startswith('pose.bones["'):
            continue
        bone, _, channel = path[len('pose.bones["') :].partition('"].')
        if channel.startswith("rotation_"):
            channels.setdefault((bone, channel), {})[fcurve.array_index] = fcurve.evaluate(frame)
    rotations: dict[int, Any] = {}
    for name, index in entry.index.items():
        mode = obj.pose.bones[name].rotation_mode
        path = ROTATION_PATHS.get(mode, "rotation_euler")
        values = channels.get((name, path))
        if values is None:
            continue
        if mode == "QUATERNION":
            q = Quaternion([values.get(i, 1.0 if i == 0 else 0.0) for i in range(4)])
        elif mode == "AXIS_ANGLE":
            angle, *axis = (values.get(i, 1.0 if i == 2 else 0.0) for i in range(4))
            q = Quaternion(axis, angle)
        else:
            q = Euler([values.get(i, 0.0) for i in range(3)], mode).to_quaternion()
        rotations[index] = q.normalized()
    return rotations


def set_reference(solver: Any, obj: bpy.types.Object, entry: RigEntry, current: np.ndarray) -> None:
    """Gives a tension solver relaxing towards a stored pose that pose: the reference
    action's rotations at its frame for the bones it keys, `current` (n x 4) for the rest."""
    settings = obj.tendon
    if settings.solver != "TENSION" or settings.tension_reference != "ACTION":
        return
    action = settings.reference_action
    if action is None:
        raise TendonUserError(f"Armature '{obj.name}': relaxing towards a stored pose needs a reference action")
    if not math.isfinite(settings.reference_frame):
        # Evaluated there, the action's curves gave some pose without a word (a QA helper).
        raise TendonUserError(
            f"Armature '{obj.name}': its reference frame is {settings.reference_frame}: give the frame of "
            f"'{action.name}' to relax towards as a number"
        )
    reference = np.array(current, np.float32)
    keyed = action_rotations(obj, entry, action, settings.reference_frame)
    if not keyed:
        # Keys in another rotation mode than the bone's are keys Blender does not play.
        for fcurve in keys.action_fcurves(action, obj):
            bone, _, channel = fcurve.data_path.removeprefix('pose.bones["').partition('"].')
            if channel.startswith("rotation_") and bone in entry.index:
                mode = obj.pose.bones[bone].rotation_mode
                raise TendonUserError(
                    f"Armature '{obj.name}': the reference action '{action.name}' keys bone '{bone}' in "
                    f"{channel}, but the bone is in {mode} mode, whose channel Blender plays instead; "
                    "key the bone's own rotation channel, or change its mode"
                )
        raise TendonUserError(
            f"Armature '{obj.name}': the reference action '{action.name}' keys no rotation of this armature's bones"
        )
    for index, q in keyed.items():
        reference[index] = tuple(q)
    if not np.isfinite(reference).all():
        raise TendonUserError(f"Armature '{obj.name}': the reference action '{action.name}' holds non-finite rotations")
    solver.set_reference_pose(entry.rig, reference)


# --- One solve ----------------------------------------------------------------------------

#: `PosePlan.solve`'s argument for each rotation channel property.
CHANNEL_ARGUMENTS = {
    "rotation_quaternion": "quaternions",
    "rotation_euler": "eulers",
    "rotation_axis_angle": "axis_angles",
}


@dataclass
class Checks:
    """What each solved effector must achieve in the pose Blender shows."""

    #: The effector bones, and whether their tail (or head) counts.
    bones: list[str]
    use_tail: list[bool]
    #: Armature-space targets (x, y, z of each effector's in turn) and the largest
    #: armature-space distances that count as reached (one an effector).
    targets: list[float]
    tolerances: list[float]
    #: Effectors whose rotation target must be met (rotation weight 1 or more, as the
    #: solver counts them): (effector index, armature-space target rotation).
    rotations: list[tuple[int, Quaternion]] = field(default_factory=list)
    #: Each effector's target object and bone (when the target is a bone), read again when
    #: measuring: a target that follows the chain (a bone constraint copying a chain bone's
    #: location, an empty parented to one) moves with the solve, and measured against where
    #: it was, the status said "reached" 0.34-0.63 away from it.
    sources: list[tuple[Any, str]] = field(default_factory=list)

    def current_targets(self, obj: bpy.types.Object) -> list[float]:
        """The targets (armature space, flat) where Blender's evaluated scene now has them,
        or as they were read for the solve when one cannot be read any more."""
        if not self.sources:
            return self.targets
        try:
            to_armature = obj.matrix_world.inverted_safe()
            points: list[float] = []
            for target, subtarget in self.sources:
                points.extend(to_armature @ space.target_world_matrix(target, subtarget, "").translation)
        except (ReferenceError, AttributeError, TendonUserError):
            return self.targets
        return points

    def measure(self, obj: bpy.types.Object) -> tuple[list[str], float, list[str]]:
        """The effector bones not within their tolerance in Blender's evaluated pose, the
        largest distance in world units (the distance the user sees), and a note for each
        rotation target missed. A few points: mathutils, not numpy (whose every call
        costs more than this whole loop)."""
        pose_bones = obj.pose.bones
        world = obj.matrix_world.to_3x3()
        largest = 0.0
        targets = self.current_targets(obj)
        missing = [False] * len(self.bones)
        notes = []
        for k, (bone, tail, tolerance) in enumerate(zip(self.bones, self.use_tail, self.tolerances, strict=True)):
            target = Vector(targets[3 * k : 3 * k + 3])
            offset = (pose_bones[bone].tail if tail else pose_bones[bone].head) - target
            tolerance += POSITION_NOISE * target.length
            missing[k] = offset.length > tolerance
            largest = max(largest, (world @ offset).length)
            if missing[k] and targets is not self.targets:
                moved = (world @ (target - Vector(self.targets[3 * k : 3 * k + 3]))).length
                if moved > tolerance:
                    notes.append(
                        f"the target of bone '{bone}' moved {moved:.2g} with the solve "
                        "(it follows a bone the solve turned)"
                    )
        for k, rotation in self.rotations:
            angle = turn_between(pose_bones[self.bones[k]].matrix.to_quaternion(), rotation)
            if angle > ROTATION_TOLERANCE:
                missing[k] = True
                notes.append(f"bone '{self.bones[k]}' is turned {math.degrees(angle):.3g} deg from its rotation target")
        return [bone for bone, miss in zip(self.bones, missing, strict=True) if miss], largest, notes


def turn_between(a: Quaternion, b: Quaternion) -> float:
    """The angle (radians) of the rotation between `a` and `b`, in double precision and the
    shorter way round: mathutils' `rotation_difference(...).angle` works in single
    precision (no turn under about 1e-3 rad shows) and gives nearly 2*pi for quaternions of
    opposite signs (a bone on its target was said to be turned 360 degrees from it)."""
    w = a[0] * b[0] + a[1] * b[1] + a[2] * b[2] + a[3] * b[3]
    # |a^-1 b|'s vector part, from the components in double precision.
    x = a[0] * b[1] - a[1] * b[0] - a[2] * b[3] + a[3] * b[2]
    y = a[0] * b[2] + a[1] * b[3] - a[2] * b[0] - a[3] * b[1]
    z = a[0] * b[3] - a[1] * b[2] + a[2] * b[1] - a[3] * b[0]
    return 2.0 * math.atan2(math.sqrt(x * x + y * y + z * z), abs(w))


def world_scale(obj: bpy.types.Object) -> float:
    """The armature's largest world scale: a distance in armature space times this is (for
    a uniform scale exactly) the distance the user sees, as measured statuses give it."""
    return max(abs(v) for v in obj.matrix_world.to_scale())


def two_bone_notes(obj: bpy.types.Object) -> list[str]:
    """Why the two-bone solver may miss: it moves the two joints above each effector only,
    whatever longer chain the effector asks for (the status said "not reached" with no
    reason for a hand with chain 3)."""
    if obj.tendon.solver != "TWO_BONE":
        return []
    return [
        f"the two-bone solver moves only the two joints above '{e.bone}' (chain {e.chain_length or 'to the root'}; "
        "a bone locked on every axis is no joint): for longer chains use damped least squares"
        for e in obj.tendon.effectors
        if e.enabled and e.bone and e.chain_length != 2
    ][:1]


def make_checks(
    obj: bpy.types.Object,
    entry: RigEntry,
    reach_indices: tuple[np.ndarray, ...],
    bones: list[str],
    use_tail: list[bool],
    targets: np.ndarray,
    evaluated: np.ndarray,
    goals: list[Any],
    sighted: list[Sighted],
) -> Checks:
    """What each solved effector must achieve in Blender's pose: its target within the
    solver's tolerance of its chain's length (measured in the pose before the solve), from
    the chains' `reach_segments`, and the rotation targets the solver counts (`goals`, the
    native goals, one an effector)."""
    relative = obj.tendon.tolerance + MEASURE_SLACK
    ends, starts, owner, factors = reach_indices
    # Every segment between two heads of a chain, and every tail's bone axis (y) from the
    # bottom row's zero: the reach is their lengths (times the bone's for a tail), per chain.
    flat = evaluated.ravel()
    offsets = (flat.take(ends) - flat.take(starts)).reshape(-1, 3)
    reach = np.bincount(owner, np.sqrt((offsets * offsets).sum(axis=1)) * factors, minlength=len(use_tail))
    return Checks(
        bones=bones,
        use_tail=use_tail,
        targets=targets.ravel().tolist(),
        tolerances=(relative * np.maximum(reach, 1e-9)).tolist(),
        rotations=[
            (k, Quaternion(goal.rotation))
            for k, goal in enumerate(goals)
            if goal.rotation is not None and goal.rotation_weight >= 1.0
        ],
        sources=follow_sources(sighted),
    )


def follow_sources(sighted: list[Sighted]) -> list[tuple[Any, str]]:
    """Each effector's target (object and bone) when any of them could follow the pose,
    for `Checks.sources`; none otherwise (a plain object cannot move with the armature)."""
    if not any(may_follow(s.settings.target, s.settings.subtarget) for s in sighted):
        return []
    return [(s.settings.target, s.settings.subtarget) for s in sighted]


def may_follow(target: Any, subtarget: str) -> bool:
    """Whether a target could move when the armature's pose does (a bone, or an object with
    a parent, constraints or drivers): only then is it read again when measuring. (A
    target a driver placed from a chain bone's rotation was measured where it had been:
    "reached", 0.52 from where it went; QA helper.)"""
    if target is None:
        return False
    anim = target.animation_data
    return (
        bool(subtarget)
        or target.parent is not None
        or len(target.constraints) > 0
        or target.type == "ARMATURE"
        or (anim is not None and len(anim.drivers) > 0)
    )


def reach_segments(
    entry: RigEntry, chains_key: tuple[tuple[int, int], ...], use_tail: tuple[bool, ...]
) -> tuple[np.ndarray, ...]:
    """Index arrays measuring every chain's reach in one go from the evaluated matrices
    ((n, 16) column-major, see `make_checks`): into the flattened matrices, the x, y and z
    of each segment's two ends (heads; for an effector whose tail counts, its bone's y axis
    and a zero); the chain each segment belongs to; its length factor (one, or the
    bone's length for a tail)."""
    ends, starts, owner, factors = [], [], [], []
    for k, (bone, length) in enumerate(chains_key):
        chain = entry.chain(bone, length)
        for below, above in zip(chain[:-1], chain[1:], strict=True):
            ends += [below * 16 + 12, below * 16 + 13, below * 16 + 14]
            starts += [above * 16 + 12, above * 16 + 13, above * 16 + 14]
            owner.append(k)
            factors.append(1.0)
        if use_tail[k]:
            # Column-major: 4 to 6 are the y axis; 3 is the bottom row's zero.
            ends += [bone * 16 + 4, bone * 16 + 5, bone * 16 + 6]
            starts += [3, 3, 3]
            owner.append(k)
            factors.append(float(entry.lengths[bone]))
    return (
        np.array(ends, np.int64),
        np.array(starts, np.int64),
        np.array(owner, np.int64),
        np.array(factors, np.float64),
    )


@dataclass
class SolveOutcome:
    """What a solve did, for the operator's report and the panel."""

    goals: int
    reached: bool
    residual: float
    iterations: int
    bones_written: int
    seconds: float
    warnings: list[str]
    #: What each effector must achieve in the pose Blender shows.
    checks: Checks | None = None
    #: Names of the pose bones the solve could turn, but those limited as their Limit
    #: Rotation clamps (what `chains.miss_notes` looks at).
    moving: list[str] = field(default_factory=list)
    #: Whether `reached` and `residual` were measured in Blender's evaluated pose (else
    #: they are the solver's, in Tendon's model of the rig).
    measured: bool = False
    #: How many effectors missed, as measured (0 before), and their bones.
    missed: int = 0
    missed_bones: list[str] = field(default_factory=list)

    def measure(self, obj: bpy.types.Object) -> None:
        """Takes `reached` and `residual` from the pose Blender evaluated (call after the
        depsgraph update): a status never claims more than the user can see."""
        missed, largest, turned = self.checks.measure(obj) if self.checks is not None else ([], 0.0, [])
        reached = not missed
        self.missed = len(missed)
        self.missed_bones = missed
        if not reached:
            notes = [*turned, *two_bone_notes(obj), *chains.miss_notes(obj, self.moving)]
            if self.reached and not notes:
                notes = [
                    "Blender's evaluated pose differs from the solved one: "
                    "something Tendon does not model moves a chain"
                ]
            self.warnings = [*self.warnings, *notes]
        self.reached, self.residual, self.measured = reached, largest, True

    def summary(self) -> str:
        if self.reached:
            state = f"{self.goals} effector(s) reached"
        elif self.measured:
            state = f"{self.missed} of {self.goals} effector(s) not reached"
        else:
            state = f"{self.goals} effector(s), some not reached"
        where = " in Blender's pose" if self.measured else ""
        # No iteration: every target already met, or only out of reach (chains pointed at them).
        how = f"in {self.iterations} iteration(s)" if self.iterations else "without iterating"
        # Which missed, by bone (a solve of four limbs said only "1 of 4"; QA helper).
        named = "".join(f"'{bone}', " for bone in self.missed_bones[:3])
        named = f"{named}..., " if len(self.missed_bones) > 3 else named
        return (
            f"{state}{where} ({named}largest error {self.residual:.2g}) {how}; {self.bones_written} bone(s) posed "
            f"in {self.seconds * 1000:.2f} ms"
        )

    def status(self) -> str:
        """The summary and the warnings, for the panel's status line."""
        return "; ".join([self.summary(), *self.warnings]) if self.warnings else self.summary()


@dataclass
class Prepared:
    """A solve ready to run: its goals, the bones they may turn, the pose it starts from,
    and what each effector must achieve in the pose Blender shows."""

    entry: RigEntry
    goals: list[Any]
    #: The bones the goals may turn (rig indices, sorted).
    moving_array: np.ndarray
    #: The start pose (rig order): local rotations (n, 4), translations and scales (n, 3).
    rotations: np.ndarray
    translations: np.ndarray
    scales: np.ndarray
    warnings: list[str]
    checks: Checks
    moving_names: list[str]


@dataclass
class Shortcut:
    """What a solve in which every checked effector became a goal (none refused, none
    dropped for a loop or a chain bone) found out about an armature's effectors on its
    rig: while their settings stay the same, the next solves
    read only the targets and the pose, and go the whole way again at the first thing out
    of the ordinary (a bone renamed, a target the library refuses, a chain bone Blender
    does not pose from its channels), which the whole way then names."""

    plan: GoalPlan
    #: The goals' effectors, in goal order.
    sighted: list[Sighted]
    moving: list[int]
    moving_array: np.ndarray
    moving_names: list[str]
    #: Whether a moving bone carries constraints, drivers or Inherit Rotation off, which the
    #: refusals look at on every solve (their muting and influence may be animated).
    inspect: bool
    #: The warnings that follow from the settings alone (chain lengths, loops).
    warnings: list[str]
    #: `reach_segments` of the goals' chains, the effector bones and their points.
    reach: tuple[np.ndarray, ...]
    check_bones: list[str]
    use_tail: list[bool]
    #: Parents whose scale moving bones, or the bones above them, inherit other than fully:
    #: solved while they show none, else the refusals look at them.
    unit_parents: list[int] = field(default_factory=list)
    #: The goals planned natively (`PosePlan`), made by the first `solve` that can use it.
    native_plan: Any = None
    #: The pose bones' rotation modes last seen (as bytes) and `channel_properties` for them.
    known_modes: tuple[bytes, list[tuple[str, int]]] | None = None
    #: The arrays `solve` reads into and writes from.
    buffers: pose.PoseBuffers | None = None
    #: Whether every goal is a point alone (no rotation target, no pole), and the goals'
    #: effector positions (to find the targets live mode read).
    points_only: bool = field(init=False)
    positions: list[int] = field(init=False)
    #: The targets read again when measuring (`follow_sources`; a target gaining a parent
    #: or constraint rebuilds the relations, which drops this shortcut with the rig).
    sources: list[tuple[Any, str]] = field(init=False)

    def __post_init__(self) -> None:
        self.points_only = not any(s.rotating or s.settings.pole_target is not None for s in self.sighted)
        self.positions = [s.position for s in self.sighted]
        self.sources = follow_sources(self.sighted)

    def solve(
        self, obj: bpy.types.Object, entry: RigEntry, started: float, world: space.WorldTargets | None = None
    ) -> SolveOutcome | None:
        """The solve in one native call between the bulk reads (the evaluated pose, the
        rotation modes and channels) and the bulk write, or None when it must be prepared
        (`prepare`): a moving bone's constraints, drivers or Inherit Rotation off to look
        at, a root to move, a stored reference pose, a bone renamed, a target or pose the
        library refuses, or a start the native plan finds needs a closer look (a bone not
        where its channels put it, a scale of zero, a scaled parent whose scale a moving
        bone inherits other than fully)."""
        settings = obj.tendon
        if (
            self.inspect
            or settings.move_root
            or (settings.solver == "TENSION" and settings.tension_reference == "ACTION")
            or self.plan.stale(obj)
        ):
            return None
        tendon = native.native()
        pose_bones = obj.pose.bones
        buffers = self.buffers
        if buffers is None:
            buffers = self.buffers = pose.PoseBuffers(entry.count)
        try:
            targets = None
            if self.points_only and world:
                # Points from the matrices live mode read (a flat list is all the call needs).
                to_armature = space.world_to_armature(obj)
                try:
                    points = [x for p in self.positions for x in to_armature @ world[p][0].translation]
                except (AttributeError, KeyError):
                    # A target that could not be read: the prepared path names it.
                    return None
            else:
                targets = goal_targets(obj, self.sighted, world)
                points = targets.points[0].ravel().tolist()
            far = max(map(abs, points), default=0.0) > MAX_TARGET_DISTANCE
            if far or (targets is not None and first_too_far(targets) is not None):
                # A target or pole too far to measure: the prepared path names it.
                return None
            evaluated = buffers.matrices(pose_bones, "matrix")
            solver = solver_for(settings)
            plan = self.native_plan
            if plan is None:
                if targets is None:
                    targets = goal_targets(obj, self.sighted, world)
                goals = [native_goal(s, targets, k) for k, s in enumerate(self.sighted)]
                plan = self.native_plan = tendon.PosePlan(
                    entry.rig,
                    goals,
                    self.moving,
                    entry.pose_order.tolist(),
                    [entry.chain(s.bone, s.chain_length) for s in self.sighted],
                    self.use_tail,
                    pose.MODES,
                    unit_parents=self.unit_parents,
                    scale_tolerance=chains.SCALE_TOLERANCE,
                )
            modes = buffers.rotation_modes(pose_bones)
            properties = self.channel_properties(entry, modes)
            arrays = {CHANNEL_ARGUMENTS[name]: buffers.channel(pose_bones, name, width) for name, width in properties}
            # A pose that is not finite (a NaN channel shows in the evaluated matrices): the
            # plan refuses it and the whole way names the bone.
            found = plan.solve(
                solver,
                evaluated,
                points,
                rotation_targets=None if targets is None or targets.rotations is None else targets.rotations[0],
                poles=None if targets is None or targets.poles is None else targets.poles[0],
                relative=settings.tolerance + MEASURE_SLACK,
                mismatch=chains.CHANNEL_MISMATCH,
                collapsed=pose.COLLAPSED_SCALE,
                unchanged=UNCHANGED,
                rotation_modes=modes,
                **arrays,
            )
        except (tendon.TendonError, TendonUserError, pose.StaleRig):
            # The prepared path names whatever is at fault.
            return None
        if found is None:
            return None
        changed, reached, residual, iterations, tolerances = found
        if changed:
            for name, _width in properties:
                buffers.write(pose_bones, name)
            pose.tag_pose(obj)
        return SolveOutcome(
            goals=len(self.sighted),
            reached=reached,
            residual=residual * world_scale(obj),
            iterations=iterations,
            bones_written=len(changed),
            seconds=time.perf_counter() - started,
            warnings=list(self.warnings),
            checks=Checks(
                self.check_bones,
                self.use_tail,
                points,
                tolerances,
                rotations=[
                    (k, Quaternion(targets.rotations[0, k]))
                    for k, s in enumerate(self.sighted)
                    if s.rotating and s.settings.rotation_weight >= 1.0
                ]
                if targets is not None and targets.rotations is not None
                else [],
                sources=self.sources,
            ),
            moving=self.moving_names,
        )

    def channel_properties(self, entry: RigEntry, modes: np.ndarray) -> list[tuple[str, int]]:
        """The rotation channel properties (name, width) of the moving bones' modes
        (`modes`: every pose bone's), worked out again only when some bone's mode changed."""
        key = modes.tobytes()
        if self.known_modes is None or self.known_modes[0] != key:
            used = {int(m) for m in modes[entry.pose_order[self.moving_array]].tolist()}
            self.known_modes = (key, sorted({pose.rotation_channel(pose.MODES[m]) for m in used}))
        return self.known_modes[1]

    def prepare(self, obj: bpy.types.Object, entry: RigEntry) -> Prepared | None:
        """The solve prepared, or None when it must go the whole way."""
        if self.plan.stale(obj):
            return None
        tendon = native.native()
        try:
            targets = goal_targets(obj, self.sighted)
            goals = [native_goal(s, targets, k) for k, s in enumerate(self.sighted)]
            basis = pose.read_matrices(obj, entry, "matrix_basis")
            evaluated = pose.read_matrices(obj, entry, "matrix")
        except (tendon.TendonError, TendonUserError, pose.StaleRig):
            return None
        if not (np.isfinite(basis).all() and np.isfinite(evaluated).all()) or pose.channel_problems(
            obj, entry, self.moving
        ):
            # A pose that is not finite somewhere: the whole way names the bone.
            return None
        rotations, translations, scales, differences, smallest = entry.rig.start_pose(
            basis.reshape(-1, 4, 4), evaluated.reshape(-1, 4, 4), self.moving, column_major=True
        )
        far = differences > chains.CHANNEL_MISMATCH
        if self.inspect or self.unit_parents or far.any() or smallest.min() <= pose.COLLAPSED_SCALE:
            mismatched = [self.moving[k] for k in np.nonzero(far)[0].tolist()]
            if chains.bone_problems(obj, entry, self.moving, mismatched, smallest, evaluated):
                return None
        checks = make_checks(
            obj, entry, self.reach, self.check_bones, self.use_tail, targets.points[0], evaluated, goals, self.sighted
        )
        return Prepared(
            entry,
            goals,
            self.moving_array,
            rotations,
            translations,
            scales,
            list(self.warnings),
            checks,
            self.moving_names,
        )


def prepare_whole(obj: bpy.types.Object, effectors: tuple[Effector | None, ...]) -> Prepared:
    """The solve prepared the whole way: every effector checked, every refusal named; a
    solve that refused nothing per solve leaves a `Shortcut` for the next."""
    entry, basis, found = current_goals(obj, effectors)
    if not found.goals:
        reasons = "; ".join(found.warnings) or "add an effector first"
        raise TendonUserError(f"Armature '{obj.name}' has no effector to solve: {reasons}")
    # Solver settings the library refuses are named before anything else of the pose is read.
    solver_for(obj.tendon)
    evaluated = pose.read_matrices(obj, entry, "matrix")
    goal_count = len(found.goals)
    moving, (rotations, translations, scales) = drop_unsolvable(obj, entry, found, basis, evaluated)
    if not found.goals:
        raise TendonUserError(f"Armature '{obj.name}' has no effector to solve: {'; '.join(found.warnings)}")
    plans = scale_targets(obj, entry, found)
    if plans:
        # Scale first, as the guide advises: the positions then reach with the new lengths.
        goals = chain_scale_goals(obj, entry, plans)
        found.warnings += non_uniform_scales(plans, goals)
        scales = scales.copy()
        found.warnings += apply_scales(plans, goals, scales)
        pose.write_vectors(obj, entry, "scale", np.array(sorted({b for p in plans for b in p.bones})), scales)
    use_tail = found.use_tail
    reach = entry.remember(("reach", found.key), lambda: reach_segments(entry, tuple(found.chains), tuple(use_tail)))
    check_bones = [entry.names[bone] for bone, _ in found.chains]
    checks = make_checks(obj, entry, reach, check_bones, use_tail, found.points, evaluated, found.goals, found.sighted)
    moving_array = np.array(moving, np.int64)
    # For `chains.miss_notes`: a bone limited as its Limit Rotation clamps is never clamped.
    moving_names = [entry.names[bone] for bone in moving if bone not in entry.clamped_alike]
    plan = found.plan
    # Only when every checked effector became a goal and stayed one (no goal refused, no
    # loop, no chain bone refused): the shortcut then reads exactly the whole way's targets.
    if not plans and len(found.goals) == goal_count == len(plan.sighted):
        inspect = any(
            bone in entry.constrained or bone in entry.driven or bone in entry.no_inherit_rotation for bone in moving
        )
        # Inheriting scale other than fully is modelled while the parent shows no scale: for
        # the moving bones, and for the bones the chains hang from (`chains.frame_problems`,
        # which the whole way runs when such a parent shows scale).
        inheriting = set(moving) | {above for bone in moving for above in chains.ancestors(entry, bone)}
        unit_parents = sorted(
            {entry.parents[bone] for bone in inheriting if bone in entry.inherit_scale and entry.parents[bone] >= 0}
        )
        shortcut = Shortcut(
            plan,
            list(found.sighted),
            moving,
            moving_array,
            moving_names,
            inspect,
            list(found.warnings),
            reach,
            check_bones,
            use_tail,
            unit_parents=unit_parents,
        )
        entry.memo["shortcut"] = (effectors, shortcut)
    return Prepared(
        entry, found.goals, moving_array, rotations, translations, scales, found.warnings, checks, moving_names
    )


def solve(
    obj: bpy.types.Object,
    effectors: tuple[Effector | None, ...] | None = None,
    world: space.WorldTargets | None = None,
) -> SolveOutcome:
    """Solves armature `obj`'s effectors (`effectors`: their settings as `read_effectors`
    gives them, and `world` their targets' world matrices, when already read) from its
    current pose and writes the rotations of the bones that moved. Raises TendonUserError,
    leaving the pose untouched, when nothing can be solved."""
    started = time.perf_counter()
    problem = armature_problem(obj, need_pose_mode=False) or rest_position_problem(obj)
    if problem:
        raise TendonUserError(problem)
    tendon = native.native()
    if effectors is None:
        effectors = read_effectors(obj)
    prepared = None
    entry = read_rig(obj)
    # Read at every solve, outside every cache: the switch is a property users flip.
    switches = fk_switch_warnings(obj, effectors)
    known = entry.memo.get("shortcut")
    if known is not None and known[0] == effectors:
        outcome = known[1].solve(obj, entry, started, world)
        if outcome is not None:
            outcome.warnings = [*outcome.warnings, *switches]
            return outcome
        prepared = known[1].prepare(obj, entry)
    if prepared is None:
        # The whole way leaves a new shortcut only if this solve is out of the ordinary no more.
        entry.memo.pop("shortcut", None)
        prepared = prepare_whole(obj, effectors)
    entry, rotations, translations = prepared.entry, prepared.rotations, prepared.translations
    solver = solver_for(obj.tendon)
    set_reference(solver, obj, entry, rotations)
    try:
        result = solver.solve(entry.rig, prepared.goals, rotations, translations, prepared.scales)
    except tendon.TendonError as error:
        raise TendonUserError(f"Armature '{obj.name}': {error}") from error
    solved = result.rotations
    # Only the chains' bones are written (the others hold Blender's evaluated pose, as given).
    bones = prepared.moving_array
    moved_rotations = solved[bones]
    if not np.isfinite(moved_rotations).all():
        raise TendonUserError(f"Armature '{obj.name}': the solver produced non-finite rotations; pose unchanged")
    changed = bones[np.abs(moved_rotations - rotations[bones]).max(axis=1) > UNCHANGED]
    pose.write_rotations(obj, entry, changed, solved[changed])
    written = len(changed)
    if obj.tendon.move_root:
        # A root moved by `move_root`: its location channels (no solver moves a bone otherwise).
        moved = np.nonzero(np.abs(result.translations - translations).max(axis=1) > UNCHANGED)[0]
        locations = pose.location_channels(obj, entry, moved, solved, result.translations, prepared.scales)
        pose.write_vectors(obj, entry, "location", moved, locations)
        written = len(set(changed.tolist()) | set(moved.tolist()))
    return SolveOutcome(
        goals=len(prepared.goals),
        reached=bool(result.reached),
        residual=float(result.residual) * world_scale(obj),
        iterations=int(result.iterations),
        bones_written=written,
        seconds=time.perf_counter() - started,
        warnings=[*prepared.warnings, *switches],
        checks=prepared.checks,
        moving=prepared.moving_names,
    )


def current_goals(
    obj: bpy.types.Object, effectors: tuple[Effector | None, ...] | None = None
) -> tuple[RigEntry, np.ndarray, GoalSet]:
    """The armature's rig from the cache, its pose's ``matrix_basis`` (n, 16, rig order)
    and its goals; the rig is built again when its bones changed unnoticed (a bone renamed,
    or their count not the rig's)."""
    try:
        entry = read_rig(obj)
        return entry, pose.read_matrices(obj, entry, "matrix_basis"), build_goals(obj, entry, effectors)
    except pose.StaleRig:
        forget(obj)
        entry = read_rig(obj)
        return entry, pose.read_matrices(obj, entry, "matrix_basis"), build_goals(obj, entry, effectors)


def reset_chains(obj: bpy.types.Object) -> int:
    """Puts the bones the enabled effectors move back to their rest rotation, and what else
    a solve may have changed back to rest too: the scale of chains an effector scales
    (Scale Target) and, with Move Root, the root's location (left as the solve put them,
    the chains stayed 0.7 from rest; QA helper). Returns how many bones were reset."""
    entry = read_rig(obj)
    pose_bones = obj.pose.bones
    if any((e.bone in entry.index) != (e.bone in pose_bones) for e in obj.tendon.effectors if e.bone):
        # A bone renamed since the rig was cached.
        forget(obj)
        entry = read_rig(obj)
    bones: set[int] = set()
    scaled: set[int] = set()
    for effector in obj.tendon.effectors:
        bone = entry.index.get(effector.bone)
        if effector.enabled and bone is not None:
            chain = chain_bones(entry, bone, effector.chain_length)
            bones.update(chain)
            if effector.use_scale:
                scaled.update(chain)
    pose.reset_rotations(obj, entry, np.array(sorted(bones), np.int64))
    for bone in scaled:
        pose_bones[entry.names[bone]].scale = (1.0, 1.0, 1.0)
    if obj.tendon.move_root:
        roots = {chain_bones(entry, bone, 0)[-1] for bone in bones}
        for root in roots:
            pose_bones[entry.names[root]].location = (0.0, 0.0, 0.0)
        bones |= roots
    return len(bones)
