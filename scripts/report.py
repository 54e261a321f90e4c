"""Where the benchmark scripts put their tables: out/<name>.md, and README.md's section
between the `<!-- bench:<section>:start -->` and `:end -->` markers."""

import re
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
