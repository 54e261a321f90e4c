"""Checks that every tested Blender baked the same keys (run by scripts/test after each
version's tests wrote out/bake-keys-<version>.json):

    python tests/blender/compare_versions.py 4.2 4.5 5.0

The first version is the reference; each other one must match it channel for channel,
frame for frame, within 1e-6."""

from __future__ import annotations

import json
import sys
from pathlib import Path

OUT = Path(__file__).resolve().parents[2] / "out"


def compare(
    reference: str, version: str, old: dict[str, list[list[float]]], new: dict[str, list[list[float]]]
) -> float:
    """The largest value difference between two versions' keys; exits on any other difference."""
    if old.keys() != new.keys():
        sys.exit(f"compare_versions: {reference} and {version} differ in channels: {sorted(old.keys() ^ new.keys())}")
    worst = 0.0
    for channel, keys in old.items():
        if len(keys) != len(new[channel]):
            sys.exit(
                f"compare_versions: {channel} has {len(keys)} keys in {reference}, {len(new[channel])} in {version}"
            )
        for (frame_a, value_a), (frame_b, value_b) in zip(keys, new[channel], strict=True):
            if frame_a != frame_b:
                sys.exit(f"compare_versions: {channel} keys on frame {frame_a} in {reference}, {frame_b} in {version}")
            worst = max(worst, abs(value_a - value_b))
    if worst > 1e-6:
        sys.exit(f"compare_versions: {reference} and {version} values differ by up to {worst}")
    return worst


def main() -> None:
    versions = sys.argv[1:] or ["4.2", "5.0"]
    if len(versions) < 2:
        sys.exit("compare_versions: name at least two Blender versions")
    files = {version: OUT / f"bake-keys-{version}.json" for version in versions}
    missing = [str(path) for path in files.values() if not path.exists()]
    if missing:
        sys.exit(f"compare_versions: missing {', '.join(missing)}")
    keys = {version: json.loads(path.read_text()) for version, path in files.items()}
    reference = versions[0]
    worst = max(compare(reference, version, keys[reference], keys[version]) for version in versions[1:])
    count = sum(map(len, keys[reference].values()))
    print(f"Blender {', '.join(versions)} baked the same {count} keys (largest difference {worst:.1e})")


if __name__ == "__main__":
    main()
