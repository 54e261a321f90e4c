"""Runs the add-on in real Blender (bpy from PyPI, headless), installed from the zip users
get. The zip is dist/tendon-*-linux_x64.zip (scripts/build-addon) or $TENDON_ADDON_ZIP.
Blender's user folder is a fresh temporary one, so nothing of the machine's leaks in."""

from __future__ import annotations

import os
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
USER_RESOURCES = tempfile.mkdtemp(prefix="tendon-blender-user-")
# Must be set before Blender starts (at `import bpy`).
os.environ["BLENDER_USER_RESOURCES"] = USER_RESOURCES

import bpy  # noqa: E402

sys.path.insert(0, str(Path(__file__).parent))

MODULE = "bl_ext.user_default.tendon"


def addon_zip() -> Path:
    if os.environ.get("TENDON_ADDON_ZIP"):
        return Path(os.environ["TENDON_ADDON_ZIP"]).resolve()
    found = sorted((ROOT / "dist").glob("tendon-*-linux_x64.zip"))
    if not found:
        pytest.exit("no add-on zip: run scripts/build-addon first", returncode=2)
    return found[-1]


@pytest.fixture(scope="session", autouse=True)
def installed_addon() -> Iterator[str]:
    """Installs the zip into the temporary user folder once, as "Install from Disk" does."""
    bpy.ops.extensions.package_install_files(filepath=str(addon_zip()), repo="user_default", enable_on_install=True)
    # The operator reports FINISHED even when it refused the package: check for real.
    if MODULE not in bpy.context.preferences.addons:
        pytest.exit(f"Blender {bpy.app.version_string} did not enable {MODULE} from {addon_zip()}", returncode=2)
    yield MODULE


@pytest.fixture(scope="session")
def generated_blend(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """Rigify's generated human rig, generated once per session (seconds) and saved; each
    test reloads the file (the autouse fixture empties the scene before every test)."""
    import real_rigs

    path = tmp_path_factory.mktemp("rigify") / "generated_human.blend"
    real_rigs.generate_human_rig(path)
    yield path


@pytest.fixture(autouse=True)
def empty_scene(installed_addon: str) -> Iterator[None]:
    bpy.ops.wm.read_homefile(use_empty=True)
    yield


_exit_status = 0


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    global _exit_status
    _exit_status = int(exitstatus)


def pytest_unconfigure(config: pytest.Config) -> None:
    # bpy 4.2 as a Python module crashes (SIGSEGV), and bpy 4.5 hangs for ever, while the
    # interpreter shuts down once any property update callback or app handler was ever
    # registered, Tendon's or anyone's (a few lines of plain bpy reproduce both; 4.4 and 5.0
    # exit cleanly). Blender the application exits through its own path, so users never see
    # it. Leave before that teardown, keeping pytest's verdict as the exit code.
    if bpy.app.version[:2] in ((4, 2), (4, 5)):
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(_exit_status)
