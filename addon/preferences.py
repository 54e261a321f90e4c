"""The add-on's preferences: whether the native library loaded, and its version."""

from bpy.types import AddonPreferences, Context

from . import native


class TendonPreferences(AddonPreferences):
    bl_idname = __package__

    def draw(self, _context: Context) -> None:
        self.layout.label(text=f"Tendon {native.native_status()}")


classes = (TendonPreferences,)
