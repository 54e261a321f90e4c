"""Rigs nobody on the team wrote, and the checks a user would make on them.

The rigs ship with Blender (Rigify's metarigs, the rig Rigify generates from the human
metarig) or with the project (CMU motion capture clips in tests/fixtures/mocap, imported
with Blender's BVH importer). Targets are made jointly reachable by forward kinematics:
every chain is turned at random at once, the effector points are read from the pose
Blender evaluates, and the pose goes back exactly. Every check reads the evaluated world
pose, i.e. what the viewport shows, never Tendon's own idea of it.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import bpy
import numpy as np
import rigs
from mathutils import Matrix, Vector

#: Largest allowed distance from an effector to its target, as a share of the character's
#: height (the bounding extent of its rest bones in world space).
TOLERANCE = 1e-4

#: Largest change allowed in the matrix_basis of a bone outside every chain.
UNMOVED = 1e-6

#: Largest random turn of each chain bone when making targets (degrees): large enough to
#: leave the start pose well behind, small enough to stay a plausible pose.
SPREAD_DEGREES = 40.0

MOCAP = rigs.FIXTURES / "mocap"


@dataclass(frozen=True)
class Effector:
    bone: str
    chain_length: int
    use_tail: bool = True


@dataclass
class RealRig:
    """An armature in the scene, its effectors, and what must follow them."""

    name: str
    effectors: tuple[Effector, ...]
    height: float
    #: What the tests call it ("metarig:wolf", "mocap:cmu_102_01_max").
    label: str
    #: Bones the deformation follows (Rigify's ORG bones) mapped to the effector they copy:
    #: their tails must reach that effector's target too, or the mesh would not.
    followers: dict[str, str] = field(default_factory=dict)
    #: Whether the chain bones may be switched to other rotation modes: not for motion
    #: capture, whose action keys Euler channels (a quaternion bone would ignore them).
    vary_rotation_modes: bool = True

    @property
    def obj(self) -> bpy.types.Object:
        # Looked up by name every time: undo and file loading replace the Python objects.
        return bpy.data.objects[self.name]


# --- Building the rigs -------------------------------------------------------------------


def enable_rigify() -> None:
    """Rigify ships with Blender (also the bpy module, 4.2 to 5.0) but is off by default."""
    if "rigify" not in bpy.context.preferences.addons:
        bpy.ops.preferences.addon_enable(module="rigify")


def character_height(obj: bpy.types.Object) -> float:
    """The bounding extent of the rest bones' heads and tails in world space."""
    rigs.update()
    points = [obj.matrix_world @ p for b in obj.data.bones for p in (b.head_local, b.tail_local)]
    array = np.array([tuple(p) for p in points])
    return float(np.ptp(array, axis=0).max())


def enter_pose_mode(obj: bpy.types.Object) -> None:
    rigs.activate(obj)
    bpy.ops.object.mode_set(mode="POSE")


#: Every metarig Rigify adds (`bpy.ops.object.armature_<kind>_metarig_add`) with effectors
#: picked by its topology: the leaf (or near-leaf) bones that end the limbs, tail, neck and
#: fins, chains of 2-4 bones that share no bone. Names were read from the metarigs (the
#: parent chains are printed by `metarig_chains` below).
METARIG_EFFECTORS: dict[str, tuple[Effector, ...]] = {
    # hand <- forearm <- upper_arm; foot <- shin; spine.006 <- .005 <- .004 (disconnected
    # from .003) <- .003, the parent of the shoulders, so the spine chain moves the arms'
    # roots: the chains are coupled.
    "human": (
        Effector("hand.L", 3),
        Effector("hand.R", 3),
        Effector("foot.L", 2),
        Effector("foot.R", 2),
        Effector("spine.006", 4),
    ),
    "basic_human": (
        Effector("hand.L", 3),
        Effector("hand.R", 3),
        Effector("foot.L", 2),
        Effector("foot.R", 2),
        Effector("spine.006", 4),
    ),
    # front_toe <- front_foot <- front_shin; toe <- foot <- shin; spine.011 (head) <- .010
    # <- .009; spine (tail tip) <- spine.001 <- spine.002.
    "basic_quadruped": (
        Effector("front_toe.L", 3),
        Effector("front_toe.R", 3),
        Effector("toe.L", 3),
        Effector("toe.R", 3),
        Effector("spine.011", 3),
        Effector("spine", 3),
    ),
    # Wing.002 <- Wing.001 <- Wing (disconnected from the shoulder); toe <- foot <- shin;
    # head <- neck.002 <- neck.001.
    "bird": (
        Effector("Wing.002.L", 3),
        Effector("Wing.002.R", 3),
        Effector("toe.L", 3),
        Effector("toe.R", 3),
        Effector("head", 3),
    ),
    "cat": (
        Effector("hand.L", 3),
        Effector("hand.R", 3),
        Effector("foot.L", 3),
        Effector("foot.R", 3),
        Effector("tail.004", 3),
    ),
    # f_hoof <- f_toe <- forefoot; r_hoof <- r_toe <- hind_foot; head <- neck.004 <-
    # neck.003; tail.005 <- .004 <- .003.
    "horse": (
        Effector("f_hoof.L", 3),
        Effector("f_hoof.R", 3),
        Effector("r_hoof.L", 3),
        Effector("r_hoof.R", 3),
        Effector("head", 3),
        Effector("tail.005", 3),
    ),
    # side fins, the tail fin, the jaw (jaw.001 <- jaw, disconnected) and the top fin.
    "shark": (
        Effector("side_fin.L.001", 2),
        Effector("side_fin.R.001", 2),
        Effector("back_fin.T.002.Bk", 3),
        Effector("jaw.001", 2),
        Effector("top_fin.001", 2),
    ),
    "wolf": (
        Effector("front_toe.L", 3),
        Effector("front_toe.R", 3),
        Effector("toe.L", 3),
        Effector("toe.R", 3),
        Effector("spine.011", 3),
        Effector("spine", 3),
    ),
}


def metarig(kind: str, effectors: tuple[Effector, ...] | None = None) -> RealRig:
    """Rigify's metarig `kind` ("human", "wolf", ...) as added from the Add menu, in Pose Mode."""
    enable_rigify()
    getattr(bpy.ops.object, f"armature_{kind}_metarig_add")()
    obj = bpy.context.active_object
    enter_pose_mode(obj)
    return RealRig(obj.name, effectors or METARIG_EFFECTORS[kind], character_height(obj), f"metarig:{kind}")


def metarig_chains(obj: bpy.types.Object) -> list[str]:
    """Each leaf bone's parent chain, for choosing effectors (not used by the tests)."""
    lines = []
    for bone in obj.data.bones:
        if not bone.children:
            names = []
            while bone:
                names.append(bone.name)
                bone = bone.parent
            lines.append(" <- ".join(names))
    return lines


#: The Rigify-generated human rig (about 700 bones). The FK controls are parented through
#: MCH bones: hand_fk.L <- MCH-hand_fk.L (Copy Scale) <- forearm_fk.L <- upper_arm_fk.L <-
#: MCH-upper_arm_parent.L, foot_fk.L <- MCH-foot_fk.L <- shin_fk.L <- thigh_fk.L. So the
#: forearm and shin controls, tail at the wrist and ankle, make the clean two-bone chains;
#: chains through the MCH bones are tested as set-ups of their own.
GENERATED_EFFECTORS = (
    Effector("forearm_fk.L", 2),
    Effector("forearm_fk.R", 2),
    Effector("shin_fk.L", 2),
    Effector("shin_fk.R", 2),
)
GENERATED_FOLLOWERS = {
    "ORG-forearm.L": "forearm_fk.L",
    "ORG-forearm.R": "forearm_fk.R",
    "ORG-shin.L": "shin_fk.L",
    "ORG-shin.R": "shin_fk.R",
}
#: Rigify's IK/FK switches live on these bones; 1.0 is FK (the ORG and DEF bones follow the
#: FK controls), 0.0 (the default) IK.
IK_FK_SWITCHES = ("upper_arm_parent.L", "upper_arm_parent.R", "thigh_parent.L", "thigh_parent.R")


def generate_human_rig(path: Path) -> None:
    """Generates Rigify's rig from the human metarig (about 5 s) and saves it to `path`."""
    bpy.ops.wm.read_homefile(use_empty=True)
    enable_rigify()
    bpy.ops.object.armature_human_metarig_add()
    assert bpy.ops.pose.rigify_generate() == {"FINISHED"}
    rig = bpy.context.active_object
    assert rig.name == "rig" and len(rig.pose.bones) > 500, f"generated {rig.name} with {len(rig.pose.bones)} bones"
    for switch in IK_FK_SWITCHES:
        rig.pose.bones[switch]["IK_FK"] = 1.0
    bpy.ops.wm.save_as_mainfile(filepath=str(path))


def generated_rig(path: Path) -> RealRig:
    """The generated rig, loaded from the file `generate_human_rig` saved, in Pose Mode."""
    bpy.ops.wm.open_mainfile(filepath=str(path))
    obj = bpy.data.objects["rig"]
    enter_pose_mode(obj)
    return RealRig(obj.name, GENERATED_EFFECTORS, character_height(obj), "generated:human", dict(GENERATED_FOLLOWERS))


#: CMU clips: file, scale to metres, a frame in mid-motion, effectors. The importer makes
#: every bone disconnected (head at its joint, tail towards the child) in ZYX Euler mode.
MOCAP_RIGS: dict[str, tuple[str, float, int, tuple[Effector, ...]]] = {
    # Character Creator names, 101 bones with twist and share bones beside the limbs.
    "cmu_007_01_cc": (
        "cmu_007_01_cc.bvh",
        0.01,
        80,
        (
            Effector("CC_Base_L_Hand", 3),
            Effector("CC_Base_R_Hand", 3),
            Effector("CC_Base_L_Foot", 2),
            Effector("CC_Base_R_Foot", 2),
            Effector("CC_Base_Head", 3),
        ),
    ),
    # cgspeed names, 31 bones: LeftElbow is the forearm (tail at the wrist), LeftAnkle the
    # foot; LeftWrist is only 6 mm long, so the arms end at the elbow bone.
    "cmu_102_01_max": (
        "cmu_102_01_max.bvh",
        0.056444,
        140,
        (
            Effector("LeftElbow", 2),
            Effector("RightElbow", 2),
            Effector("LeftAnkle", 2),
            Effector("RightAnkle", 2),
            Effector("Head", 3),
        ),
    ),
}


def import_bvh(filename: str, global_scale: float) -> bpy.types.Object:
    """A clip of tests/fixtures/mocap imported with Blender's BVH importer (its defaults:
    Euler keys, one scene frame per file frame from frame 1); the new armature, active."""
    outcome = bpy.ops.import_anim.bvh(filepath=str(MOCAP / filename), global_scale=global_scale)
    assert outcome == {"FINISHED"}, f"the BVH importer refused {filename}: {outcome}"
    return bpy.context.active_object


def mocap_rig(name: str, object_scale: float = 1.0) -> RealRig:
    """A CMU clip imported with Blender's BVH importer, at a frame in mid-motion, the
    armature object scaled by `object_scale` and the bones made that much smaller (the
    same world size: glTF characters made in centimetres come in like that). The action
    keeps animating the bones: a solve writes the pose channels, which hold until the frame
    changes, so the checks read the pose right after the solve."""
    filename, scale, frame, effectors = MOCAP_RIGS[name]
    obj = import_bvh(filename, scale / object_scale)
    obj.scale = (object_scale,) * 3
    bpy.context.scene.frame_set(frame)
    enter_pose_mode(obj)
    label = f"mocap:{name}" + (f"@x{object_scale:g}" if object_scale != 1.0 else "")
    return RealRig(obj.name, effectors, character_height(obj), label, vary_rotation_modes=False)


# --- Poses, targets and measurements -----------------------------------------------------


def chain_bones(obj: bpy.types.Object, effectors: tuple[Effector, ...]) -> list[str]:
    """The bones the effectors may move, in order, each once."""
    names: list[str] = []
    for effector in effectors:
        pose_bone = obj.pose.bones[effector.bone]
        for _ in range(effector.chain_length):
            if pose_bone is None:
                break
            if pose_bone.name not in names:
                names.append(pose_bone.name)
            pose_bone = pose_bone.parent
    return names


CHANNELS = ("location", "rotation_quaternion", "rotation_euler", "rotation_axis_angle", "scale")


def channels(pose_bone: bpy.types.PoseBone) -> dict[str, object]:
    """Every pose channel of a bone, exactly, and its rotation mode."""
    found: dict[str, object] = {name: tuple(getattr(pose_bone, name)) for name in CHANNELS}
    found["rotation_mode"] = pose_bone.rotation_mode
    found["euler_order"] = pose_bone.rotation_euler.order
    return found


def restore_channels(pose_bone: bpy.types.PoseBone, saved: dict[str, object]) -> None:
    pose_bone.rotation_mode = saved["rotation_mode"]
    for name in CHANNELS:
        setattr(pose_bone, name, saved[name])


def set_rotation_mode_keeping_pose(pose_bone: bpy.types.PoseBone, mode: str) -> None:
    """Switches a bone's rotation mode as the UI does: the pose stays (Blender decomposes an
    assigned matrix_basis into the bone's own mode)."""
    basis = pose_bone.matrix_basis.copy()
    pose_bone.rotation_mode = mode
    pose_bone.matrix_basis = basis


def basis_matrices(obj: bpy.types.Object) -> np.ndarray:
    """Every pose bone's matrix_basis, (n, 16), exactly as stored."""
    flat = np.empty(len(obj.pose.bones) * 16, np.float32)
    obj.pose.bones.foreach_get("matrix_basis", flat)
    return flat.reshape(-1, 16)


def evaluated_point(obj: bpy.types.Object, bone: str, use_tail: bool) -> Vector:
    """A bone's head or tail in world space, in the pose Blender evaluated (constraints,
    drivers and the action applied)."""
    depsgraph = bpy.context.evaluated_depsgraph_get()
    evaluated = obj.evaluated_get(depsgraph)
    pose_bone = evaluated.pose.bones[bone]
    return evaluated.matrix_world @ (pose_bone.tail if use_tail else pose_bone.head)


def random_turn(rng: np.random.Generator, spread_degrees: float) -> Matrix:
    axis = Vector(rng.normal(size=3)).normalized()
    return Matrix.Rotation(math.radians(spread_degrees) * rng.uniform(-1.0, 1.0), 4, axis)


def fk_targets(
    obj: bpy.types.Object,
    effectors: tuple[Effector, ...],
    seed: int,
    spread_degrees: float = SPREAD_DEGREES,
    jointly: bool = True,
    turned: tuple[Effector, ...] | None = None,
) -> list[Vector]:
    """Effector points of a random pose of the chains, and the pose restored exactly.

    `jointly`: every chain is turned at once and the points read together, so one pose
    reaches all targets. Otherwise each chain is turned on its own from the start pose,
    so the targets need not be reachable together (coupled chains). `turned`: the chains
    turned instead of the effectors' own (for bones that follow others by constraints)."""
    rng = np.random.default_rng(seed)
    bones = chain_bones(obj, turned or effectors)
    saved = {name: channels(obj.pose.bones[name]) for name in bones}

    def turn(names: list[str]) -> None:
        for name in names:
            pose_bone = obj.pose.bones[name]
            pose_bone.matrix_basis = pose_bone.matrix_basis @ random_turn(rng, spread_degrees)

    def restore() -> None:
        for name in bones:
            restore_channels(obj.pose.bones[name], saved[name])
        rigs.update()

    points: list[Vector] = []
    if jointly:
        turn(bones)
        rigs.update()
        points = [evaluated_point(obj, e.bone, e.use_tail).copy() for e in effectors]
        restore()
    else:
        for effector in effectors:
            turn(chain_bones(obj, (effector,)))
            rigs.update()
            points.append(evaluated_point(obj, effector.bone, effector.use_tail).copy())
            restore()
    return points


def set_effectors(obj: bpy.types.Object, effectors: tuple[Effector, ...], points: list[Vector]) -> None:
    """An Empty at each of `points` (reused by name) and one effector each, replacing any
    effectors."""
    obj.tendon.effectors.clear()
    for effector, point in zip(effectors, points, strict=True):
        target = bpy.data.objects.get(f"target.{effector.bone}") or rigs.empty(f"target.{effector.bone}", point)
        target.location = point
        entry = obj.tendon.effectors.add()
        entry.bone, entry.target, entry.chain_length = effector.bone, target, effector.chain_length
        entry.use_tail = effector.use_tail
    rigs.activate(obj)
    rigs.update()


def world_scale(obj: bpy.types.Object) -> float:
    """The armature object's largest world scale factor: armature-space lengths times this
    bound world lengths."""
    return max(obj.matrix_world.to_3x3().to_scale())


@dataclass
class Solve:
    """One solve: what the operator said and what Blender shows afterwards."""

    finished: bool
    message: str  # the error when refused, else the status line
    status: str


def solve() -> Solve:
    """Presses Solve IK. A refusal (operator error) is a result here, not an exception."""
    obj = bpy.context.active_object
    try:
        finished = bpy.ops.tendon.solve() == {"FINISHED"}
        message = obj.tendon.status
    except RuntimeError as error:
        finished, message = False, str(error)
    rigs.update()
    return Solve(finished, message, obj.tendon.status)


CLAIMED_ERROR = re.compile(r"largest error ([-+0-9.eE]+|nan|inf)")


def claims_reached(status: str) -> bool:
    return "reached" in status and "not reached" not in status


def status_problems(status: str, worst_world: float, height: float, scale: float) -> list[str]:
    """Ways the status line misrepresents what Blender shows. `worst_world`: the largest
    world distance from an effector to its target."""
    problems = []
    if claims_reached(status) and worst_world > TOLERANCE * height:
        problems.append(f"status claims reached while an effector is {worst_world / height:.2e} x height off")
    claimed = CLAIMED_ERROR.search(status)
    if claimed:
        # The solver's residual is in armature space: world / scale bounds it from below.
        # The status prints two significant digits (up to 5% rounding).
        value = float(claimed.group(1))
        if not value * 1.05 >= worst_world / scale - TOLERANCE * height / scale:
            problems.append(f"status claims a largest error of {value:.2g}, Blender shows {worst_world / scale:.2g}")
    return problems


@dataclass
class Trial:
    seed: int
    #: Largest effector (or follower) distance to its target over the height, and whose.
    worst: float
    worst_bone: str
    status: str
    refused: bool
    #: Failed requirements other than reaching (status, unmoved bones, modes, undo).
    problems: list[str]

    @property
    def reached(self) -> bool:
        return not self.refused and self.worst <= TOLERANCE

    def line(self) -> str:
        state = "refused" if self.refused else f"worst {self.worst:.2e} x height ({self.worst_bone})"
        return f"seed {self.seed}: {state}; status: {self.status[:160]!r}"


def vary_rotation_modes(obj: bpy.types.Object, bones: list[str], seed: int) -> None:
    """Puts the chain bones in every rotation mode in turn (the pose kept), so writing back
    in each bone's own mode is exercised on real chains."""
    for index, name in enumerate(bones):
        set_rotation_mode_keeping_pose(obj.pose.bones[name], rigs.ROTATION_MODES[(index + seed) % 8])
    rigs.update()


def run_trial(rig: RealRig, solver: str, seed: int, check_undo: bool) -> Trial:
    """Jointly reachable targets from `seed`, one solve, and every check on the result."""
    obj = rig.obj
    bones = chain_bones(obj, rig.effectors)
    if rig.vary_rotation_modes:
        vary_rotation_modes(obj, bones, seed)
    points = fk_targets(obj, rig.effectors, seed)
    set_effectors(obj, rig.effectors, points)
    obj.tendon.solver = solver
    names = [b.name for b in obj.pose.bones]
    outside = np.array([name not in bones for name in names])
    before_basis = basis_matrices(obj)
    before_channels = {name: channels(obj.pose.bones[name]) for name in bones}
    if check_undo:
        bpy.ops.ed.undo_push(message="start")
    result = solve()
    if check_undo:
        # Headless, operators run from scripts push no undo step: push the one the UI would.
        bpy.ops.ed.undo_push(message="Solve IK")

    problems: list[str] = []
    errors: dict[str, float] = {}
    for effector, point in zip(rig.effectors, points, strict=True):
        errors[effector.bone] = (evaluated_point(obj, effector.bone, effector.use_tail) - point).length
    by_bone = {e.bone: p for e, p in zip(rig.effectors, points, strict=True)}
    for follower, leader in rig.followers.items():
        errors[follower] = (evaluated_point(obj, follower, True) - by_bone[leader]).length
    worst_bone = max(errors, key=lambda name: errors[name])
    worst_world = errors[worst_bone]
    if result.finished:
        problems += status_problems(result.status, worst_world, rig.height, world_scale(obj))
    after_basis = basis_matrices(obj)
    moved = np.abs(after_basis - before_basis).max(axis=1)
    for index in np.nonzero(outside & (moved > UNMOVED))[0]:
        problems.append(f"{names[index]} is outside every chain but its matrix_basis moved by {moved[index]:.2g}")
    if not np.isfinite(after_basis).all():
        problems.append("non-finite pose written")
    for name in bones:
        old, new = before_channels[name], channels(obj.pose.bones[name])
        if new["rotation_mode"] != old["rotation_mode"]:
            problems.append(f"{name}: rotation mode {old['rotation_mode']} became {new['rotation_mode']}")
        mode = old["rotation_mode"]
        active = {"QUATERNION": "rotation_quaternion", "AXIS_ANGLE": "rotation_axis_angle"}.get(mode, "rotation_euler")
        for channel in ("rotation_quaternion", "rotation_euler", "rotation_axis_angle"):
            if channel != active and new[channel] != old[channel]:
                problems.append(f"{name} ({mode}): inactive channel {channel} changed {old[channel]} -> {new[channel]}")
    if check_undo:
        bpy.ops.ed.undo()
        restored = basis_matrices(rig.obj)
        if not np.array_equal(restored, before_basis):
            gap = float(np.abs(restored - before_basis).max())
            problems.append(f"undo did not restore the pose exactly (off by {gap:.2g})")
    return Trial(seed, worst_world / rig.height, worst_bone, result.message, not result.finished, problems)


def trial_report(rig: RealRig, solver: str, trials: list[Trial]) -> str:
    rate = sum(t.reached for t in trials) / len(trials)
    lines = [f"{rig.label} {solver}: reached {rate:.0%} of {len(trials)} trials (height {rig.height:.3f})"]
    lines += ["  " + t.line() for t in trials]
    lines += ["  " + p for t in trials for p in t.problems]
    return "\n".join(lines)


# --- Set-ups real rigs have (issue 13, point 3) -------------------------------------------


def correct_or_refused(
    obj: bpy.types.Object,
    effectors: tuple[Effector, ...],
    points: list[Vector],
    culprits: tuple[str, ...],
    reasons: tuple[str, ...],
) -> str:
    """Solves and asserts the outcome is either right (every effector within TOLERANCE x
    height of its target in the evaluated world pose, status truthful) or a refusal that
    names one of the `culprits` bones and says why (one of the `reasons` words), with the
    pose untouched when the whole solve is refused. Never a silent miss. Returns which."""
    height = character_height(obj)
    before = basis_matrices(obj)
    result = solve()
    named = any(c in result.message for c in culprits) and any(r in result.message.lower() for r in reasons)
    errors = {
        e.bone: (evaluated_point(obj, e.bone, e.use_tail) - p).length for e, p in zip(effectors, points, strict=True)
    }
    worst = max(errors.values())
    if not result.finished:
        assert named, f"refused without naming one of {culprits} and a reason ({reasons}): {result.message!r}"
        assert np.array_equal(basis_matrices(obj), before), "a refused solve changed the pose"
        return "refused"
    problems = status_problems(result.status, worst, height, world_scale(obj))
    assert not problems, "; ".join(problems) + f"; status: {result.status!r}"
    if named:
        return "refused"
    detail = ", ".join(f"{bone} {error / height:.2e}" for bone, error in errors.items())
    assert worst <= TOLERANCE * height, (
        f"missed without naming one of {culprits} and why: errors x height {detail}; status {result.status!r}"
    )
    return "solved"


def setup_trials(
    obj: bpy.types.Object,
    effectors: tuple[Effector, ...],
    culprits: tuple[str, ...],
    reasons: tuple[str, ...],
    seeds: range = range(3),
    solver: str = "FABRIK",
    prepare: Callable[[], None] | None = None,
    turned: tuple[Effector, ...] | None = None,
) -> list[str]:
    """`correct_or_refused` for jointly reachable targets from each seed, starting each
    time from the same pose."""
    bones = chain_bones(obj, turned or effectors)
    start = {name: channels(obj.pose.bones[name]) for name in bones}
    outcomes = []
    for seed in seeds:
        for name in bones:
            restore_channels(obj.pose.bones[name], start[name])
        if prepare:
            prepare()
        rigs.update()
        points = fk_targets(obj, effectors, seed, turned=turned)
        set_effectors(obj, effectors, points)
        obj.tendon.solver = solver
        outcomes.append(correct_or_refused(obj, effectors, points, culprits, reasons))
    return outcomes


def chain_rows(
    count: int,
    offset: tuple[float, float, float] = (0.0, 0.0, 0.0),
    rolls: tuple[float, ...] | None = None,
    with_root: bool = True,
) -> list[tuple[str, str | None, tuple, tuple, float]]:
    """Rows for `rigs.armature`: an optional `root` bone, then a bent chain b0..b{count-1}
    of 0.5 m bones, each head `offset` from its parent's tail (zero: connected)."""
    rows: list[tuple[str, str | None, tuple, tuple, float]] = []
    head = Vector((0.0, 0.0, 0.0))
    parent = None
    if with_root:
        rows.append(("root", None, (0.0, 0.0, -0.4), (0.0, 0.0, 0.0), 0.0))
        parent = "root"
    for i in range(count):
        start = head + (Vector(offset) if i else Vector())
        angle = 0.35 * i
        tail = start + 0.5 * Vector((0.15 * i, math.cos(angle), math.sin(angle)))
        roll = rolls[i] if rolls else 0.0
        rows.append((f"b{i}", parent, tuple(start), tuple(tail), roll))
        parent, head = f"b{i}", tail
    return rows
