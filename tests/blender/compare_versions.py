"""Checks that Blender 4.2 and 5.0 baked the same keys (run by scripts/test after both
versions' tests wrote out/bake-keys-<version>.json)."""

import json
import sys
from pathlib import Path

OUT = Path(__file__).resolve().parents[2] / "out"


def main() -> None:
    files = {version: OUT / f"bake-keys-{version}.json" for version in ("4.2", "5.0")}
    missing = [str(path) for path in files.values() if not path.exists()]
    if missing:
        sys.exit(f"compare_versions: missing {', '.join(missing)}")
    old, new = (json.loads(path.read_text()) for path in files.values())
    if old.keys() != new.keys():
        sys.exit(f"compare_versions: different channels: {sorted(old.keys() ^ new.keys())}")
    worst = 0.0
    for channel, keys in old.items():
        if len(keys) != len(new[channel]):
            sys.exit(f"compare_versions: {channel} has {len(keys)} keys in 4.2, {len(new[channel])} in 5.0")
        for (frame_a, value_a), (frame_b, value_b) in zip(keys, new[channel], strict=True):
            if frame_a != frame_b:
                sys.exit(f"compare_versions: {channel} keys on frame {frame_a} in 4.2, {frame_b} in 5.0")
            worst = max(worst, abs(value_a - value_b))
    if worst > 1e-6:
        sys.exit(f"compare_versions: values differ by up to {worst}")
    print(f"Blender 4.2 and 5.0 baked the same {sum(map(len, old.values()))} keys (largest difference {worst:.1e})")


if __name__ == "__main__":
    main()
