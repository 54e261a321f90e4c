"""Connecting a module's app handlers and property listeners, written once for the modules
that have them (the rig cache, live mode)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from . import props

#: (a `bpy.app.handlers` list, the handler) pairs.
Handlers = tuple[tuple[list[Any], Callable[..., None]], ...]
#: (a `props.listeners` key, the listener) pairs.
Listeners = tuple[tuple[str, Callable[..., None]], ...]


def connect(handlers: Handlers, listeners: Listeners) -> None:
    """Adds each handler and listener once (registering twice adds nothing)."""
    for key, listener in listeners:
        if listener not in props.listeners[key]:
            props.listeners[key].append(listener)
    for handler_list, handler in handlers:
        if handler not in handler_list:
            handler_list.append(handler)


def disconnect(handlers: Handlers, listeners: Listeners) -> None:
    """Removes every copy of each handler and listener."""
    for handler_list, handler in handlers:
        while handler in handler_list:
            handler_list.remove(handler)
    for key, listener in listeners:
        while listener in props.listeners[key]:
            props.listeners[key].remove(listener)
