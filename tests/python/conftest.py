"""Shared rigs and helpers for the tests of the `tendon` package (run against the wheel)."""

import json
import math
from pathlib import Path

import numpy as np
import pytest

import tendon

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures"


@pytest.fixture(scope="session")
def humanoid() -> tendon.Rig:
    return tendon.Rig.from_json((FIXTURES / "humanoid.json").read_text())


def bent_chain(bones: int) -> tendon.Rig:
    """A chain along +Y, each joint bent 0.15 rad about X, bone lengths 1.0, 0.9, 0.8, ..."""
    half = 0.075
    bend = [math.sin(half), 0.0, 0.0, math.cos(half)]  # JSON quaternions are x, y, z, w
    desc = {
        "bones": [
            {
                "name": f"b{i}",
                "parent": f"b{i - 1}" if i else None,
                "rest": {
                    "translation": [0.0, (1.0 - 0.1 * ((i - 1) % 5)) if i else 0.0, 0.0],
                    "rotation": bend if i else [0.0, 0.0, 0.0, 1.0],
                },
                "length": 1.0 - 0.1 * (i % 5),
            }
            for i in range(bones)
        ]
    }
    return tendon.Rig.from_json(json.dumps(desc))


def tail(rig: tendon.Rig, rotations: np.ndarray, bone: int, length: float) -> np.ndarray:
    """Armature-space tail of `bone` in the pose given by `rotations`."""
    matrix = rig.forward_kinematics(rotations)[bone]
    return (matrix @ np.array([0.0, length, 0.0, 1.0], dtype=np.float32))[:3]


def random_rotations(rng: np.random.Generator, bones: int, max_angle: float) -> np.ndarray:
    """Unit quaternions (w, x, y, z) turning up to `max_angle` about random axes."""
    axes = rng.normal(size=(bones, 3))
    axes /= np.linalg.norm(axes, axis=1, keepdims=True)
    angles = rng.uniform(0.0, max_angle, size=(bones, 1))
    return np.hstack([np.cos(angles / 2), axes * np.sin(angles / 2)]).astype(np.float32)
