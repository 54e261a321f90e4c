"""Where the benchmark scripts put their tables: out/<name>.md, and README.md's section
between the `<!-- bench:<section>:start -->` and `:end -->` markers."""

import contextlib
import os
import re
import sys
from collections.abc import Iterator
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def publish(text: str, file_name: str, section: str, update_readme: bool) -> None:
    """Writes `text` to out/`file_name` and, when `update_readme`, into the README section."""
    out = ROOT / "out"
    out.mkdir(exist_ok=True)
    (out / file_name).write_text(text)
    start, end = f"<!-- bench:{section}:start -->", f"<!-- bench:{section}:end -->"
    readme = ROOT / "README.md"
    body = readme.read_text()
    if update_readme and start in body:
        body = re.sub(re.escape(start) + ".*?" + re.escape(end), start + "\n" + text + end, body, flags=re.S)
        readme.write_text(body)
    print(text, flush=True)


@contextlib.contextmanager
def quiet() -> Iterator[None]:
    """Blender prints every operator report (and importer chatter) to standard output in
    background mode, from C: standard output goes to /dev/null for the while."""
    sys.stdout.flush()
    saved = os.dup(1)
    with open(os.devnull, "w") as null:
        os.dup2(null.fileno(), 1)
        try:
            yield
        finally:
            os.dup2(saved, 1)
            os.close(saved)
