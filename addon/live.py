"""Live mode: armatures with ``Object.tendon.live`` re-solve whenever a target, the armature
or the frame moves, from the dependency graph's update handler. Each solve's status is
measured in the pose Blender then shows: Blender evaluates a pose written from its update
handler in a second pass that calls no handler, so a timer measures it once that pass is
done (or the next update that moves nothing live mode follows, whichever comes first).

The handler does almost nothing on the updates that concern no live armature: the live
armatures are listed once (and again when relations change, a file loads or undo runs),
and each one's targets and transform are compared with the last solve's before anything
else is read.
"""

from __future__ import annotations

import time
from typing import Any

import bpy

from . import hooks, props, rig, space
from .native import TendonUserError
from .solve import Effector, SolveOutcome, effector_label, followed_bones, read_effectors, rigify_switch, solve

#: The armatures with live mode on, per scene (scene pointer -> objects), or None when they
#: must be listed again (relations rebuilt, which adding, deleting or linking objects does;
#: live mode switched; a file loaded; undo).
_live: dict[int, list[bpy.types.Object]] | None = None
#: What each live armature's last solve started from (pointer -> values, see `signature`).
_signatures: dict[int, list[Any]] = {}
#: Live solves not yet measured in Blender's evaluated pose (pointer -> armature name, outcome).
_unmeasured: dict[int, tuple[str, SolveOutcome]] = {}
#: Each live armature's effector settings as last read, and the edit count and number of
#: effectors they were read at (pointer -> (edits, count, settings)).
_effectors: dict[int, tuple[int, int, tuple[Effector | None, ...]]] = {}
#: Seconds the last live update of each armature took (pointer -> seconds), for the panel.
live_timings: dict[int, float] = {}

_busy = False


def forget() -> None:
    """Forgets the live armatures and what their last solves saw."""
    global _live
    _live = None
    _signatures.clear()
    _unmeasured.clear()
    _effectors.clear()


def live_objects(scene: bpy.types.Scene) -> list[bpy.types.Object]:
    """The armatures of `scene` with live mode on."""
    global _live
    if _live is None:
        _live = {}
    key = scene.as_pointer()
    found = _live.get(key)
    if found is None:
        found = _live[key] = [
            obj for obj in scene.objects if obj.type == "ARMATURE" and obj.tendon.live and obj.library is None
        ]
    try:
        return [obj for obj in found if obj.tendon.live]
    except ReferenceError:
        # An object removed without the relations rebuilt: list them again next time.
        _live = None
        return []


def set_status(obj: bpy.types.Object, status: str) -> None:
    # Writing an unchanged value would still tag the object for another update.
    if obj.tendon.status != status:
        obj.tendon.status = status


def current_effectors(obj: bpy.types.Object) -> tuple[Effector | None, ...]:
    """The armature's effector settings (`read_effectors`), read again only when one was set
    since (`props.effector_edits`), their number changed, or the armature is animated (an
    action, driver or NLA track may move them without a word); relations rebuilt, undo and
    a file load forget them (`forget`)."""
    key = obj.as_pointer()
    count = len(obj.tendon.effectors)
    known = _effectors.get(key)
    animation = obj.animation_data
    if animation is not None and (animation.action is not None or animation.drivers or animation.nla_tracks):
        known = None
    if known is not None and known[0] == props.effector_edits and known[1] == count:
        return known[2]
    effectors = read_effectors(obj)
    _effectors[key] = (props.effector_edits, count, effectors)
    return effectors


def signature(
    obj: bpy.types.Object, scene: bpy.types.Scene | None = None
) -> tuple[tuple[Effector | None, ...], list[Any], space.WorldTargets]:
    """The effectors' settings, and everything a live solve depends on that moves: those
    settings, the armature's and targets' world matrices, the mode, and whether each
    effector's bone exists (a bone renamed or deleted in Edit Mode is reported when Pose
    Mode returns, not when a target next moves). Also the targets' world matrices by
    effector, for the solve (read once)."""
    effectors = current_effectors(obj)
    values: list[Any] = [obj.mode, obj.matrix_world.copy(), effectors, animated_frame(obj, scene)]
    # A setting or a limit set since (the solver switched, Human Limits pressed: the pose
    # and status of before stayed until a target moved; QA helper).
    values += [props.effector_edits, rig.generation]
    world: space.WorldTargets = {}
    bones = obj.data.bones
    for position, effector in enumerate(effectors):
        if effector is None:
            continue
        values.append(effector.bone in bones)
        # A Rigify limb's IK/FK switch, flipped, changes what the status must say (it
        # kept saying reached with the hand 10 cm off; QA helper).
        switch = rigify_switch(obj, effector.bone)
        values.append(switch[1] if switch is not None else None)
        matrices = world[position] = []
        for target, subtarget in space.target_objects(effector):
            # Deleted in the viewport, a target stays in the file where it was, one user
            # fewer: the solve then names it (the status kept saying "reached"; QA helper).
            values.append(target.users)
            if subtarget and target != obj and target.type == "ARMATURE":
                # Another armature's bone: whether its live solve follows this one back
                # (`live_cycles`) changes with its effectors.
                values.append((target.tendon.live, len(target.tendon.effectors)))
            try:
                matrix = space.target_world_matrix(target, subtarget, "").copy()
            except TendonUserError:
                matrix = None
            values.append(matrix)
            matrices.append(matrix)
    return effectors, values, world


def animated_frame(obj: bpy.types.Object, scene: bpy.types.Scene | None = None) -> float | None:
    """The scene's frame when the armature is animated (an action, NLA strips or drivers):
    a frame change then sets the chain's channels anew, and the pose must be solved again
    even though no target moved (the status kept saying "reached" with a hand 8 cm off;
    found by a helper review). None otherwise."""
    anim = obj.animation_data
    if anim is None or (anim.action is None and not anim.nla_tracks and not anim.drivers):
        return None
    # The scene whose update this is (the window's may be another).
    return (scene or bpy.context.scene).frame_float


def unchanged(last: list[Any] | None, seen: list[Any]) -> bool:
    """Whether two signatures agree; the settings as text when they differ as values: a NaN
    typed into a setting equals itself there (else every update would solve again instead
    of measuring the last solve)."""
    if last is None:
        return False
    if last == seen:
        return True
    # Only the settings (third) can hold a NaN; compared as text only when all else agrees.
    return last[:2] == seen[:2] and last[3:] == seen[3:] and repr(last[2]) == repr(seen[2])


def live_update(scene: bpy.types.Scene, force: Any = None, depsgraph: Any = None, frame_set: bool = False) -> None:
    """Re-solves each live armature of `scene` whose targets moved, or whose pose something
    else changed (in `depsgraph`'s updates: a bone posed by hand). `force`: an armature to
    solve whatever its signature (live mode just switched on for it). `frame_set`: the
    scene's frame was just set, which puts every animated armature's channels back to its
    keys even when the frame is the one it was on. Never raises: problems go to the
    armature's status line."""
    global _busy
    if _busy:
        return
    _busy = True
    try:
        for obj in live_objects(scene):
            key = obj.as_pointer()
            if obj.mode == "EDIT":
                # The bones being edited are not the armature's bones until Edit Mode ends.
                _signatures.pop(key, None)
                _unmeasured.pop(key, None)
                set_status(obj, "Live: paused in Edit Mode")
                continue
            try:
                effectors, seen, world = signature(obj, scene)
            except ReferenceError:
                # A target removed since its settings were kept (a frame change tells the
                # rig cache nothing): read them again, now without it.
                _effectors.pop(key, None)
                effectors, seen, world = signature(obj, scene)
            # Setting the frame an animated armature is already on still puts its chains back
            # to their keys (the status kept saying "reached" with the effector 0.8 off;
            # found by a QA helper).
            keyed_again = frame_set and animated_frame(obj, scene) is not None
            if obj != force and not keyed_again and unchanged(_signatures.get(key), seen):
                # The update that follows a live solve: measure it in the pose Blender shows.
                pending = _unmeasured.pop(key, None)
                if pending is not None:
                    measure(obj, pending[1])
                    continue
                if key not in posed_armatures(depsgraph):
                    continue
                # Nothing live mode follows moved, but the pose did (a bone above or in a
                # chain posed by hand): solve again, as an IK constraint would hold the
                # chains (the status had kept "reached" with the hand a metre off).
            _signatures[key] = seen
            started = time.perf_counter()
            cycles = live_cycles(obj, effectors)
            if cycles:
                effectors = tuple(None if k in cycles else e for k, e in enumerate(effectors))
            try:
                if cycles and not any(effectors):
                    raise TendonUserError("; ".join(cycles.values()))
                outcome = solve(obj, effectors, world)
                outcome.warnings = [*outcome.warnings, *cycles.values()]
                _unmeasured[key] = (obj.name, outcome)
                status = "Live: " + outcome.status()
                if not bpy.app.timers.is_registered(measure_pending):
                    bpy.app.timers.register(measure_pending, first_interval=0.0)
            except TendonUserError as problem:
                _unmeasured.pop(key, None)
                status = f"Live: {problem}"
            live_timings[key] = time.perf_counter() - started
            set_status(obj, status)
    finally:
        _busy = False


def live_cycles(obj: bpy.types.Object, effectors: tuple[Effector | None, ...]) -> dict[int, str]:
    """The effectors (by position) whose chain moves a bone another live armature's
    effector follows, while that effector's chain moves the bone this one follows (two
    hands reaching for each other): each solve moves the other's target, and live mode
    would solve both for ever, the hands creeping away. Each with a warning; they are
    skipped. (Two hands that each follow the other armature's other hand close no loop.)"""
    found: dict[int, str] = {}
    for position, effector in enumerate(effectors):
        other = effector.target if effector is not None else None
        if other is None or other == obj or other.type != "ARMATURE" or not effector.subtarget:
            continue
        if not other.tendon.live:
            continue
        for back in read_effectors(other):
            if back is None or not moved_by_chain(other, back, effector.subtarget):
                continue
            followed = followed_bones(obj, back.target, back.subtarget)
            bone = next((bone for bone, _how in followed if moved_by_chain(obj, effector, bone)), None)
            if bone is not None:
                found[position] = (
                    f"{effector_label(position, effector.bone)}: its target bone '{effector.subtarget}' moves with "
                    f"armature '{other.name}''s live solve, which follows this armature's bone '{bone}' that this "
                    "effector's chain moves: a cycle live mode cannot settle; skipped (follow an empty, or solve one "
                    "armature at a time with Solve IK)"
                )
                break
    return found


def moved_by_chain(obj: bpy.types.Object, effector: Effector, name: str) -> bool:
    """Whether bone `name` of armature `obj` is in or under `effector`'s chain."""
    bones = obj.data.bones
    chain = set()
    bone, count = bones.get(effector.bone), 0
    while bone is not None and (effector.chain_length == 0 or count < effector.chain_length):
        chain.add(bone.name)
        bone, count = bone.parent, count + 1
    bone = bones.get(name)
    while bone is not None:
        if bone.name in chain:
            return True
        bone = bone.parent
    return False


def measure(obj: bpy.types.Object, outcome: SolveOutcome) -> None:
    """Measures a live solve in the pose Blender shows, and says so on the status line."""
    try:
        outcome.measure(obj)
    except (KeyError, ReferenceError):
        # A bone renamed or deleted since the solve: the next update reports it.
        return
    set_status(obj, "Live: " + outcome.status())


def targets_moved(obj: bpy.types.Object, key: int) -> bool:
    """Whether `obj`'s targets are elsewhere than when it was last solved."""
    try:
        return not unchanged(_signatures.get(key), signature(obj)[1])
    except ReferenceError:
        return True


def measure_pending() -> None:
    """Measures every live solve not measured yet (a one-shot timer, run by Blender's event
    loop after the pass that evaluated the written poses)."""
    global _busy
    if _busy:
        return
    _busy = True
    try:
        objects = bpy.data.objects
        for key, (name, outcome) in list(_unmeasured.items()):
            del _unmeasured[key]
            obj = objects.get(name)
            if obj is None or obj.as_pointer() != key or obj.mode == "EDIT":
                continue
            if targets_moved(obj, key):
                # A target moved in the pass that evaluated the written poses (a bone of
                # another live armature it follows): measuring against where it was would
                # claim a reach the pose does not show. Solve it again at the next update.
                _signatures.pop(key, None)
                obj.update_tag()
                continue
            measure(obj, outcome)
    finally:
        _busy = False


class live_suspended:  # noqa: N801 (used as a context manager, like a function)
    """Live mode does nothing inside this block (baking changes frames on purpose)."""

    def __enter__(self) -> None:
        global _busy
        self.was_busy = _busy
        _busy = True

    def __exit__(self, *_exc: object) -> None:
        global _busy
        _busy = self.was_busy


def live_switched(settings: Any, context: bpy.types.Context) -> None:
    """`Object.tendon.live` was switched: list the live armatures again, and solve now."""
    global _live
    _live = None
    if settings.live:
        # Only this armature: another just switched on in the same breath (Alt+click on
        # several) has not been evaluated yet, and solving it again from there refused it.
        live_update(context.scene, force=settings.id_data)
    else:
        settings.status = ""


@bpy.app.handlers.persistent
def on_depsgraph_update(scene: bpy.types.Scene, depsgraph: Any = None) -> None:
    global _live
    if rig.changed_last_update:
        # Objects may have been added, deleted, renamed or duplicated (live mode and all),
        # and an effector's target deleted.
        _live = None
        _effectors.clear()
    live_update(scene, depsgraph=depsgraph)


def posed_armatures(depsgraph: Any) -> frozenset[int]:
    """The (original) objects whose pose or geometry the update evaluated anew."""
    if depsgraph is None or not depsgraph.id_type_updated("OBJECT"):
        return frozenset()
    return frozenset(
        update.id.original.as_pointer()
        for update in depsgraph.updates
        if update.is_updated_geometry and isinstance(update.id, bpy.types.Object) and update.id.type == "ARMATURE"
    )


@bpy.app.handlers.persistent
def on_frame_change(scene: bpy.types.Scene, _depsgraph: Any = None) -> None:
    live_update(scene, frame_set=True)


@bpy.app.handlers.persistent
def on_replaced(*_args: Any) -> None:
    """A file loaded, or undo or redo: the objects are new."""
    forget()


HANDLERS = (
    (bpy.app.handlers.depsgraph_update_post, on_depsgraph_update),
    (bpy.app.handlers.frame_change_post, on_frame_change),
    (bpy.app.handlers.load_post, on_replaced),
    (bpy.app.handlers.undo_post, on_replaced),
    (bpy.app.handlers.redo_post, on_replaced),
)


LISTENERS = (("live", live_switched),)


def register() -> None:
    hooks.connect(HANDLERS, LISTENERS)


def unregister() -> None:
    hooks.disconnect(HANDLERS, LISTENERS)
    if bpy.app.timers.is_registered(measure_pending):
        bpy.app.timers.unregister(measure_pending)
    forget()
