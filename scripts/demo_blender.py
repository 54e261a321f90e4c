"""The main job's Blender half: installs the add-on zip into headless Blender 5.0, builds
the demo character (the 50-bone humanoid with a tail), gives it hand, foot and head
effectors with animated targets (a walk, a reach and a look around) and swaying hips,
makes its tail a spring chain, bakes the IK and the tail's motion, saves out/demo.blend
and renders out/demo.png, a strip of poses. Prints and writes the timings to
out/demo-blender.txt.

    .venv-blender-5.0/bin/python scripts/demo_blender.py dist/tendon-*-linux_x64.zip
"""

from __future__ import annotations

import math
import os
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
os.environ["BLENDER_USER_RESOURCES"] = tempfile.mkdtemp(prefix="tendon-demo-")

import bpy  # noqa: E402
import numpy as np  # noqa: E402
from mathutils import Vector  # noqa: E402

sys.path.insert(0, str(ROOT / "tests" / "blender"))
import rigs  # noqa: E402

MODULE = "bl_ext.user_default.tendon"
FRAMES = 120
#: Frames shown in the picture.
STRIP = (1, 20, 40, 60, 80, 100, 120)
OUT = ROOT / "out"

#: Effector bone, chain length, and whether it gets a pole in front (knees).
EFFECTORS = (
    ("shin.L", 2),
    ("shin.R", 2),
    ("hand.L", 3),
    ("hand.R", 3),
    ("head", 2),
)


def install(zip_path: str) -> None:
    bpy.ops.extensions.package_install_files(
        filepath=str(Path(zip_path).resolve()), repo="user_default", enable_on_install=True
    )
    if MODULE not in bpy.context.preferences.addons:
        sys.exit(f"Blender did not enable {MODULE} from {zip_path}")


def target_path(bone: str, frame: int) -> Vector:
    """Where each effector's target is at `frame` (armature space, character facing -Y):
    the feet walk in place, the left arm swings with them, the right hand reaches forward
    and comes back, and the head looks from side to side."""
    phase = 2.0 * math.pi * (frame - 1) / 48.0
    if bone.startswith("shin."):
        side = 1.0 if bone.endswith(".L") else -1.0
        swing = 0.35 * math.sin(phase) * side
        # The foot swinging forward lifts: the knee bends more.
        lift = 0.1 * max(0.0, math.cos(phase) * side)
        reach = 0.86 - lift
        hip = Vector((0.1 * side, 0.0, 1.0))
        return hip + Vector((0.0, -reach * math.sin(swing), -reach * math.cos(swing)))
    if bone == "hand.L":
        # From the T pose down to the side, then swinging against the left leg.
        lowered = min(1.0, (frame - 1) / 20.0)
        swing = -0.3 * math.sin(phase) * lowered
        shoulder = Vector((0.17, 0.02, 1.45))
        down = Vector((0.05 + 0.55 * (1.0 - lowered), -0.55 * math.sin(swing), -0.55 * lowered * math.cos(swing)))
        return shoulder + down
    if bone == "hand.R":
        # Reach forward and up by frame 60, then back towards the side.
        t = 0.5 - 0.5 * math.cos(2.0 * math.pi * (frame - 1) / (FRAMES - 1))
        rest = Vector((-0.62, 0.02, 1.10))
        reach = Vector((-0.22, -0.50, 1.40))
        return rest.lerp(reach, t)
    # The head's tail: a look to one side and the other.
    return Vector((0.08 * math.sin(phase / 2.0), -0.04, 1.77))


def animate_targets(obj: bpy.types.Object) -> list[bpy.types.Object]:
    targets = []
    for bone, chain_length in EFFECTORS:
        target = rigs.empty(f"{bone}.target", target_path(bone, 1))
        target.empty_display_type, target.empty_display_size = "SPHERE", 0.04
        for frame in range(1, FRAMES + 1, 4):
            target.location = target_path(bone, frame)
            target.keyframe_insert("location", frame=frame)
        effector = obj.tendon.effectors.add()
        effector.bone, effector.target, effector.chain_length = bone, target, chain_length
        targets.append(target)
    return targets


def sway_hips(obj: bpy.types.Object) -> None:
    """The hips turn and bob with the steps: the limbs' IK makes up for it, the tail swings."""
    hips = obj.pose.bones["hips"]
    hips.rotation_mode = "XYZ"
    for frame in range(1, FRAMES + 1, 4):
        phase = 2.0 * math.pi * (frame - 1) / 48.0
        # The hips bone points up (its Y is world Z): turning about Y turns the body.
        hips.rotation_euler = (0.0, 0.25 * math.sin(phase), 0.0)
        hips.location = (0.0, 0.02 * math.cos(2.0 * phase), 0.0)
        hips.keyframe_insert("rotation_euler", frame=frame)
        hips.keyframe_insert("location", frame=frame)


def staging(targets: list[bpy.types.Object]) -> None:
    scene = bpy.context.scene
    bpy.ops.mesh.primitive_plane_add(size=4.0, location=(0.0, 0.0, 0.0))
    bpy.context.active_object.color = (0.35, 0.35, 0.38, 1.0)
    for target in targets:
        bpy.ops.mesh.primitive_uv_sphere_add(radius=0.03, location=(0, 0, 0))
        marker = bpy.context.active_object
        marker.parent, marker.color = target, (0.2, 0.9, 0.3, 1.0)
    camera = rigs.link(bpy.data.objects.new("Camera", bpy.data.cameras.new("Camera")))
    camera.data.type, camera.data.ortho_scale = "ORTHO", 2.3
    camera.location = (2.6, -3.4, 1.45)
    direction = Vector((0.0, 0.0, 0.9)) - camera.location
    camera.rotation_euler = direction.to_track_quat("-Z", "Y").to_euler()
    scene.camera = camera
    rigs.workbench_stage(scene, 300, 420)
    scene.display.shading.show_shadows = True
    scene.render.film_transparent = False
    scene.frame_start, scene.frame_end = 1, FRAMES


def render_strip() -> None:
    """Renders the STRIP frames and puts them side by side in out/demo.png."""
    scene = bpy.context.scene
    frames = []
    for frame in STRIP:
        scene.frame_set(frame)
        path = Path(tempfile.mkdtemp()) / f"frame{frame}.png"
        scene.render.filepath = str(path)
        bpy.ops.render.render(write_still=True)
        image = bpy.data.images.load(str(path))
        pixels = np.empty(image.size[0] * image.size[1] * 4, np.float32)
        image.pixels.foreach_get(pixels)
        frames.append(pixels.reshape(image.size[1], image.size[0], 4))
        bpy.data.images.remove(image)
    strip = np.concatenate(frames, axis=1)
    height, width = strip.shape[:2]
    picture = bpy.data.images.new("demo", width, height)
    picture.pixels.foreach_set(strip.ravel())
    picture.filepath_raw = str(OUT / "demo.png")
    picture.file_format = "PNG"
    picture.save()


def main() -> None:
    OUT.mkdir(exist_ok=True)
    timings: list[tuple[str, float]] = []
    started = time.perf_counter()
    install(sys.argv[1])
    bpy.ops.wm.read_homefile(use_empty=True)
    timings.append(("install the add-on zip", time.perf_counter() - started))

    started = time.perf_counter()
    obj = rigs.humanoid("Tendon Demo")
    targets = animate_targets(obj)
    sway_hips(obj)
    tail = obj.tendon.springs.add()
    tail.bone, tail.chain_length, tail.stiffness, tail.damping = "tail.4", 5, 5.0, 1.5
    obj.tendon.solver = "FABRIK"
    timings.append(("build the character and its animated targets", time.perf_counter() - started))

    started = time.perf_counter()
    assert bpy.ops.tendon.bake(frame_start=1, frame_end=FRAMES) == {"FINISHED"}, obj.tendon.status
    timings.append((f"bake {FRAMES} frames ({obj.tendon.status})", time.perf_counter() - started))

    errors = []
    for frame in range(1, FRAMES + 1):
        bpy.context.scene.frame_set(frame)
        for (bone, _), target in zip(EFFECTORS, targets, strict=True):
            tail = obj.matrix_world @ obj.pose.bones[bone].tail
            errors.append((tail - target.matrix_world.translation).length)

    rigs.bone_meshes(obj)
    staging(targets)
    rigs.activate(obj)
    bpy.ops.object.mode_set(mode="OBJECT")
    started = time.perf_counter()
    bpy.ops.wm.save_as_mainfile(filepath=str(OUT / "demo.blend"))
    timings.append(("save out/demo.blend", time.perf_counter() - started))
    started = time.perf_counter()
    render_strip()
    timings.append((f"render out/demo.png (frames {', '.join(map(str, STRIP))})", time.perf_counter() - started))

    lines = [
        f"Tendon demo in Blender {bpy.app.version_string}: {len(obj.pose.bones)}-bone humanoid, "
        f"{len(EFFECTORS)} animated effectors (walk, reach, look), swaying hips and a spring tail, "
        f"{FRAMES} frames baked.",
        f"Effector to target over every frame: mean {np.mean(errors):.2e}, largest {np.max(errors):.2e} "
        "(Blender units; the character is 1.8 tall).",
        "",
    ]
    lines += [f"{seconds * 1e3:9.1f} ms  {what}" for what, seconds in timings]
    text = "\n".join(lines) + "\n"
    (OUT / "demo-blender.txt").write_text(text)
    print(text, flush=True)
    os._exit(0)  # skip bpy's interpreter teardown (see tests/blender/conftest.py)


if __name__ == "__main__":
    main()
