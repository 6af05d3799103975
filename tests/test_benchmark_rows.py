"""benchmarks/_rows.py: the report rows benchmarks/models.py and accuracy.py merge with the
previous run's, and the JSON + Markdown pair they write."""
import json
import os
import sys

BENCHMARKS = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "benchmarks")
sys.path.insert(0, BENCHMARKS)

from _rows import merged_rows, read_previous, with_kept_sections, write_report  # noqa: E402


def test_new_rows_replace_old_ones_and_the_rest_keep_theirs_in_order():
    previous = {"b": {"v": 1}, "a": {"v": 2}, "gone": {"v": 3}}
    new = {"b": {"v": 10}, "c": {"v": 11}}
    merged = merged_rows(previous, new, ["a", "b", "c"])
    assert list(merged) == ["a", "b", "c"]                   # the given order, "gone" dropped
    assert merged == {"a": {"v": 2}, "b": {"v": 10}, "c": {"v": 11}}
    assert previous["b"] == {"v": 1}                         # inputs untouched


def test_write_report_writes_both_files_and_reads_back(tmp_path, capsys):
    assert read_previous(tmp_path / "r.json") == {}
    text = write_report(tmp_path, "r", {"x": 1.5}, lambda r: f"# x is {r['x']}")
    assert text == "# x is 1.5" and capsys.readouterr().out.strip() == text
    assert (tmp_path / "r.md").read_text() == text + "\n"
    assert json.loads((tmp_path / "r.json").read_text()) == {"x": 1.5} == read_previous(tmp_path / "r.json")


def test_write_report_makes_the_folder_ends_in_one_newline_and_may_stay_quiet(tmp_path, capsys):
    out = tmp_path / "new" / "reports"
    text = write_report(out, "q", {"y": 2}, lambda r: f"# y\n\n{r['y']}\n\n", echo=False)
    assert text == "# y\n\n2" and capsys.readouterr().out == ""
    assert (out / "q.md").read_text() == "# y\n\n2\n"
    assert json.loads((out / "q.json").read_text()) == {"y": 2}


def test_regenerated_report_keeps_the_written_sections_and_drops_the_old_table():
    previous = "# speed\n\nold table | 1 |\n\n## Reading\nwhy 1\n\n## Idle check\nfigures\n"
    text = with_kept_sections("# speed\n\nnew table | 2 |\n", previous)
    assert text == "# speed\n\nnew table | 2 |\n\n## Reading\nwhy 1\n\n## Idle check\nfigures\n"
    assert "old table" not in text
    assert with_kept_sections("# speed\n", None) == "# speed\n"
    assert with_kept_sections("# speed\n", "# speed\nold\n") == "# speed\n"     # nothing written to keep
