"""Type stubs of Tendon's native module (checked against it by mypy's stubtest)."""

from collections.abc import Sequence
from typing import Any, TypeAlias, final

import numpy as np
import numpy.typing as npt

__version__: str
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
    "TendonError",
    "__version__",
    "SpringSimulation",
    "_test_panic",
    "auto_clamped_handles",
    "default_limits",
    "distribute_scale",
    "euler_orders",
    "evaluate_fcurve",
    "matrices_to_transforms",
    "rotation_channels",
]

_ArrayLike: TypeAlias = npt.ArrayLike
_Float32Array: TypeAlias = npt.NDArray[np.float32]

# Test and timing hooks: built with the crate's `hooks` feature, which scripts/build-wheel
# enables for every wheel it builds (stubtest checks these stubs against that build).
def _test_panic() -> None: ...
def rotation_channels(
    rotations: _ArrayLike, mode: str, previous: _ArrayLike | None = None, series: bool = False
) -> _Float32Array: ...
def distribute_scale(
    goal: _ArrayLike, count: int, min: _ArrayLike | None = None, max: _ArrayLike | None = None
) -> _Float32Array: ...
def evaluate_fcurve(
    co: _ArrayLike, handle_left: _ArrayLike, handle_right: _ArrayLike, interpolation: _ArrayLike, frames: _ArrayLike
) -> _Float32Array: ...
def auto_clamped_handles(
    frames: _ArrayLike, values: _ArrayLike, smooth: bool
) -> tuple[_Float32Array, _Float32Array, list[bool]]: ...
def euler_orders() -> list[str]: ...
def default_limits() -> dict[str, Any]: ...
def matrices_to_transforms(
    matrices: _ArrayLike, column_major: bool = False
) -> tuple[_Float32Array, _Float32Array, _Float32Array]: ...

class TendonError(ValueError): ...
class RigError(TendonError): ...
class LimitError(TendonError): ...
class ShapeError(TendonError): ...
class NonFiniteError(TendonError): ...
class BoneIndexError(TendonError): ...
class SolverError(TendonError): ...
class InternalError(TendonError): ...

@final
class Rig:
    @staticmethod
    def from_json(text: str) -> Rig: ...
    @staticmethod
    def from_arrays(
        names: Sequence[str],
        parents: Sequence[int],
        rest_matrices: _ArrayLike,
        lengths: _ArrayLike,
        limits: str | None = None,
    ) -> Rig: ...
    def to_json(self) -> str: ...
    def __len__(self) -> int: ...
    def __reduce__(self) -> tuple[Any, tuple[str]]: ...
    @property
    def names(self) -> list[str]: ...
    @property
    def parents(self) -> list[int]: ...
    @property
    def dfs_order(self) -> list[int]: ...
    def index(self, name: str) -> int: ...
    def rest_rotations(self) -> _Float32Array: ...
    def forward_kinematics(
        self,
        rotations: _ArrayLike,
        translations: _ArrayLike | None = None,
        scales: _ArrayLike | None = None,
    ) -> _Float32Array: ...
    def pose_from_world(
        self, matrices: _ArrayLike, column_major: bool = False
    ) -> tuple[_Float32Array, _Float32Array, _Float32Array]: ...
    def start_pose(
        self, basis: _ArrayLike, evaluated: _ArrayLike, bones: Sequence[int], column_major: bool = False
    ) -> tuple[_Float32Array, _Float32Array, _Float32Array, _Float32Array, _Float32Array]: ...

@final
class Goal:
    def __getnewargs_ex__(self) -> tuple[tuple[str | int, tuple[float, float, float]], dict[str, object]]: ...
    def __new__(
        cls,
        bone: str | int,
        target: _ArrayLike,
        *,
        rotation: _ArrayLike | None = None,
        rotation_weight: float = 1.0,
        weight: float = 1.0,
        chain_length: int = 0,
        pole: _ArrayLike | None = None,
        point: str = "tail",
        pole_angle: float | None = None,
    ) -> Goal: ...
    @property
    def bone(self) -> str | int: ...
    @property
    def target(self) -> tuple[float, float, float]: ...
    @property
    def rotation(self) -> tuple[float, float, float, float] | None: ...
    @property
    def rotation_weight(self) -> float: ...
    @property
    def weight(self) -> float: ...
    @property
    def chain_length(self) -> int: ...
    @property
    def pole(self) -> tuple[float, float, float] | None: ...
    @property
    def pole_angle(self) -> float | None: ...
    @property
    def point(self) -> str: ...

@final
class Result:
    @property
    def rotations(self) -> _Float32Array: ...
    @property
    def translations(self) -> _Float32Array: ...
    @property
    def iterations(self) -> int: ...
    @property
    def residual(self) -> float: ...
    @property
    def rotation_residual(self) -> float: ...
    @property
    def reached(self) -> bool: ...

@final
class FramesResult:
    @property
    def rotations(self) -> _Float32Array: ...
    @property
    def translations(self) -> _Float32Array: ...
    @property
    def iterations(self) -> npt.NDArray[np.int32]: ...
    @property
    def residual(self) -> _Float32Array: ...
    @property
    def reached(self) -> npt.NDArray[np.bool_]: ...

@final
class Solver:
    def __getnewargs_ex__(self) -> tuple[tuple[str], dict[str, float | int | bool | str]]: ...
    def __getstate__(self) -> tuple[list[float], list[float], list[float]] | None: ...
    def __setstate__(self, state: tuple[list[float], list[float], list[float]] | None) -> None: ...
    def __new__(cls, name: str = "fabrik", **params: float | int | bool | str) -> Solver: ...
    @staticmethod
    def names() -> list[str]: ...
    @staticmethod
    def defaults(name: str) -> dict[str, float | int | bool | str]: ...
    @property
    def name(self) -> str: ...
    @property
    def settings(self) -> dict[str, float | int | bool | str]: ...
    def set_reference_pose(self, rig: Rig, rotations: _ArrayLike | None = None) -> None: ...
    def solve(
        self,
        rig: Rig,
        goals: Sequence[Goal],
        rotations: _ArrayLike | None = None,
        translations: _ArrayLike | None = None,
        scales: _ArrayLike | None = None,
    ) -> Result: ...
    def solve_frames(
        self,
        rig: Rig,
        goals: Sequence[Goal],
        targets: _ArrayLike,
        rotations: _ArrayLike | None = None,
        translations: _ArrayLike | None = None,
        scales: _ArrayLike | None = None,
        warm: bool = True,
        *,
        rotation_targets: _ArrayLike | None = None,
        poles: _ArrayLike | None = None,
    ) -> FramesResult: ...
    # Timing hooks (the `hooks` feature, as `_test_panic`).
    def _time_native(
        self, rig: Rig, goals: Sequence[Goal], repeats: int, rotations: _ArrayLike | None = None
    ) -> float: ...
    def _time_native_frames(
        self, rig: Rig, goals: Sequence[Goal], targets: _ArrayLike, repeats: int, warm: bool = True
    ) -> float: ...

@final
class PosePlan:
    """A solve planned for repeated solves from Blender's pose matrices (the add-on's)."""

    def __new__(
        cls,
        rig: Rig,
        goals: Sequence[Goal],
        moving: Sequence[int],
        pose_rows: Sequence[int],
        chains: Sequence[Sequence[int]],
        use_tail: Sequence[bool],
        modes: dict[int, str],
        *,
        unit_parents: Sequence[int] = ...,
        scale_tolerance: float = 1e-05,
    ) -> PosePlan: ...
    def solve(
        self,
        solver: Solver,
        evaluated: _ArrayLike,
        targets: _ArrayLike,
        *,
        rotation_targets: _ArrayLike | None = None,
        poles: _ArrayLike | None = None,
        relative: float,
        mismatch: float,
        collapsed: float,
        unchanged: float,
        rotation_modes: _ArrayLike,
        quaternions: _ArrayLike | None = None,
        eulers: _ArrayLike | None = None,
        axis_angles: _ArrayLike | None = None,
    ) -> tuple[list[int], bool, float, int, list[float]] | None: ...

@final
class SpringSimulation:
    def __new__(
        cls,
        rig: Rig,
        chains: Sequence[Any],
        colliders: Sequence[tuple[str | int, tuple[float, float, float], float]] | None = None,
        **settings: Any,
    ) -> SpringSimulation: ...
    @staticmethod
    def defaults() -> dict[str, Any]: ...
    def reset(
        self,
        rotations: _ArrayLike,
        translations: _ArrayLike | None = None,
        scales: _ArrayLike | None = None,
        object_matrix: _ArrayLike | None = None,
    ) -> None: ...
    def advance(
        self,
        dt: float,
        rotations: _ArrayLike,
        translations: _ArrayLike | None = None,
        scales: _ArrayLike | None = None,
        object_matrix: _ArrayLike | None = None,
    ) -> _Float32Array: ...
    def simulate(
        self,
        rotations: _ArrayLike,
        dt: float | _ArrayLike,
        translations: _ArrayLike | None = None,
        scales: _ArrayLike | None = None,
        reset: bool = True,
        gravity: _ArrayLike | None = None,
        object_matrices: _ArrayLike | None = None,
    ) -> _Float32Array: ...
    def points(self, chain: int) -> _Float32Array: ...
