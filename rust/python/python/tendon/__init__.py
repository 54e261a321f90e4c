"""Tendon: fast, exact inverse kinematics for Blender and Python.

Build a :class:`Rig` (from JSON or from Blender-style arrays), describe :class:`Goal` s,
and solve with a :class:`Solver`::

    import numpy as np
    import tendon

    rig = tendon.Rig.from_json(text)
    solver = tendon.Solver("fabrik")
    result = solver.solve(rig, [tendon.Goal("hand.L", (0.5, -0.3, 1.4), chain_length=3)])
    result.rotations  # (n, 4) float32 local rotations, w first, in the rig's bone order

Arrays are numpy float32 in the order the rig's bones were given; quaternions are
(w, x, y, z) as in Blender. Errors are :class:`TendonError` (a ``ValueError``) or one of
its subclasses, each naming the bone, goal or array at fault.
"""

from . import humanoid
from ._native import (
    BoneIndexError,
    FramesResult,
    Goal,
    InternalError,
    LimitError,
    NonFiniteError,
    PosePlan,
    Result,
    Rig,
    RigError,
    ShapeError,
    Solver,
    SolverError,
    SpringSimulation,
    TendonError,
    __version__,
    auto_clamped_handles,
    default_limits,
    distribute_scale,
    euler_orders,
    evaluate_fcurve,
    matrices_to_transforms,
    rotation_channels,
)

__all__ = [
    "BoneIndexError",
    "FramesResult",
    "Goal",
    "InternalError",
    "LimitError",
    "NonFiniteError",
    "PosePlan",
    "Result",
    "Rig",
    "RigError",
    "ShapeError",
    "Solver",
    "SolverError",
    "SpringSimulation",
    "TendonError",
    "__version__",
    "auto_clamped_handles",
    "default_limits",
    "distribute_scale",
    "euler_orders",
    "evaluate_fcurve",
    "humanoid",
    "matrices_to_transforms",
    "rotation_channels",
]
