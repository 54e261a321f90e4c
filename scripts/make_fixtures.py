#!/usr/bin/env python3
"""Writes tests/fixtures/humanoid.json: a humanoid with a tail and fingers (50 bones), as
Blender would describe it.

Bones are given by armature-space head and tail (Z up, character facing -Y, roll 0) and
converted to Tendon's rig description: each bone's rest transform relative to its parent,
with the bone along its local +Y. Elbows and knees are slightly bent, as the guide advises.
Standard library only; run it again to regenerate the file.
"""

import json
import math
from pathlib import Path

# name: (parent, head, tail)
BONES = {
    "hips": (None, (0.0, 0.0, 1.00), (0.0, 0.0, 1.10)),
    "spine": ("hips", (0.0, 0.0, 1.10), (0.0, 0.01, 1.30)),
    "chest": ("spine", (0.0, 0.01, 1.30), (0.0, 0.0, 1.50)),
    "neck": ("chest", (0.0, 0.0, 1.50), (0.0, -0.01, 1.60)),
    "head": ("neck", (0.0, -0.01, 1.60), (0.0, -0.01, 1.80)),
    "tail.0": ("hips", (0.0, 0.08, 1.00), (0.0, 0.20, 0.96)),
    "tail.1": ("tail.0", (0.0, 0.20, 0.96), (0.0, 0.32, 0.90)),
    "tail.2": ("tail.1", (0.0, 0.32, 0.90), (0.0, 0.43, 0.82)),
    "tail.3": ("tail.2", (0.0, 0.43, 0.82), (0.0, 0.52, 0.72)),
    "tail.4": ("tail.3", (0.0, 0.52, 0.72), (0.0, 0.58, 0.61)),
}
for side, s in (("L", 1.0), ("R", -1.0)):
    BONES.update(
        {
            f"shoulder.{side}": ("chest", (s * 0.03, 0.0, 1.45), (s * 0.17, 0.02, 1.45)),
            f"upper_arm.{side}": (f"shoulder.{side}", (s * 0.17, 0.02, 1.45), (s * 0.45, 0.04, 1.44)),
            f"forearm.{side}": (f"upper_arm.{side}", (s * 0.45, 0.04, 1.44), (s * 0.70, 0.0, 1.43)),
            f"hand.{side}": (f"forearm.{side}", (s * 0.70, 0.0, 1.43), (s * 0.80, 0.0, 1.42)),
            f"thigh.{side}": ("hips", (s * 0.10, 0.0, 1.00), (s * 0.10, -0.02, 0.55)),
            f"shin.{side}": (f"thigh.{side}", (s * 0.10, -0.02, 0.55), (s * 0.10, 0.02, 0.10)),
            f"foot.{side}": (f"shin.{side}", (s * 0.10, 0.02, 0.10), (s * 0.10, -0.12, 0.02)),
            f"toe.{side}": (f"foot.{side}", (s * 0.10, -0.12, 0.02), (s * 0.10, -0.18, 0.0)),
        }
    )


# Thumb, index, middle and ring fingers: three phalanges each, curling slightly downwards.
FINGERS = {
    "thumb": (-0.035, 0.72, 0.03),
    "index": (-0.02, 0.80, 0.04),
    "middle": (0.0, 0.80, 0.045),
    "ring": (0.02, 0.80, 0.04),
}
for side, s in (("L", 1.0), ("R", -1.0)):
    for finger, (y, x, length) in FINGERS.items():
        parent, head = f"hand.{side}", (s * x, y, 1.42)
        for k in range(3):
            step = length * (1.0 - 0.2 * k)
            tail = (head[0] + s * step, head[1] - (0.01 if finger == "thumb" else 0.0), head[2] - 0.004 * (k + 1))
            name = f"{finger}.{k + 1}.{side}"
            BONES[name] = (parent, head, tail)
            parent, head = name, tail


Vec = tuple[float, ...]


def sub(a: Vec, b: Vec) -> Vec:
    return tuple(x - y for x, y in zip(a, b, strict=True))


def cross(a: Vec, b: Vec) -> Vec:
    return (a[1] * b[2] - a[2] * b[1], a[2] * b[0] - a[0] * b[2], a[0] * b[1] - a[1] * b[0])


def dot(a: Vec, b: Vec) -> float:
    return sum(x * y for x, y in zip(a, b, strict=True))


def normalize(v: Vec) -> Vec:
    n = math.sqrt(dot(v, v))
    return tuple(x / n for x in v)


def quat_from_to(a: Vec, b: Vec) -> Vec:
    """Smallest rotation (x, y, z, w) taking direction a to direction b."""
    a, b = normalize(a), normalize(b)
    c, d = cross(a, b), dot(a, b)
    return normalize((c[0], c[1], c[2], 1.0 + d))


def quat_mul(p: Vec, q: Vec) -> Vec:
    px, py, pz, pw = p
    qx, qy, qz, qw = q
    return (
        pw * qx + px * qw + py * qz - pz * qy,
        pw * qy - px * qz + py * qw + pz * qx,
        pw * qz + px * qy - py * qx + pz * qw,
        pw * qw - px * qx - py * qy - pz * qz,
    )


def conjugate(q: Vec) -> Vec:
    return (-q[0], -q[1], -q[2], q[3])


def rotate(q: Vec, v: Vec) -> Vec:
    r = quat_mul(quat_mul(q, (v[0], v[1], v[2], 0.0)), conjugate(q))
    return r[:3]


def main() -> None:
    rotation = {name: quat_from_to((0.0, 1.0, 0.0), sub(tail, head)) for name, (_, head, tail) in BONES.items()}
    bones = []
    for name, (parent, head, tail) in BONES.items():
        if parent is None:
            local_rotation, translation = rotation[name], head
        else:
            inverse = conjugate(rotation[parent])
            local_rotation = quat_mul(inverse, rotation[name])
            translation = rotate(inverse, sub(head, BONES[parent][1]))
        length = math.sqrt(dot(sub(tail, head), sub(tail, head)))
        bones.append(
            {
                "name": name,
                "parent": parent,
                "rest": {
                    "translation": [round(x, 7) for x in translation],
                    "rotation": [round(x, 7) for x in local_rotation],
                    "scale": [1.0, 1.0, 1.0],
                },
                "length": round(length, 7),
            }
        )
    out = Path(__file__).resolve().parent.parent / "tests" / "fixtures" / "humanoid.json"
    out.write_text(json.dumps({"bones": bones}, indent=1) + "\n")
    print(f"wrote {out.name}: {len(bones)} bones")


if __name__ == "__main__":
    main()
