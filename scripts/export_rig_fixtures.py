"""Writes tests/fixtures/rigs/*.json: rigs nobody on the team wrote, exported from Blender
for the Rust and Python suites (which run without Blender). Each file holds the bones in
Blender's order as the add-on reads them: names, parent indices (-1 for roots),
``bone.matrix_local`` row-major, lengths, and a real pose (``matrix_basis`` row-major): the
Rigify human metarig in its rest pose, and a CMU clip imported by Blender's BVH importer at
a mid-clip frame. Run with Blender's Python (bpy from PyPI):

    .venv-blender-5.0/bin/python scripts/export_rig_fixtures.py
"""

from __future__ import annotations

import json
from pathlib import Path

import bpy
import numpy as np

ROOT = Path(__file__).resolve().parents[1]
OUT = ROOT / "tests" / "fixtures" / "rigs"


def export(obj: bpy.types.Object, name: str, source: str) -> None:
    bones, pose_bones = obj.data.bones, obj.pose.bones
    n = len(bones)
    matrices = np.empty(n * 16, np.float32)
    bones.foreach_get("matrix_local", matrices)
    basis = np.empty(n * 16, np.float32)
    pose_bones.foreach_get("matrix_basis", basis)
    lengths = np.empty(n, np.float32)
    bones.foreach_get("length", lengths)
    index = {bone.name: i for i, bone in enumerate(bones)}
    data = {
        "source": source,
        "names": [bone.name for bone in bones],
        "parents": [index[bone.parent.name] if bone.parent else -1 for bone in bones],
        # foreach_get gives each 4x4 column by column: transposed, row-major.
        "matrices": np.round(matrices.reshape(n, 4, 4).transpose(0, 2, 1), 7).tolist(),
        "lengths": np.round(lengths, 7).tolist(),
        "pose": np.round(basis.reshape(n, 4, 4).transpose(0, 2, 1), 7).tolist(),
    }
    OUT.mkdir(parents=True, exist_ok=True)
    (OUT / f"{name}.json").write_text(json.dumps(data, separators=(",", ":")) + "\n")
    print(f"{name}: {n} bones")


def main() -> None:
    import addon_utils  # Blender's, importable once bpy is

    addon_utils.enable("rigify", default_set=True)
    bpy.ops.wm.read_homefile(use_empty=True)
    bpy.ops.object.armature_human_metarig_add()
    export(bpy.context.object, "rigify_human_metarig", f"Rigify human metarig, Blender {bpy.app.version_string}")
    bpy.ops.wm.read_homefile(use_empty=True)
    clip = ROOT / "tests" / "fixtures" / "mocap" / "cmu_102_01_max.bvh"
    bpy.ops.import_anim.bvh(filepath=str(clip), global_scale=0.056444)
    bpy.context.scene.frame_set(140)
    export(bpy.context.object, "cmu_102_01", "CMU 102_01 by Blender's BVH importer, frame 140 (see mocap/README.md)")


main()
