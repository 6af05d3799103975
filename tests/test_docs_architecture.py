"""docs/architecture.md names only paths that exist, and its layer table is tests/test_layering.py's
LAYERS (same layers, same order, same units)."""
import re
from pathlib import Path

from test_layering import LAYERS

ROOT = Path(__file__).resolve().parents[1]
PAGE = ROOT / "docs" / "architecture.md"
TABLE_START = "<!-- layers: the table below is compared with tests/test_layering.py LAYERS -->"
TABLE_END = "<!-- end layers -->"


def named_paths(text: str) -> list[str]:
    """Code spans and link targets that are repository paths (they hold a '/')."""
    spans = re.findall(r"`([^`\n]+)`", text) + re.findall(r"\]\(([^)\s]+)\)", text)
    # a path has no spaces outside a <placeholder>; `#` and `(` mark code, not paths
    return [s for s in spans if "/" in s and not s.startswith(("http:", "https:"))
            and " " not in re.sub(r"<[^>]*>", "", s) and not re.search(r"[#(=]", s)]


def path_exists(path: str) -> bool:
    if "<" in path:         # a placeholder (`qsim/<name>/`, `tests/tosa/test_<x>.py`): its folder exists
        before = path.split("<")[0]
        return (ROOT / before).is_dir() if before.endswith("/") else (ROOT / before).parent.is_dir()
    if "*" in path:
        return any(ROOT.glob(path))
    return (ROOT / path).exists()


def layer_table(text: str) -> list[tuple[str, tuple[str, ...]]]:
    body = text.split(TABLE_START, 1)[1].split(TABLE_END, 1)[0]
    rows = [line for line in body.splitlines() if line.startswith("|")][2:]    # header, rule
    table = []
    for row in rows:
        layer, units = [cell.strip() for cell in row.strip("|").split("|")][:2]
        table.append((layer, tuple(re.findall(r"`([^`]+)`", units))))
    return table


def test_every_named_path_exists():
    text = PAGE.read_text(encoding="utf-8")
    paths = named_paths(text)
    assert len(paths) > 30                       # the page does name the files of each change
    assert [p for p in paths if not path_exists(p)] == []


def test_layer_table_is_the_layering_tests_layers():
    assert layer_table(PAGE.read_text(encoding="utf-8")) == LAYERS


def test_readme_links_the_page():
    assert "(docs/architecture.md)" in (ROOT / "README.md").read_text(encoding="utf-8")


def test_checks_catch_a_missing_path_and_a_reordered_layer():
    assert not path_exists("qsim/no_such_module.py") and path_exists("qsim/<name>/")
    assert not path_exists("qsim/nowhere/<name>.py")
    swapped = "\n".join([TABLE_START, "| layer | units | what |", "|---|---|---|",
                         "| front ends | `skriptnd` | x |", "| core | `errors` | y |", TABLE_END])
    assert layer_table(swapped) == [("front ends", ("skriptnd",)), ("core", ("errors",))]
    assert layer_table(swapped) != LAYERS
