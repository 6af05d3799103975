"""What qsim's messages and docstrings point a user at exists: every `docs/NAME.md` (with its
`#anchor`, if any) names a page and one of its headings, and every "see README: SECTION" names a
heading of the README (a hint that sends a user to a section that is not there is a lie)."""
from __future__ import annotations

import ast
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PAGE = re.compile(r"\b(docs/[a-z_0-9]+\.md|README\.md)(#[a-z0-9-]+)?")
README_SECTION = re.compile(r"\bsee README:\s*([^\"'()]+)")


def _anchors(page: Path) -> set[str]:
    """GitHub's heading anchors: lower case, punctuation dropped, spaces to hyphens."""
    headings = re.findall(r"^#+\s+(.*)$", page.read_text(encoding="utf-8"), re.M)
    return {"#" + re.sub(r"[^\w\- ]", "", h.strip().lower()).replace(" ", "-") for h in headings}


def _strings_of_qsim():
    for path in sorted((ROOT / "qsim").rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Constant) and isinstance(node.value, str):
                yield f"{path.relative_to(ROOT)}:{node.lineno}", node.value


def test_pages_and_anchors_named_in_qsim_exist():
    broken = []
    for where, text in _strings_of_qsim():
        for page, anchor in PAGE.findall(text):
            target = ROOT / page
            if not target.is_file() or (anchor and anchor not in _anchors(target)):
                broken.append(f"{where}: {page}{anchor}")
    assert broken == []


def test_readme_sections_named_in_hints_exist():
    headings = {h.strip().lower() for h in re.findall(r"^#+\s+(.*)$", (ROOT / "README.md").read_text(), re.M)}
    broken = [f"{where}: {m.strip()}" for where, text in _strings_of_qsim()
              for m in README_SECTION.findall(text) if m.strip().lower() not in headings]
    assert broken == []
