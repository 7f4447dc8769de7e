"""Shared by the benchmark scripts: replace one ``## Section`` of benchmarks/README.md."""

from __future__ import annotations

import re
from pathlib import Path


def write_section(path: Path, section: str, body: str) -> None:
    """Replace (or append) ``section`` (a ``## ...`` heading) of ``path``, keeping the rest."""
    text = path.read_text() if path.exists() else ""
    block = f"{section}\n\n{body}"
    pattern = re.compile(rf"^{re.escape(section)}[ \t]*\n.*?(?=^## |\Z)", re.M | re.S)
    if pattern.search(text):
        text = pattern.sub(lambda _: block + "\n", text, count=1).rstrip("\n") + "\n"
    else:
        text = (text.rstrip("\n") + "\n\n" if text.strip() else "# Benchmarks\n\n") + block
    path.write_text(text)
