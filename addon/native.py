"""Tendon's native library, imported on first use, and what the add-on takes from it: the
solver names and their defaults, the spring simulation's defaults, the Euler orders and the
joint tension defaults. Stated once, in the native library; this module only asks.

It imports no other module of the add-on, so ``props.py`` can take its defaults from here
while the add-on still registers (and says what is wrong) where the library cannot load.
"""

from __future__ import annotations

import functools
from types import ModuleType
from typing import Any


class TendonUserError(Exception):
    """A problem the user can fix. The message names the armature, bone or effector."""


def native() -> ModuleType:
    """Tendon's native package, imported on first use so the add-on registers (and says
    what is wrong) even where the library cannot load."""
    try:
        import tendon
    except ImportError as error:
        raise TendonUserError(
            f"Tendon's native library could not be loaded ({error}). "
            "Install the Tendon zip built for this platform (Linux x64)."
        ) from error
    return tendon


def native_status() -> str:
    """One line for the preferences and the panel: the library's version or the problem."""
    try:
        return f"native library {native().__version__}"
    except TendonUserError as error:
        return str(error)


#: The add-on's words for each native solver (label, tooltip), in the order the UI lists
#: them. The names are the library's; a solver the library lacks is not offered, one it has
#: and this table lacks is offered under its own name.
SOLVER_TEXT = {
    "fabrik": ("FABRIK", "Forward and backward reaching: fast, exact, natural on long chains"),
    "ccd": ("CCD", "Cyclic coordinate descent: one joint at a time, from the effector up"),
    "jacobian_dls": (
        "Jacobian DLS",
        "Damped least squares (the default): smooth, moves as little as needed, handles rotation targets",
    ),
    "jacobian_transpose": (
        "Jacobian Transpose",
        "Gradient steps with conjugate directions: no matrix inverted, slower than DLS on limited joints",
    ),
    "two_bone": ("Two Bone", "Closed form for limbs: each effector moves the two bones above it"),
    "tension": ("Tension", "Downhill-simplex minimiser of joint tension within limits (natural poses)"),
}


def solver_item(name: str) -> str:
    """The add-on's identifier (``Object.tendon.solver``) of a native solver name."""
    return name.upper()


@functools.cache
def solver_names() -> tuple[str, ...]:
    """The native solvers, in the UI's order (the table's when the library is missing)."""
    try:
        names = native().Solver.names()
    except TendonUserError:
        return tuple(SOLVER_TEXT)
    return tuple(sorted(names, key=lambda name: list(SOLVER_TEXT).index(name) if name in SOLVER_TEXT else 99))


def solver_items() -> list[tuple[str, str, str]]:
    """EnumProperty items of the solvers."""
    return [
        (solver_item(name), *SOLVER_TEXT.get(name, (name, f"The native '{name}' solver"))) for name in solver_names()
    ]


def solver_name(item: str) -> str:
    """The native name of the add-on's solver identifier, refusing one this build lacks."""
    name = item.lower()
    if name not in solver_names():
        raise TendonUserError(
            f"The '{item}' solver is not in this build of Tendon's native library (it has: {', '.join(solver_names())})"
        )
    return name


@functools.cache
def _solver_defaults(name: str) -> dict[str, Any]:
    return dict(native().Solver.defaults(name))


def solver_defaults(item: str) -> dict[str, Any]:
    """The native defaults of a solver (empty when the library or solver is missing)."""
    try:
        return _solver_defaults(solver_name(item))
    except TendonUserError:
        return {}


@functools.cache
def spring_defaults() -> dict[str, Any]:
    """The native spring simulation's defaults (empty when the library is missing)."""
    try:
        return dict(native().SpringSimulation.defaults())
    except TendonUserError:
        return {}


@functools.cache
def default_limits() -> dict[str, Any]:
    """The limits of a joint nobody limited: Euler order, axes, tension, roll (empty when
    the library is missing)."""
    try:
        return dict(native().default_limits())
    except TendonUserError:
        return {}


@functools.cache
def euler_orders() -> tuple[str, ...]:
    """The Euler orders joint limits may use, the native default first."""
    try:
        return tuple(native().euler_orders())
    except TendonUserError:
        # Nothing can be solved without the library; one order keeps the settings drawable.
        return ("XYZ",)


def tension_defaults() -> tuple[float, float]:
    """A joint's tension threshold and rigidity when left alone (every axis and side);
    (1, 1) merely keeps the settings drawable when the library is missing."""
    tension = default_limits().get("tension")
    if not tension:
        return (1.0, 1.0)
    side = tension[0]["negative"]
    return (float(side["threshold"]), float(side["rigidity"]))
