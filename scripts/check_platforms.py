"""Checks the add-on zip of every platform (scripts/build-addon --all-platforms) as far as
this Linux machine can, without the other systems:

- the zip holds the manifest, the add-on and exactly its own platform's wheel, and its
  generated manifest declares that platform and that wheel only;
- the wheel is tagged cp311-abi3 for the platform (WHEEL file and name) and holds one
  native library, for the right architecture, exporting `PyInit__native`;
- that library's imports: Windows, only the stable-ABI `python3.dll` of Python's (not
  `python311.dll`) and system DLLs (no MinGW runtime DLL); macOS, no libpython, only
  system libraries, every Python symbol looked up in the loading process, a minimum macOS
  no newer than the tag; Linux, no libpython, glibc symbols no newer than 2.28;
- each tested Blender's extension validator (`blender_ext.py validate`) accepts the zip;
- each tested Blender's own install-time checks, told they run on that platform, accept
  the zip and pick exactly its wheel, and refuse the zip on every other platform.

    .venv/bin/python scripts/check_platforms.py [DIST]    (DIST defaults to dist/)
"""

from __future__ import annotations

import io
import re
import subprocess
import sys
import tomllib
import zipfile
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
#: Blender platform -> (wheel platform tag, what Blender's Python there answers for
#: `sysconfig.get_platform()`, `platform.system()` and `platform.machine()`).
PLATFORMS = {
    "linux-x64": ("manylinux_2_28_x86_64", "linux-x86_64", "Linux", "x86_64"),
    "windows-x64": ("win_amd64", "win-amd64", "Windows", "AMD64"),
    "macos-x64": ("macosx_10_12_x86_64", "macosx-11.2-x86_64", "Darwin", "x86_64"),
    "macos-arm64": ("macosx_11_0_arm64", "macosx-11.2-arm64", "Darwin", "arm64"),
}
BLENDERS = ("4.2", "4.4", "4.5", "5.0")
#: DLLs every Windows has; anything else (a MinGW runtime, pythonXY.dll) would not load.
WINDOWS_SYSTEM_DLLS = {
    "kernel32.dll",
    "ntdll.dll",
    "msvcrt.dll",
    "userenv.dll",
    "ws2_32.dll",
    "bcryptprimitives.dll",
    "advapi32.dll",
    "user32.dll",
}
#: dyld's library ordinal for "look the symbol up in every loaded image" (flat lookup).
FLAT_LOOKUP = -2


class Failure(Exception):
    pass


def check(condition: bool, message: str) -> None:
    if not condition:
        raise Failure(message)


def manifest_of(archive: zipfile.ZipFile) -> dict[str, Any]:
    return tomllib.loads(archive.read("blender_manifest.toml").decode())


def check_zip(path: Path, platform: str) -> tuple[str, bytes]:
    """The zip's one wheel (name, bytes), after checking the zip's content and manifest."""
    tag = PLATFORMS[platform][0]
    archive = zipfile.ZipFile(path)
    names = archive.namelist()
    for needed in ("blender_manifest.toml", "__init__.py", "bake.py"):
        check(needed in names, f"{path.name} lacks {needed}")
    wheels = [n for n in names if n.startswith("wheels/")]
    check(len(wheels) == 1, f"{path.name} holds {len(wheels)} wheels: {wheels}")
    wheel = wheels[0].removeprefix("wheels/")
    check(
        re.fullmatch(rf"tendon_ik-[0-9.]+-cp311-abi3-{tag}\.whl", wheel) is not None,
        f"{path.name} holds {wheel}, not a cp311-abi3 {tag} wheel",
    )
    generated = manifest_of(archive).get("build", {}).get("generated", {})
    check(generated.get("platforms") == [platform], f"{path.name} declares {generated.get('platforms')}")
    check(generated.get("wheels") == [f"./wheels/{wheel}"], f"{path.name} lists {generated.get('wheels')}")
    return wheel, archive.read(wheels[0])


def check_wheel(wheel: str, data: bytes, platform: str) -> tuple[str, bytes]:
    """The wheel's native library (name, bytes), after checking its tags."""
    tag = PLATFORMS[platform][0]
    archive = zipfile.ZipFile(io.BytesIO(data))
    metadata = [n for n in archive.namelist() if n.endswith(".dist-info/WHEEL")]
    check(len(metadata) == 1, f"{wheel} has {len(metadata)} WHEEL files")
    fields = archive.read(metadata[0]).decode().splitlines()
    check(f"Tag: cp311-abi3-{tag}" in fields, f"{wheel}'s WHEEL tags: {[f for f in fields if f.startswith('Tag')]}")
    check("Root-Is-Purelib: false" in fields, f"{wheel} claims to be pure Python")
    suffix = ".pyd" if platform == "windows-x64" else ".abi3.so"
    native = [n for n in archive.namelist() if n.startswith("tendon/_native") and n.endswith((".pyd", ".so"))]
    check(native == [f"tendon/_native{suffix}"], f"{wheel} holds native libraries {native}")
    return native[0], archive.read(native[0])


def check_pe(data: bytes) -> str:
    import pefile

    pe = pefile.PE(data=data)
    check(pe.FILE_HEADER.Machine == pefile.MACHINE_TYPE["IMAGE_FILE_MACHINE_AMD64"], "not an x64 DLL")
    check(pe.is_dll(), "not a DLL")
    dlls = sorted(entry.dll.decode().lower() for entry in pe.DIRECTORY_ENTRY_IMPORT)
    python = [d for d in dlls if d.startswith("python")]
    check(python == ["python3.dll"], f"imports Python through {python}, not only the stable-ABI python3.dll")
    foreign = [
        d for d in dlls if d != "python3.dll" and d not in WINDOWS_SYSTEM_DLLS and not d.startswith("api-ms-win-")
    ]
    check(not foreign, f"imports DLLs Windows does not have: {foreign}")
    exports = [s.name for s in pe.DIRECTORY_ENTRY_EXPORT.symbols if s.name]
    check(b"PyInit__native" in exports, f"exports {exports}, not PyInit__native")
    calls = sum(len(e.imports) for e in pe.DIRECTORY_ENTRY_IMPORT if e.dll.decode().lower() == "python3.dll")
    return f"PE x64; imports {', '.join(dlls)} ({calls} functions from python3.dll)"


def check_macho(data: bytes, platform: str, path: Path) -> str:
    from macholib import mach_o
    from macholib.MachO import MachO
    from macholib.SymbolTable import SymbolTable

    path.write_bytes(data)  # macholib reads files only
    macho = MachO(str(path))
    check(len(macho.headers) == 1, f"{len(macho.headers)} architectures")
    header = macho.headers[0]
    arch = mach_o.CPU_TYPE_NAMES.get(header.header.cputype)
    check(arch == {"macos-x64": "x86_64", "macos-arm64": "ARM64"}[platform], f"built for {arch}")
    dylibs, minimum = [], None
    for command, body, payload in header.commands:
        if command.cmd in (mach_o.LC_LOAD_DYLIB, mach_o.LC_LOAD_WEAK_DYLIB, mach_o.LC_REEXPORT_DYLIB):
            dylibs.append(payload.rstrip(b"\0").decode())
        elif command.cmd == mach_o.LC_BUILD_VERSION:
            minimum = (body.minos >> 16, (body.minos >> 8) & 0xFF)
        elif command.cmd == mach_o.LC_VERSION_MIN_MACOSX:
            minimum = (body.version >> 16, (body.version >> 8) & 0xFF)
    check(not [d for d in dylibs if "python" in d.lower()], f"links Python: {dylibs}")
    check(all(d.startswith(("/usr/lib/", "/System/Library/")) for d in dylibs), f"links non-system libraries: {dylibs}")
    tagged = tuple(int(p) for p in PLATFORMS[platform][0].split("_")[1:3])
    check(minimum is not None and minimum <= tagged, f"needs macOS {minimum}, the tag says {tagged}")
    symbols = SymbolTable(macho, header)
    check(any(name == b"_PyInit__native" for _, name in symbols.extdefsyms), "does not export PyInit__native")
    info = [body for command, body, _ in header.commands if command.cmd == mach_o.LC_DYLD_INFO_ONLY]
    check(len(info) == 1, "no LC_DYLD_INFO_ONLY (chained fixups are not read here)")
    binds = {}
    for offset, size in ((info[0].bind_off, info[0].bind_size), (info[0].lazy_bind_off, info[0].lazy_bind_size)):
        binds.update(bind_ordinals(data[offset : offset + size]))
    python = {name: ordinal for name, ordinal in binds.items() if name.startswith(("_Py", "__Py"))}
    bound = [name for name, ordinal in python.items() if ordinal != FLAT_LOOKUP]
    check(python and not bound, f"Python symbols bound to a library: {bound[:5]}")
    return (
        f"Mach-O {arch}, macOS {minimum[0]}.{minimum[1]}+; links {', '.join(dylibs)}; "
        f"{len(python)} Python symbols looked up at load"
    )


def bind_ordinals(stream: bytes) -> dict[str, int]:
    """Symbol -> library ordinal of each binding in a Mach-O bind-opcode stream."""

    def uleb(at: int) -> int:
        while stream[at] & 0x80:
            at += 1
        return at + 1

    ordinals, ordinal, symbol, at = {}, 0, "", 0
    while at < len(stream):
        opcode, immediate = stream[at] & 0xF0, stream[at] & 0x0F
        at += 1
        if opcode == 0x10:  # SET_DYLIB_ORDINAL_IMM
            ordinal = immediate
        elif opcode == 0x20:  # SET_DYLIB_ORDINAL_ULEB
            end = uleb(at)
            ordinal = sum((b & 0x7F) << (7 * i) for i, b in enumerate(stream[at:end]))
            at = end
        elif opcode == 0x30:  # SET_DYLIB_SPECIAL_IMM: 0 self, -1 main executable, -2 flat lookup
            ordinal = immediate - 16 if immediate else 0
        elif opcode == 0x40:  # SET_SYMBOL_TRAILING_FLAGS_IMM
            end = stream.index(0, at)
            symbol, at = stream[at:end].decode(), end + 1
        elif opcode in (0x60, 0x70, 0x80, 0xA0):  # addend, segment and offset, add address
            at = uleb(at)
        elif opcode == 0xC0:  # DO_BIND_ULEB_TIMES_SKIPPING_ULEB
            at = uleb(uleb(at))
        elif opcode == 0xD0:  # THREADED
            check(immediate == 1, "threaded binds are not read here")
        if opcode in (0x90, 0xA0, 0xB0, 0xC0):  # the DO_BIND family
            ordinals[symbol] = ordinal
    return ordinals


def check_elf(data: bytes) -> str:
    from elftools.elf.dynamic import DynamicSection
    from elftools.elf.elffile import ELFFile
    from elftools.elf.gnuversions import GNUVerNeedSection

    elf = ELFFile(io.BytesIO(data))
    check(elf["e_machine"] == "EM_X86_64", f"built for {elf['e_machine']}")
    needed = [t.needed for s in elf.iter_sections() if isinstance(s, DynamicSection) for t in s.iter_tags("DT_NEEDED")]
    check(not [n for n in needed if "python" in n], f"links Python: {needed}")
    glibc = [
        tuple(int(p) for p in aux.name.removeprefix("GLIBC_").split("."))
        for s in elf.iter_sections()
        if isinstance(s, GNUVerNeedSection)
        for _, auxes in s.iter_versions()
        for aux in auxes
        if aux.name.startswith("GLIBC_2")
    ]
    check(max(glibc) <= (2, 28), f"needs glibc {max(glibc)}")
    dynsym = elf.get_section_by_name(".dynsym")
    check(
        any(s.name == "PyInit__native" and s["st_shndx"] != "SHN_UNDEF" for s in dynsym.iter_symbols()),
        "does not export PyInit__native",
    )
    return f"ELF x86-64; needs {', '.join(needed)}; glibc {'.'.join(map(str, max(glibc)))}+"


def blender_checks(zips: dict[str, Path]) -> list[str]:
    """Each tested Blender's validator and its install-time checks (see in_blender)."""
    results = []
    for version in BLENDERS:
        python = ROOT / f".venv-blender-{version}" / "bin" / "python"
        if not python.exists():
            continue
        builder = next(
            (python.parent.parent / "lib").glob(
                "python3.11/site-packages/bpy/*/scripts/addons_core/bl_pkg/cli/blender_ext.py"
            )
        )
        for path in zips.values():
            run = subprocess.run([python, builder, "validate", path], capture_output=True, text=True)
            check(run.returncode == 0, f"Blender {version}'s validator refuses {path.name}: {run.stdout}{run.stderr}")
        run = subprocess.run(
            [python, __file__, "--in-blender", *(f"{p}={z}" for p, z in zips.items())], capture_output=True, text=True
        )
        check(run.returncode == 0, f"Blender {version}'s install checks: {run.stdout[-2000:]}{run.stderr[-2000:]}")
        results.append(version)
    check(bool(results), "no Blender venv found: run scripts/setup --blender")
    return results


def in_blender(arguments: list[str]) -> None:
    """Run by Blender's Python: its real install-time checks on each zip, told they run on
    the zip's platform. The manifest check (platform, Blender and Python versions) must pass
    there and fail everywhere else; the wheel filter must pick exactly the zip's wheel."""
    import os
    import platform as host
    import sysconfig
    import tempfile
    from unittest import mock

    os.environ["BLENDER_USER_RESOURCES"] = tempfile.mkdtemp(prefix="tendon-check-")
    import bpy
    from bl_pkg import bl_extension_ops, bl_extension_utils

    failures = []
    for argument in arguments:
        platform, path = argument.split("=", 1)
        manifest = manifest_of(zipfile.ZipFile(path))
        generated = manifest["build"]["generated"]
        for elsewhere, (_tag, sysconfig_platform, system, machine) in PLATFORMS.items():
            with (
                mock.patch.object(host, "system", return_value=system),
                mock.patch.object(host, "machine", return_value=machine),
                mock.patch.object(sysconfig, "get_platform", return_value=sysconfig_platform),
            ):
                check_this = bl_extension_utils.platform_from_this_system()
                error = bl_extension_ops.pkg_manifest_params_compatible_or_error_for_this_system(
                    blender_version_min=manifest["blender_version_min"],
                    blender_version_max=manifest.get("blender_version_max", ""),
                    platforms=generated["platforms"],
                    python_versions=[],
                )
                picked = bl_extension_ops._extensions_wheel_filter_for_this_system(generated["wheels"])
            if check_this != elsewhere:
                failures.append(f"could not pose as {elsewhere} (got {check_this})")
            elif elsewhere == platform and (error is not None or picked != generated["wheels"]):
                failures.append(f"{Path(path).name} on {platform}: {error}; wheels picked {picked}")
            elif elsewhere != platform and error is None:
                failures.append(f"{Path(path).name} is accepted on {elsewhere}")
    print(f"Blender {bpy.app.version_string}: " + ("; ".join(failures) if failures else "accepted"))
    sys.stdout.flush()
    os._exit(1 if failures else 0)  # skip bpy's interpreter teardown (see tests/blender/conftest.py)


def main() -> None:
    if sys.argv[1:2] == ["--in-blender"]:
        in_blender(sys.argv[2:])
    dist = Path(sys.argv[1]) if len(sys.argv) > 1 else ROOT / "dist"
    version = tomllib.loads((ROOT / "addon" / "blender_manifest.toml").read_text())["version"]
    zips = {p: dist / f"tendon-{version}-{p.replace('-', '_')}.zip" for p in PLATFORMS}
    missing = [str(z) for z in zips.values() if not z.exists()]
    if missing:
        sys.exit(f"check_platforms: missing {', '.join(missing)} (run scripts/build-addon --all-platforms)")
    scratch = ROOT / "target" / "check-platforms"
    scratch.mkdir(parents=True, exist_ok=True)
    try:
        for platform, path in zips.items():
            wheel, data = check_zip(path, platform)
            native, binary = check_wheel(wheel, data, platform)
            if platform == "windows-x64":
                found = check_pe(binary)
            elif platform.startswith("macos"):
                found = check_macho(binary, platform, scratch / f"{platform}{Path(native).suffix}")
            else:
                found = check_elf(binary)
            print(f"{path.name} ({path.stat().st_size} bytes): {wheel} ({len(data)} bytes); {found}")
        versions = blender_checks(zips)
    except Failure as failure:
        sys.exit(f"check_platforms: {failure}")
    print(f"Validated and accepted for exactly their platform by Blender {', '.join(versions)}")


if __name__ == "__main__":
    main()
