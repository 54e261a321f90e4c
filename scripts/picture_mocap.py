"""One held-out motion-capture frame, three ways, side by side: the actor's pose, Blender's
Standard IK and Tendon (damped least squares with human limits), full body, cold start,
the same targets (the actor's hands, feet and head). Renders docs/mocap.png and prints the
frame's mean per-joint angle error of each against the actor.

    .venv-blender-5.0/bin/python scripts/picture_mocap.py dist/tendon-<version>-linux_x64.zip

Uses the motion-capture benchmark's loading, chains and measures (scripts/bench_mocap.py).
"""

from __future__ import annotations

import math
import os
import sys
import tempfile
from pathlib import Path

import bench_mocap as bench  # sets Blender's user folder before bpy starts: import first
import bpy
import numpy as np
from mathutils import Vector

CLIP = "cmu_102_01_max"
#: A sampled frame of the clip (index into its sampled frames): mid-dribble.
SAMPLE = 40
PROTOCOL = "full body"
#: The cgspeed skeleton's upper arms, whose heads give the actor's left and right.
SHOULDERS = ("LeftShoulder", "RightShoulder")
OUT = bench.ROOT / "docs" / "mocap.png"


def solved_basis(clip: bench.Clip, config: bench.Config, rig: bench.Rig, t: int) -> tuple[np.ndarray, float]:
    """Every bone's matrix_basis after `config` solves sample `t` from the cold start, and
    the frame's mean per-joint angle error (degrees) over the chains."""
    obj = clip.obj
    found = bench.chains(clip, PROTOCOL)
    chain = sorted({rig.index[name] for names in found for name in names})
    constraints = bench.attach(clip, config, found)
    basis = clip.basis[t].copy()
    basis[chain] = clip.basis[0][chain]
    bench.set_basis(obj, basis)
    for empty, point in zip(bench.targets_empties(clip), clip.targets[t], strict=True):
        empty.location = point
    with bench.quiet():
        bench.solve(obj, config, f"{clip.name} sample {t}", bench.Measures())
    solved = bench.matrices(bench.evaluated(obj).pose.bones, "matrix")
    error = math.degrees(float(bench.rotation_angles(solved[chain], clip.pose[t][chain]).mean()))
    result = basis.copy()
    result[chain] = rig.basis_from_pose(solved, chain)
    for bone, constraint in constraints:
        obj.pose.bones[bone].constraints.remove(constraint)
    obj.tendon.effectors.clear()
    return result, error


def main() -> None:
    bench.install(sys.argv[1])
    clip = bench.load_clip(CLIP, quick=False)
    obj, rig = clip.obj, bench.Rig(clip.obj)
    blender, blender_error = solved_basis(clip, bench.Config("Blender Standard IK", bench.BLENDER), rig, SAMPLE)
    bench.set_basis(obj, clip.basis[0])
    bpy.context.view_layer.update()
    bpy.ops.tendon.human_limits()
    tendon, tendon_error = solved_basis(clip, bench.Config("DLS, human limits", "JACOBIAN_DLS"), rig, SAMPLE)

    # Seen from the front: the actor's left-to-right axis from its shoulders (horizontal).
    bench.set_basis(obj, clip.basis[SAMPLE])
    bpy.context.view_layer.update()
    shown = bench.evaluated(obj)
    left, right = (shown.matrix_world @ shown.pose.bones[name].head for name in SHOULDERS)
    lateral = Vector((left.x - right.x, left.y - right.y, 0.0)).normalized()
    forward = Vector((0.0, 0.0, 1.0)).cross(lateral)
    # Three armatures sharing the bones: the actor, Blender's IK, Tendon; left to right as
    # the camera sees them (the actor's right is the picture's left).
    spacing = 1.1 * clip.height
    figures = [obj.copy(), obj.copy(), obj]
    for figure, basis, offset in zip(figures, (clip.basis[SAMPLE], blender, tendon), (1, 0, -1), strict=True):
        if figure.name not in bpy.context.scene.collection.objects:
            bpy.context.scene.collection.objects.link(figure)
        figure.location += offset * spacing * lateral
        bench.set_basis(figure, basis)
    bpy.context.view_layer.update()
    for figure in figures:
        bench.rigs.bone_meshes(figure)
    for empty in bench.targets_empties(clip):
        for offset in (1, 0, -1):
            bpy.ops.mesh.primitive_uv_sphere_add(radius=0.02 * clip.height, location=empty.location)
            marker = bpy.context.active_object
            marker.location += offset * spacing * lateral
            marker.color = (0.2, 0.9, 0.3, 1.0)
        empty.hide_render = True
    scene = bpy.context.scene
    heads = [figure.matrix_world @ b.head for figure in figures for b in figure.pose.bones]
    centre = sum(heads, Vector()) / len(heads)
    camera = bpy.data.objects.new("Camera", bpy.data.cameras.new("Camera"))
    scene.collection.objects.link(camera)
    camera.data.type, camera.data.ortho_scale = "ORTHO", 3.3 * spacing
    camera.location = centre + 4.0 * clip.height * forward + Vector((0.0, 0.0, 0.3 * clip.height))
    camera.rotation_euler = (centre - camera.location).to_track_quat("-Z", "Y").to_euler()
    scene.camera = camera
    bench.rigs.workbench_stage(scene, 900, 420)
    path = Path(tempfile.mkdtemp()) / "mocap.png"
    scene.render.filepath = str(path)
    with bench.quiet():
        bpy.ops.render.render(write_still=True)
    OUT.parent.mkdir(exist_ok=True)
    OUT.write_bytes(path.read_bytes())
    frame = clip.frames[SAMPLE]
    print(
        f"{CLIP} frame {frame} ({PROTOCOL}, cold start): mean per-joint angle error against the actor: "
        f"Blender's Standard IK {blender_error:.1f} deg, Tendon (DLS, human limits) {tendon_error:.1f} deg; "
        f"wrote {OUT.relative_to(bench.ROOT)}"
    )
    os._exit(0)  # skip bpy's interpreter teardown (see tests/blender/conftest.py)


if __name__ == "__main__":
    main()
