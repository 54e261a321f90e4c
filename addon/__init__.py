"""Tendon: fast, exact inverse kinematics for armatures (the Blender extension).

The modules register in order; each lists its classes in ``classes`` and may have its own
``register``/``unregister`` for what is not a class (properties on Blender types, handlers,
listeners). The rig cache registers before live mode: its handlers must see an update first.
"""

from . import live, operators, preferences, props, rig, ui

MODULES = (props, rig, live, operators, ui, preferences)


def register() -> None:
    import bpy

    for module in MODULES:
        for cls in getattr(module, "classes", ()):
            bpy.utils.register_class(cls)
        if hasattr(module, "register"):
            module.register()


def unregister() -> None:
    import bpy

    for module in reversed(MODULES):
        if hasattr(module, "unregister"):
            module.unregister()
        for cls in reversed(getattr(module, "classes", ())):
            bpy.utils.unregister_class(cls)
