"""Baking: an armature's effectors (and spring chains) solved over a frame range and keyed.

Sampling gathers, per frame, the targets' world matrices and, when the scene must be
evaluated frame by frame, the animated pose; `space.armature_targets` turns the targets
into armature space for every frame at once, one native call solves every frame, and
``keys.py`` writes the keys in bulk. The fast path reads plain target F-curves directly
(one native call per curve) without changing frame at all.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any

import bpy
import numpy as np
from mathutils import Vector

from . import keys, native, pose, space, spring_input
from .live import live_suspended
from .native import TendonUserError
from .rig import RigEntry
from .solve import (
    UNCHANGED,
    apply_scales,
    armature_problem,
    chain_bones,
    chain_scale_goals,
    current_goals,
    drop_unsolvable,
    effector_label,
    first_too_far,
    inherited_scale,
    non_uniform_scales,
    rest_position_problem,
    rigify_switch,
    scale_targets,
    set_reference,
    solver_for,
    switch_advice,
    too_far,
    world_scale,
)


@dataclass
class BakeSettings:
    """What `Baker` bakes and where the keys go."""

    frame_start: int
    frame_end: int
    step: int = 1
    #: Key every bone (True) or only the bones the effectors' chains move.
    all_bones: bool = False
    #: Keys go into a new action (a copy of the current one) or replace the baked range
    #: and channels of the current action.
    new_action: bool = True
    #: Each frame starts from the previous frame's solution (True) or from the animated pose.
    path_dependent: bool = True
    interpolation: str = "LINEAR"


@dataclass
class BakeOutcome:
    frames: int
    bones: int
    keys: int
    seconds: float
    sampling: str
    frames_reached: int
    largest_error: float
    action: str
    warnings: list[str]
    #: How many goals were baked (0: spring chains alone).
    goals: int = 1
    #: Whether Blender's pose, measured at a few frames, missed what the solve reached.
    unshown: bool = False
    #: What was checked and found well (said as information, not warnings).
    notes: list[str] = field(default_factory=list)

    def summary(self) -> str:
        baked = f"Baked {self.frames} frame(s) of {self.bones} bone(s) into '{self.action}': {self.keys} keys "
        if not self.goals:
            # Spring chains alone: no target to read or reach.
            return baked + f"in {self.seconds:.2f} s (spring chains only)"
        reached = (
            f"the solve reached the targets on {self.frames_reached} frame(s) but Blender's pose does not"
            if self.unshown
            else f"targets reached on {self.frames_reached} frame(s)"
        )
        return baked + f"in {self.seconds:.2f} s ({self.sampling}); {reached}, largest error {self.largest_error:.2g}"


#: Frames sampled per step when the scene is evaluated frame by frame (a progress tick).
SAMPLE_CHUNK = 25


class Baker:
    """Bakes an armature's effectors over a frame range, in steps the UI can show and
    cancel: `step()` samples the targets (and, when needed, the animated pose) a chunk of
    frames at a time, `finish()` solves every frame in one native call and writes the keys,
    `cancel()` puts the scene back. Nothing in the file changes before `finish()`."""

    def __init__(self, scene: bpy.types.Scene, obj: bpy.types.Object, settings: BakeSettings) -> None:
        problem = armature_problem(obj, need_pose_mode=False) or rest_position_problem(obj)
        if problem:
            raise TendonUserError(problem)
        if settings.step < 1:
            raise TendonUserError(f"Frame step {settings.step} must be at least 1")
        refusal = keys.action_refusal(obj, settings.new_action)
        if refusal:
            raise TendonUserError(refusal)
        self.frames = np.arange(settings.frame_start, settings.frame_end + 1, settings.step)
        if len(self.frames) == 0:
            raise TendonUserError(
                f"Frame range {settings.frame_start} to {settings.frame_end} is empty: "
                "the start frame is after the end frame"
            )
        if self.frames[-1] != settings.frame_end:
            # A step that does not divide the range still keys its last frame (else the
            # frames after the last step kept old keys the range was to replace).
            self.frames = np.append(self.frames, settings.frame_end)
        self.started = time.perf_counter()
        self.scene, self.obj, self.settings = scene, obj, settings
        self.original_frame = (scene.frame_current, scene.frame_subframe)
        self.entry, basis, self.found = current_goals(obj)
        # A bone whose pose is not finite skips the goals whose chains it moves (named by
        # `drop_unsolvable`) and is keyed by none; every other bone is read as usual.
        (finite_basis,), not_finite = pose.finite_rows(basis)
        channels = pose.channel_pose(obj, self.entry, finite_basis)
        if self.found.goals:
            # The same refusals as a single solve, judged at the current frame.
            drop_unsolvable(obj, self.entry, self.found, basis, pose.read_matrices(obj, self.entry, "matrix"))
        self.springs = spring_chains(obj, self.entry, self.found.warnings)
        if not self.found.goals and not self.springs:
            reasons = "; ".join(self.found.warnings) or "add an effector or a spring chain first"
            raise TendonUserError(f"Armature '{obj.name}' has nothing to bake: {reasons}")
        self.solver = solver_for(obj.tendon)
        if self.found.goals:
            set_reference(self.solver, obj, self.entry, channels[0])
        chains: set[int] = set()
        for bone, chain_length in self.found.chains:
            chains.update(chain_bones(self.entry, bone, chain_length))
        #: The bones the goals turn (rig indices): each frame's start takes their rotations
        #: from their channels and every other bone from Blender's evaluated pose.
        self.goal_bones = np.array(sorted(chains), np.int64)
        for spring in self.springs:
            # Springs swing their bones after the solve: an effector's chain among them
            # loses the reach the solve measured (the bake's figures are the solve's).
            shared = [self.entry.names[b] for b in spring.bones if b in chains]
            if shared:
                self.found.warnings.append(
                    f"spring chain {spring.item + 1} ('{obj.tendon.springs[spring.item].bone}') swings "
                    f"bone '{shared[0]}', which an effector's chain solves: the springs run after the "
                    "solve, so the reach reported is the solve's, not the keys'"
                )
        #: Spring bones outside the goals' chains swing from the animation beneath earlier
        #: spring bakes when the action holds one (`spring_input`), else from their own.
        self.spring_bones = sorted({b for spring in self.springs for b in spring.bones} - chains)
        anim = obj.animation_data
        self.spring_source = spring_input.input_of(anim.action if anim else None) if self.springs else None
        for spring in self.springs:
            chains.update(spring.bones)
        self.scale_plans = scale_targets(obj, self.entry, self.found)
        self.scaled = sorted({b for plan in self.scale_plans for b in plan.bones})
        #: The bones the solve and the springs turn; any other keyed bone (Bones: All) keys
        #: its own channels.
        self.turned = frozenset(chains)
        keyed = range(len(self.entry.names)) if settings.all_bones else sorted(chains)
        self.keyed = [bone for bone in keyed if bone not in not_finite]
        pose_bones = obj.pose.bones
        written = [
            (self.entry.names[b], pose.rotation_channel(pose_bones[self.entry.names[b]].rotation_mode)[0])
            for b in self.keyed
        ]
        written += [(self.entry.names[b], "scale") for b in self.scaled]
        # (The location of a root `move_root` moves is checked once the solve says which.)
        muted = keys.muted_channel(obj, written)
        if muted:
            raise TendonUserError(muted)
        affecting = set()
        for bone in chains:
            affecting.update(chain_bones(self.entry, bone, 0))
        self.affecting = affecting
        #: Bones of or above the chains that constraints or drivers place (`shaped_bones`).
        self.shaped = self.shaped_bones(affecting)
        self.slow_reason = self.needs_scene_evaluation(affecting)
        frames, goals, n = len(self.frames), len(self.found.goals), len(self.entry.names)
        effectors = [obj.tendon.effectors[i] for i in self.found.effectors]
        self.effectors = effectors
        #: Effectors on a generated Rigify rig's limb controls: (goal, switch bone, the value
        #: that shows the controls), and the switches' values at each frame the scene is
        #: evaluated (drivers and NLA set them there).
        self.switches = [
            (k, known[0].name, known[2])
            for k, effector in enumerate(effectors)
            if (known := rigify_switch(obj, effector.bone)) is not None
        ]
        self.switch_values = np.full((len(self.frames), len(self.switches)), np.nan)
        self.uses_rotation = any(g.rotation is not None for g in self.found.goals)
        self.uses_pole = any(g.pole is not None for g in self.found.goals)
        #: Per frame, world to armature space (frames, 4, 4), the targets' world points
        #: (frames, goals, 3) and rotations (frames, goals, 3, 3, when a goal has a rotation
        #: target), and the poles' world points (frames, goals, 3).
        self.to_armature = np.empty((frames, 4, 4), np.float64)
        self.target_points = np.empty((frames, goals, 3), np.float64)
        self.target_turns = np.empty((frames, goals, 3, 3), np.float64) if self.uses_rotation else None
        self.pole_points = np.zeros((frames, goals, 3), np.float64)
        self.scale_goals = np.ones((frames, len(self.scale_plans), 3), np.float32)
        self.per_frame_pose = self.slow_reason is not None
        if self.per_frame_pose:
            self.basis = np.empty((frames, n * 16), np.float32)
        #: Each frame's evaluated pose (frames, n * 16, rig order), read when constraints or
        #: drivers place bones of or above the chains elsewhere than their channels.
        self.evaluated = np.empty((frames, n * 16), np.float32) if self.shaped else None
        self.static_pose = channels
        self.sampled = 0
        #: Rotations of bones scaled to zero on an axis, from their channels: (frame index,
        #: bone) -> (w, x, y, z) (see `pose.collapsed_rotations`).
        self.collapsed: dict[tuple[int, int], tuple[float, ...]] = {}
        #: Bones whose translation the solve changed (a root with `move_root`).
        self.moved: list[int] = []
        self.pose: tuple[np.ndarray, ...] = channels
        #: Whether Blender's evaluated pose missed targets the solve reached (`evaluated_check`).
        self.unshown = False
        #: Per frame, the solve's largest distance from a target (armature space).
        self.residuals = np.zeros(0, np.float64)

    # The fast path reads target F-curves directly; anything it cannot see through (parents,
    # constraints, drivers, NLA, animated chains) makes the bake evaluate the scene per frame.
    def shaped_bones(self, affecting: set[int]) -> list[str]:
        """The bones of or above the chains that unmuted constraints, drivers or
        inheritance options other than Blender's defaults place: the solve would model them
        from their channels, so each frame starts from where Blender's evaluated pose has
        them (a Damped Track on the bone a chain hangs from had every key 0.4-2 off; Inherit
        Rotation off or Inherit Scale None above it, 1.7-1.9 off while the status said
        reached)."""
        pose_bones, names, entry = self.obj.pose.bones, self.entry.names, self.entry
        return [
            names[b]
            for b in sorted(affecting)
            if b in entry.driven
            or b in entry.no_inherit_rotation
            or b in entry.inherit_scale
            or b in entry.parent_space_location
            or (
                b in self.entry.constrained
                and any(not c.mute and c.influence > 0 for c in pose_bones[names[b]].constraints)
            )
        ]

    def needs_scene_evaluation(self, affecting: set[int]) -> str | None:
        obj = self.obj
        if self.shaped:
            return f"bone '{self.shaped[0]}' has constraints, drivers or inheritance options"
        if obj.parent is not None or len(obj.constraints):
            return f"armature '{obj.name}' has a parent or constraints"
        reason = animation_reason(obj, allowed_paths=())
        if reason:
            animated_bones = animated_pose_bones(obj)
            names = {self.entry.names[i] for i in affecting}
            if reason != "pose bones" or (self.settings.all_bones and animated_bones) or animated_bones & names:
                return f"armature '{obj.name}' is animated ({reason})"
        for position in self.found.effectors:
            effector = obj.tendon.effectors[position]
            for target, subtarget in space.target_objects(effector):
                if subtarget and target.type == "ARMATURE":
                    return f"a target is the bone '{subtarget}'"
                if target.parent is not None or len(target.constraints):
                    return f"target '{target.name}' has a parent or constraints"
                if (
                    any(target.delta_location)
                    or any(target.delta_rotation_euler)
                    or target.delta_scale[:]
                    != (
                        1.0,
                        1.0,
                        1.0,
                    )
                ):
                    return f"target '{target.name}' has delta transforms"
                allowed = ("location", "scale") if effector.use_rotation or effector.use_scale else ("location",)
                reason = animation_reason(target, allowed_paths=allowed)
                if reason:
                    return f"target '{target.name}' is animated ({reason})"
        return None

    @property
    def sampling(self) -> str:
        if self.slow_reason:
            return f"scene evaluated per frame: {self.slow_reason}"
        return "target F-curves read directly"

    def step(self) -> float:
        """Samples the next chunk of frames; returns the fraction sampled so far."""
        with live_suspended():
            if self.per_frame_pose:
                self.sample_scene(self.sampled, min(self.sampled + SAMPLE_CHUNK, len(self.frames)))
            else:
                self.sample_fcurves()
        return self.sampled / len(self.frames)

    def sample_fcurves(self) -> None:
        """Every frame at once from the targets' F-curves: their world locations (no
        parent, constraint or delta transform moves them), the rest of each target's
        matrix as it is now."""
        self.to_armature[:] = np.array(space.world_to_armature(self.obj), np.float64)
        for k, effector in enumerate(self.effectors):
            self.target_points[:, k] = object_locations(effector.target, self.frames)
            if self.target_turns is not None:
                self.target_turns[:, k] = np.array(effector.target.matrix_world.to_3x3(), np.float64)
            if effector.pole_target is not None:
                self.pole_points[:, k] = object_locations(effector.pole_target, self.frames)
        armature_scale = np.array(self.obj.matrix_world.to_scale(), np.float32)
        for k, plan in enumerate(self.scale_plans):
            target = self.obj.tendon.effectors[plan.effector].target
            self.scale_goals[:, k] = object_channel(target, "scale", self.frames) / (
                armature_scale * inherited_scale(self.obj, self.entry, plan)
            )
        self.sampled = len(self.frames)

    def sample_scene(self, first: int, end: int) -> None:
        """Frames `first` to `end` (indices) from the evaluated scene, one by one."""
        obj, scene, entry = self.obj, self.scene, self.entry
        for t in range(first, end):
            frame = int(self.frames[t])
            scene.frame_set(frame)
            self.to_armature[t] = space.world_to_armature(obj, frame)
            for k, effector in enumerate(self.effectors):
                label = effector_label(self.found.effectors[k], effector.bone)
                target = space.target_world_matrix(effector.target, effector.subtarget, label)
                self.target_points[t, k] = target.translation
                if self.target_turns is not None:
                    self.target_turns[t, k] = target.to_3x3()
                if effector.pole_target is not None:
                    pole = space.target_world_matrix(effector.pole_target, effector.pole_subtarget, label)
                    self.pole_points[t, k] = pole.translation
            if self.scale_plans:
                self.scale_goals[t] = chain_scale_goals(obj, entry, self.scale_plans)
            for column, (_, name, _) in enumerate(self.switches):
                value = obj.pose.bones[name].get("IK_FK")
                if isinstance(value, (int, float)):
                    self.switch_values[t, column] = value
            obj.pose.bones.foreach_get("matrix_basis", self.basis[t])
            if not entry.pose_in_order:
                self.basis[t] = self.basis[t].reshape(-1, 16)[entry.pose_order].ravel()
            if self.evaluated is not None:
                self.evaluated[t] = pose.read_matrices(obj, entry, "matrix").ravel()
            (finite,), not_finite = pose.finite_rows(self.basis[t].reshape(-1, 16))
            if not_finite:
                at_fault = [bone for bone in not_finite if bone in self.affecting]
                if at_fault:
                    reason = pose.non_finite_reason(obj, entry, not_finite, at_fault[0])
                    raise TendonUserError(f"Armature '{obj.name}' at frame {frame}: {reason}; nothing baked")
                self.basis[t] = finite.ravel()
            frame_basis = self.basis[t].reshape(-1, 4, 4)[:, :3, :3]
            # Bones scaled to zero on an axis lose their rotation in the matrix: keep their
            # channels' (a cheap test, and nothing more, for every usual frame).
            if np.einsum("bij,bij->bi", frame_basis, frame_basis).min() <= pose.COLLAPSED_SCALE**2:
                scales = np.linalg.norm(frame_basis, axis=2)
                for bone, rotation in pose.collapsed_rotations(obj, entry, scales).items():
                    self.collapsed[(t, bone)] = rotation
        self.sampled = end

    def solve(self) -> Any:
        tendon = native.native()
        targets = space.armature_targets(
            self.to_armature, self.target_points, self.target_turns, self.pole_points if self.uses_pole else None
        )
        far = first_too_far(targets)
        if far is not None:
            # As a single solve refuses it (`solve.native_goal`): no distance to it is finite.
            what, t, k = far
            label = effector_label(self.found.effectors[k], self.effectors[k].bone)
            point = (targets.points if what == "target" else targets.poles)[t, k]
            raise TendonUserError(
                f"Armature '{self.obj.name}': {too_far(label, what, point)}, at frame {self.frames[t]:g}; nothing baked"
            )
        extra: dict[str, Any] = {}
        if self.uses_rotation:
            extra["rotation_targets"] = targets.rotations
        if self.uses_pole:
            extra["poles"] = targets.poles
        self.pose = self.frame_poses()
        try:
            return self.solver.solve_frames(
                self.entry.rig,
                self.found.goals,
                targets.points,
                *self.pose,
                warm=self.settings.path_dependent,
                **extra,
            )
        except tendon.TendonError as error:
            raise TendonUserError(f"Armature '{self.obj.name}': {error}") from error

    def frame_poses(self) -> tuple[np.ndarray, ...]:
        """The start pose: one, or one per frame (animated, or with scale targets applied)."""
        n, frames = len(self.entry.names), len(self.frames)
        if self.per_frame_pose and self.evaluated is not None:
            rig = self.entry.rig
            start = (
                np.empty((frames, n, 4), np.float32),
                np.empty((frames, n, 3), np.float32),
                np.empty((frames, n, 3), np.float32),
            )
            for t in range(frames):
                rotations, translations, scales, *_ = rig.start_pose(
                    self.basis[t].reshape(n, 4, 4),
                    self.evaluated[t].reshape(n, 4, 4),
                    self.goal_bones,
                    column_major=True,
                )
                start[0][t], start[1][t], start[2][t] = rotations, translations, scales
            for (t, bone), rotation in self.collapsed.items():
                start[0][t, bone] = rotation
        elif self.per_frame_pose:
            start = pose.channel_pose(self.obj, self.entry, self.basis.reshape(frames, n, 16), current=False)
            for (t, bone), rotation in self.collapsed.items():
                start[0][t, bone] = rotation
        elif self.scale_plans or self.springs:
            start = tuple(np.repeat(array[None], frames, axis=0) for array in self.static_pose)
        else:
            return self.static_pose
        if self.scale_plans:
            scales = start[2].copy()
            short: list[str] = []
            for t in range(frames):
                short = short or apply_scales(self.scale_plans, self.scale_goals[t], scales[t])
            # What the limits cannot make up, once (as a single solve says it).
            self.found.warnings += short[:1]
            start = (start[0], start[1], scales)
        return start

    def simulate_springs(self, rotations: np.ndarray) -> np.ndarray:
        """Runs each spring chain through the frame range on top of the solved pose."""
        if not self.springs:
            return rotations
        tendon, scene = native.native(), self.scene
        fps = scene.render.fps / scene.render.fps_base
        # Each frame's own gap: a step that does not divide the range ends on a shorter one
        # (simulated as a whole step, the last frame's tail was 0.175 off on a 0.95 chain).
        dt: Any = self.settings.step / fps
        if len(self.frames) > 1:
            dt = np.diff(self.frames).astype(np.float32) / np.float32(fps)
        gravity = np.array(scene.gravity if scene.use_gravity else (0.0, 0.0, 0.0), np.float64)
        # The world's down in armature space at each frame: an armature that turns over the
        # range (a roll, a cartwheel) turns it (one direction for all frames hung its chains
        # towards the armature's old down).
        turns = (
            self.to_armature[:, :3, :3] if self.sampled else np.array(space.world_to_armature(self.obj))[None, :3, :3]
        )
        down = np.broadcast_to(turns @ gravity, (len(self.frames), 3)).astype(np.float32)
        # The armature object's own motion swings the chains (they keep their place in the
        # world and lag behind it): its world matrix at each frame.
        objects = np.linalg.inv(self.to_armature).astype(np.float32) if self.sampled else None
        _, translations, scales = self.pose
        if self.spring_source is not None:
            beneath = spring_input.input_rotations(
                self.obj, self.entry, self.spring_source, self.spring_bones, self.frames.astype(np.float32)
            )
            if beneath:
                rotations = np.array(rotations, np.float32)
                for bone, values in beneath.items():
                    rotations[:, bone] = values
        for spring in self.springs:
            item = self.obj.tendon.springs[spring.item]
            armature_gravity = Vector(down[0] * item.gravity)
            try:
                simulation = tendon.SpringSimulation(
                    self.entry.rig,
                    # `mass` is the tip's against the chain's other joints (1 each): the
                    # same mass everywhere cancelled out (a setting that did nothing).
                    [(spring.tip, spring.chain_length, [1.0] * (len(spring.bones) - 1) + [item.mass])],
                    gravity=tuple(armature_gravity),
                    damping=item.damping,
                    stiffness=item.stiffness,
                )
                rotations = simulation.simulate(
                    rotations,
                    dt,
                    translations,
                    scales,
                    gravity=np.ascontiguousarray(down * item.gravity),
                    object_matrices=objects,
                )
            except tendon.TendonError as error:
                raise TendonUserError(f"Spring chain of bone '{item.bone}': {error}") from error
        return rotations

    def finish(self) -> BakeOutcome:
        """Solves every frame in one call and writes the keys."""
        while self.sampled < len(self.frames):
            self.step()
        if self.scale_plans:
            self.found.warnings += non_uniform_scales(self.scale_plans, self.scale_goals, self.frames)
        if self.per_frame_pose:
            self.restore_frame()
        if self.found.goals:
            result = self.solve()
            # In world units, as every status gives distances (the armature may be scaled).
            # Frames where a Rigify limb shows its IK chain do not count: its FK controls
            # reach, its deforming bones follow the IK chain (a bake said every frame
            # reached with the hand 14 cm off; QA helper).
            on_fk = self.fk_switch_frames()
            reached = int(np.count_nonzero(result.reached & on_fk))
            largest = float(result.residual.max()) * world_scale(self.obj)
            self.residuals = np.asarray(result.residual, np.float64)
            solved = result.rotations
            if self.obj.tendon.move_root:
                # The root's solved translations feed the springs and are keyed.
                translations = result.translations
                start = self.pose[1] if self.pose[1].ndim == 3 else np.broadcast_to(self.pose[1], translations.shape)
                self.moved = sorted(np.nonzero(np.abs(translations - start).max(axis=(0, 2)) > UNCHANGED)[0].tolist())
                self.pose = (self.pose[0], translations, self.pose[2])
        else:
            self.pose = self.frame_poses()
            reached, largest, solved = len(self.frames), 0.0, self.pose[0]
        solved = self.simulate_springs(solved)
        solved = self.with_own_channels(solved)
        if not np.isfinite(solved).all():
            raise TendonUserError(
                f"Armature '{self.obj.name}': the solver produced non-finite rotations; nothing baked"
            )
        obj, tendon, names = self.obj, native.native(), self.entry.names
        muted = keys.muted_channel(obj, [(names[b], "location") for b in self.moved])
        if muted:
            raise TendonUserError(muted)
        # A bake with no action assigned leaves the strips playing past its range.
        over_strips = obj.animation_data is not None and obj.animation_data.action is not None
        action, slot, _old = keys.prepare_action(obj, self.settings.new_action)
        if self.spring_bones:
            # Before any key is written: the chains' animation as it is now.
            spring_input.record(obj, self.entry, action, self.spring_bones, float(self.frames[0]))
        frames = self.frames.astype(np.float32)
        span = (float(self.frames[0]), float(self.frames[-1]))
        interpolation = self.settings.interpolation
        # Each bone's keys start nearest what its curves give at the first baked frame (so
        # they wind on from the keys kept before the range), else its current channels:
        # seeded by the channels at the frame the user stood on, a full Euler turn or a
        # quaternion's sign away, the keys played a spin into and out of the range.
        previous = {
            bone: (mode, before)
            for mode, bones, channels in pose.previous_channels(obj, self.entry, np.array(self.keyed, np.int64))
            for bone, before in zip(bones.tolist(), channels, strict=True)
        }
        fcurves = keys.fcurves_of(obj)
        channels = []
        for bone in self.keyed:
            mode, before = previous[bone]
            if fcurves is not None:
                before = keys.curve_values(fcurves, names[bone], pose.rotation_channel(mode)[0], before, span[0])
            values = tendon.rotation_channels(solved[:, bone], mode, before[None], series=True)
            channels.append((names[bone], pose.rotation_channel(mode)[0], values))
        if self.moved:
            locations = self.location_channels(solved)
            channels += [(names[bone], "location", locations[:, bone]) for bone in self.moved]
        scales = self.pose[2]
        channels += [(names[bone], "scale", scales[:, bone]) for bone in self.scaled]
        held = keys.held_over_strips(obj, [(bone, prop) for bone, prop, _ in channels], span) if over_strips else []
        written = keys.write_channels(action, slot, channels, frames, interpolation, span)
        if held:
            listed = ", ".join(repr(bone) for bone in held[:3]) + (", ..." if len(held) > 3 else "")
            self.found.warnings.append(
                f"{listed} had no keys in action '{action.name}' and NLA strips animate them: Blender plays "
                f"the action over every frame, so their new keys hold frames {span[0]:g} and {span[1]:g} over "
                "the strips outside the range (bake the strips' whole range, or bake with no action assigned "
                "to keep the strips playing there)"
            )
        shared = keys.other_users(obj, action, slot)
        if shared:
            self.found.warnings.append(
                f"action '{action.name}' also animates {', '.join(repr(n) for n in shared)} through the same "
                "slot: its keys changed too"
            )
        evaluated = self.evaluated_check(action, slot)
        # Blender's pose showing the solve is a confirmation (said as a warning, it read as
        # a failure; QA helper).
        notes = [evaluated] if evaluated and not self.unshown else []
        if evaluated and self.unshown:
            self.found.warnings.append(evaluated)
        self.show_keys()
        return BakeOutcome(
            frames=len(self.frames),
            bones=len(set(self.keyed) | set(self.scaled) | set(self.moved)),
            keys=written,
            seconds=time.perf_counter() - self.started,
            sampling=self.sampling,
            frames_reached=reached,
            largest_error=largest,
            action=action.name,
            warnings=self.found.warnings,
            goals=len(self.found.goals),
            unshown=self.unshown,
            notes=notes,
        )

    def with_own_channels(self, rotations: np.ndarray) -> np.ndarray:
        """`rotations` (frames, n, 4) with every keyed bone the solve does not turn set back
        to its own channels: the solve starts bones that constraints or drivers place from
        Blender's pose of them, and keyed from there (Bones: All) their constraints applied
        again on top (33 bones of Rigify's generated rig changed, its head moved 1.7 cm;
        QA helper)."""
        others = [bone for bone in self.keyed if bone not in self.turned]
        if not others:
            return rotations
        n, frames = len(self.entry.names), len(self.frames)
        if self.per_frame_pose:
            channels = pose.channel_pose(self.obj, self.entry, self.basis.reshape(frames, n, 16), current=False)[0]
            for (t, bone), rotation in self.collapsed.items():
                channels[t, bone] = rotation
        else:
            channels = np.broadcast_to(self.static_pose[0], (frames, n, 4))
        rotations = np.array(rotations, np.float32)
        rotations[:, others] = channels[:, others]
        return rotations

    def fk_switch_frames(self) -> np.ndarray:
        """Per baked frame, whether every effector on a generated Rigify rig's limb controls
        has its limb's IK/FK switch where it shows them (1 for FK controls, 0 for IK ones;
        read from the switch's curve when it is animated); a warning names each switch
        away from that and where."""
        obj, frames = self.obj, self.frames
        on_fk = np.ones(len(frames), bool)
        for column, (k, name, shown) in enumerate(self.switches):
            position, effector, switch = self.found.effectors[k], self.effectors[k], obj.pose.bones[name]
            if self.per_frame_pose:
                # As the scene evaluated it at each frame (a driven switch, or one keyed in
                # an NLA strip, read as it stands now, said every frame reached; QA helper).
                values = np.where(np.isnan(self.switch_values[:, column]), shown, self.switch_values[:, column])
            else:
                values = np.full(len(frames), float(switch.get("IK_FK", shown)))
                path = f'pose.bones["{bpy.utils.escape_identifier(name)}"]["IK_FK"]'
                fcurve = keys.find_fcurve(obj, path, 0)
                if fcurve is not None and not fcurve.mute:
                    values = keys.sample_fcurve(fcurve, frames)
            # Sampled Bezier keys of 1 read 0.9999999 (frames counted unreached that were).
            away = np.abs(values - shown) > 1e-4
            if not away.any():
                continue
            on_fk &= ~away
            first = int(np.argmax(away))
            where = "below 1" if shown >= 1.0 else "above 0"
            self.found.warnings.append(
                f"{effector_label(position, effector.bone)}: '{name}' has its IK/FK switch {where} on "
                f"{int(away.sum())} of {len(frames)} frame(s) ({values[first]:g} at frame {frames[first]:g}), "
                f"where {switch_advice(shown, ' (not counted as reached)')}"
            )
        return on_fk

    def location_channels(self, rotations: np.ndarray) -> np.ndarray:
        """The moved bones' ``location`` channels per frame (frames, n, 3): the solved
        translations, in armature space for bones with Local Location off."""
        _, translations, scales = self.pose
        if all(self.obj.data.bones[self.entry.names[bone]].use_local_location for bone in self.moved):
            return translations
        scales = np.broadcast_to(scales, translations.shape)
        moved = np.array(self.moved, np.int64)
        return np.stack(
            [
                pose.location_channels(self.obj, self.entry, moved, rotations[t], translations[t], scales[t])
                for t in range(len(self.frames))
            ]
        )

    def evaluated_check(self, action: bpy.types.Action, slot: Any) -> str:
        """What Blender's evaluated pose shows of the new keys when something between keys
        and pose can change them (F-curve modifiers on the keyed channels, the action
        blended at less than full influence or other than Replace over NLA tracks): the
        targets measured there at the first, middle and last baked frames, so the status
        never claims a reach the animation does not play. Empty otherwise (nothing to
        measure: the keys are the pose)."""
        obj = self.obj
        anim = obj.animation_data
        reasons = []
        if anim is not None and (anim.action_influence < 1.0 or anim.action_blend_type != "REPLACE"):
            reasons.append(
                f"the action blended {anim.action_blend_type.title()} at influence {anim.action_influence:g}"
            )
        fcurves = keys.fcurves_of(obj) if not keys.SLOTTED or slot is not None else None
        keyed = {f'pose.bones["{bpy.utils.escape_identifier(self.entry.names[b])}"]' for b in self.keyed}
        modified = [
            f"{fc.data_path}[{fc.array_index}]"
            for fc in (fcurves or [])
            if fc.data_path.rsplit(".", 1)[0] in keyed and any(not m.mute for m in fc.modifiers)
        ]
        if modified:
            reasons.append(f"F-curve modifiers on {len(modified)} keyed channel(s) ({modified[0]}, ...)")
        # Constraints and drivers on the bones that carry or make up the chains: the solve
        # models each bone from its channels, so one a constraint turns (a Damped Track
        # above the chain, a Limit Rotation in it) is not where the solve put it, on any
        # frame (the bake claimed every frame reached, 0.4-2 off in Blender's pose).
        pose_bones = obj.pose.bones
        names = self.entry.names
        constrained = [
            names[b]
            for b in sorted(self.affecting | set(self.keyed))
            if b in self.entry.constrained
            and any(not c.mute and c.influence > 0 for c in pose_bones[names[b]].constraints)
        ]
        driven = [names[b] for b in sorted(self.affecting) if b in self.entry.driven]
        entry = self.entry
        inheriting = [
            names[b]
            for b in sorted(self.affecting | set(self.keyed))
            if b in entry.no_inherit_rotation or b in entry.inherit_scale or b in entry.parent_space_location
        ]
        if constrained:
            reasons.append(
                f"constraints on {len(constrained)} bone(s) of or above the chains ('{constrained[0]}', ...)"
            )
        if driven:
            reasons.append(f"drivers on {len(driven)} bone(s) of or above the chains ('{driven[0]}', ...)")
        if inheriting:
            reasons.append(
                f"inheritance options on {len(inheriting)} bone(s) of or above the chains ('{inheriting[0]}', ...)"
            )
        if not reasons or not self.found.goals:
            return ""
        scene, frames = self.scene, self.frames
        checked = sorted({0, len(frames) // 2, len(frames) - 1})
        largest, missed = 0.0, 0
        with live_suspended():
            for t in checked:
                scene.frame_set(int(frames[t]))
                world = obj.matrix_world
                # Missed: further than the solve itself left it (a target beyond reach on
                # that frame is no fault of Blender's pose).
                solved = float(self.residuals[t]) * max(world.to_scale()) if len(self.residuals) else 0.0
                for k, effector in enumerate(self.effectors):
                    pose_bone = obj.pose.bones[effector.bone]
                    point = world @ (pose_bone.tail if effector.use_tail else pose_bone.head)
                    error = (point - Vector(self.target_points[t, k])).length
                    largest = max(largest, error)
                    missed += error > solved + 1e-4 * max(self.entry.longest, 1e-9)
            self.restore_frame()
        where = ", ".join(str(int(frames[t])) for t in checked)
        self.unshown = bool(missed)
        if not missed:
            # Shows the solve, reached or not (it said "reaches" of frames it missed).
            return f"Blender's pose, through {'; '.join(reasons)}, shows the solve at frames {where}"
        return (
            f"Blender's pose does not show what was solved ({'; '.join(reasons)}): at frames {where} "
            f"the effectors miss by up to {largest:.2g}"
        )

    def show_keys(self) -> None:
        """Evaluates the armature's new keys at the frame the user is on (only the armature:
        the frame is the one it was before the bake, and nothing else changed)."""
        if bpy.context.scene != self.scene:
            self.restore_frame()
            return
        self.obj.update_tag(refresh={"TIME"})
        with live_suspended():
            bpy.context.view_layer.update()

    def restore_frame(self) -> None:
        with live_suspended():
            self.scene.frame_set(self.original_frame[0], subframe=self.original_frame[1])

    def cancel(self) -> None:
        """Leaves the scene as it was (nothing was written)."""
        # A frame refused mid-chunk leaves `sampled` behind the frame the scene is on.
        if self.per_frame_pose and (self.sampled or self.scene.frame_current != self.original_frame[0]):
            self.restore_frame()


def animated_pose_bones(obj: bpy.types.Object) -> set[str]:
    """Names of the pose bones the object's action animates."""
    names = set()
    for fcurve in keys.fcurves_of(obj) or ():
        if fcurve.data_path.startswith('pose.bones["'):
            names.add(fcurve.data_path[len('pose.bones["') :].split('"]', 1)[0])
    return names


def animation_reason(id_data: bpy.types.ID, allowed_paths: tuple[str, ...]) -> str | None:
    """Why `id_data`'s animation is more than F-curves on `allowed_paths` of its own
    action ("pose bones" when the only extra curves animate pose bones), or None."""
    anim = id_data.animation_data
    if anim is None:
        return None
    if len(anim.drivers):
        return "drivers"
    if any(not track.mute for track in anim.nla_tracks):
        return "NLA tracks"
    fcurves = keys.fcurves_of(id_data) or ()
    # Whether Blender plays curves in a muted group differs between versions (4.2 holds
    # them still, 4.5 and 5.0 play them): only its evaluation says (read directly, a 4.2
    # bake followed target curves the scene held still, 0.8 off; QA helper).
    if any(fc.group is not None and fc.group.mute for fc in fcurves):
        return "a muted channel group"
    other = [fc.data_path for fc in fcurves if fc.data_path not in allowed_paths]
    if not other:
        return None
    if all(path.startswith("pose.bones[") for path in other):
        return "pose bones"
    return f"'{other[0]}'"


def object_channel(obj: bpy.types.Object, channel: str, frames: np.ndarray) -> np.ndarray:
    """An object's `location` or `scale` at each frame, (frames, 3), from its F-curves."""
    values = np.tile(np.array(getattr(obj, channel), np.float32), (len(frames), 1))
    for axis in range(3):
        fcurve = keys.find_fcurve(obj, channel, axis)
        if fcurve is not None and not fcurve.mute:
            values[:, axis] = keys.sample_fcurve(fcurve, frames)
            if not np.isfinite(values[:, axis]).all():
                raise TendonUserError(
                    non_finite_curve(obj, f"{channel} {'XYZ'[axis]}", fcurve, frames, values[:, axis])
                )
    if not np.isfinite(values).all():
        raise TendonUserError(f"'{obj.name}': its {channel} is {tuple(getattr(obj, channel))}: give it numbers")
    return values


def non_finite_curve(
    obj: bpy.types.Object, what: str, fcurve: bpy.types.FCurve, frames: np.ndarray, values: np.ndarray
) -> str:
    """Where an F-curve that samples to NaN or infinity goes wrong: its first key that is not
    a number, else the first frame whose value is not (a handle or a modifier)."""
    co = keys.key_arrays(fcurve.keyframe_points, ("co",))["co"]
    bad = np.nonzero(~np.isfinite(co).all(axis=1))[0]
    if len(bad):
        frame, value = co[bad[0]]
        return f"'{obj.name}': the key of its {what} at frame {frame:g} is {value:g}: give it a number; nothing baked"
    first = int(np.nonzero(~np.isfinite(values))[0][0])
    return (
        f"'{obj.name}': its {what} is {values[first]:g} at frame {frames[first]:g} (a handle or modifier of "
        "its F-curve): give it numbers; nothing baked"
    )


def object_locations(obj: bpy.types.Object, frames: np.ndarray) -> np.ndarray:
    """An unparented object's location at each frame, (frames, 3), from its F-curves."""
    return object_channel(obj, "location", frames)


@dataclass
class SpringPlan:
    """An enabled spring chain whose bones exist."""

    item: int
    tip: int
    chain_length: int
    bones: list[int]


def spring_chains(obj: bpy.types.Object, entry: RigEntry, warnings: list[str]) -> list[SpringPlan]:
    """The armature's enabled spring chains; broken ones are named in `warnings`."""
    plans = []
    taken: set[int] = set()
    for position, item in enumerate(obj.tendon.springs):
        if not item.enabled:
            continue
        tip = entry.index.get(item.bone)
        label = f"spring chain {position + 1} ('{item.bone}')"
        if tip is None:
            warnings.append(f"{label}: armature '{obj.name}' has no bone '{item.bone}'; skipped")
            continue
        bones = chain_bones(entry, tip, item.chain_length)
        if taken & set(bones):
            warnings.append(f"{label} shares bones with another spring chain; skipped")
            continue
        taken.update(bones)
        plans.append(SpringPlan(position, tip, len(bones), bones))
    return plans
