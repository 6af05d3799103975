"""docs/architecture.md names only paths that exist (a path marked "(to be created)" must not
exist yet), each "where a change goes" recipe the page promises names the files to touch, and its
layer table is tests/test_layering.py's LAYERS (same layers, same order, same units)."""
import re
from pathlib import Path

from test_layering import LAYERS

ROOT = Path(__file__).resolve().parents[1]
PAGE = ROOT / "docs" / "architecture.md"
TABLE_START = "<!-- layers: the table below is compared with tests/test_layering.py LAYERS -->"
TABLE_END = "<!-- end layers -->"
TO_BE_CREATED = "(to be created)"
RECIPES_HEADING = "## Where each change goes"
# the recipes a newcomer looks for first (issue: the next features need them)
RECIPES = ("Add a TOSA operator.", "Add an observer.", "Add an ONNX operator.", "Add a TFLite builtin.",
           "Add an integer lowering", "Add a vector-unit opcode", "Add an NNEF operator",
           "Add a front end.", "Change the PE.", "Add a report plot.", "Add a simulate option",
           "Add a qsim command.")


def _is_path(span: str) -> bool:
    # a path holds a '/' and no spaces outside a <placeholder>; `#` and `(` mark code, not paths
    return ("/" in span and not span.startswith(("http:", "https:"))
            and " " not in re.sub(r"<[^>]*>", "", span) and not re.search(r"[#(=]", span))


def named_paths(text: str) -> list[str]:
    """Code spans and link targets that are repository paths, but for those marked
    "(to be created)" right after the span."""
    spans = [m.group(1) for m in re.finditer(r"`([^`\n]+)`", text)
             if not text.startswith(" " + TO_BE_CREATED, m.end())]
    spans += re.findall(r"\]\(([^)\s]+)\)", text)
    return [s for s in spans if _is_path(s)]


def planned_paths(text: str) -> list[str]:
    """The paths marked "(to be created)": files a recipe says where to put, not there yet."""
    return [m.group(1) for m in re.finditer(r"`([^`\n]+)`", text)
            if text.startswith(" " + TO_BE_CREATED, m.end()) and _is_path(m.group(1))]


def recipes(text: str) -> dict[str, str]:
    """The recipes of the "where each change goes" section: bold title -> its text."""
    body = text.split(RECIPES_HEADING, 1)[1].split("\n## ", 1)[0]
    parts = re.split(r"^\*\*(.+?)\*\*", body, flags=re.M)
    return {title: recipe for title, recipe in zip(parts[1::2], parts[2::2])}


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


def test_paths_to_be_created_do_not_exist_yet():
    text = PAGE.read_text(encoding="utf-8")
    planned = planned_paths(text)
    assert [p for p in planned if (ROOT / p).exists()] == []    # once it exists, drop the mark


def test_each_recipe_names_the_files_to_touch():
    found = recipes(PAGE.read_text(encoding="utf-8"))
    missing = [title for title in RECIPES if not any(t.startswith(title) for t in found)]
    assert missing == []
    for title, text in found.items():
        named = named_paths(text)
        assert len(named) >= 3, title          # the files to change and the tests that hold it
        assert any(p.startswith("tests/") for p in named + planned_paths(text)), title


def test_layer_table_is_the_layering_tests_layers():
    assert layer_table(PAGE.read_text(encoding="utf-8")) == LAYERS


def test_readme_links_the_page():
    assert "(docs/architecture.md)" in (ROOT / "README.md").read_text(encoding="utf-8")


def test_checks_catch_a_missing_path_and_a_reordered_layer():
    assert not path_exists("qsim/no_such_module.py") and path_exists("qsim/<name>/")
    assert not path_exists("qsim/nowhere/<name>.py")
    page = "x `qsim/new/` (to be created) and `qsim/ir.py`\n**Add a thing.** 1. `qsim/ir.py` `tests/x.py`\n"
    assert named_paths(page) == ["qsim/ir.py", "qsim/ir.py", "tests/x.py"]
    assert planned_paths(page) == ["qsim/new/"]
    assert list(recipes(RECIPES_HEADING + "\n" + page + "## Next\n**Other.** `a/b`")) == ["Add a thing."]
    swapped = "\n".join([TABLE_START, "| layer | units | what |", "|---|---|---|",
                         "| front ends | `skriptnd` | x |", "| core | `errors` | y |", TABLE_END])
    assert layer_table(swapped) == [("front ends", ("skriptnd",)), ("core", ("errors",))]
    assert layer_table(swapped) != LAYERS
