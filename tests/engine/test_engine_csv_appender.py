"""Appending to a results CSV written by an older dcnlab (an experiment resumed after an
upgrade that added a column): the old rows keep every cell, new rows fill every column."""

from __future__ import annotations

import csv
from pathlib import Path

import pytest

from dcnlab.benchmarks.engine.results import CsvAppender, ResultsError


def _rows(path: Path) -> list[dict[str, str]]:
    with open(path, newline="") as fh:
        return list(csv.DictReader(fh))


def test_a_new_column_is_added_to_the_header_and_old_rows_keep_their_cells(
        tmp_path: Path) -> None:
    path = tmp_path / "controller.csv"
    old = CsvAppender(path, ["scheme", "seed", "late_dropped", "retired"])
    old.write([{"scheme": "tcppath", "seed": 1, "late_dropped": 4, "retired": 7}])
    old.close()
    new = CsvAppender(path, ["scheme", "seed", "late_dropped", "dead_end_dropped"])
    new.write([{"scheme": "tcppath", "seed": 2, "late_dropped": 5, "dead_end_dropped": 9}])
    new.close()
    with open(path, newline="") as fh:
        header = next(csv.reader(fh))
    # the given columns first, then the file's own that they lack: nothing is lost
    assert header == ["scheme", "seed", "late_dropped", "dead_end_dropped", "retired"]
    assert _rows(path) == [
        {"scheme": "tcppath", "seed": "1", "late_dropped": "4", "dead_end_dropped": "",
         "retired": "7"},
        {"scheme": "tcppath", "seed": "2", "late_dropped": "5", "dead_end_dropped": "9",
         "retired": ""}]
    assert not list(tmp_path.glob("*.upgrading"))
    # The same columns again: appended as they are, the header stays.
    again = CsvAppender(path, ["scheme", "seed", "late_dropped", "dead_end_dropped"])
    again.write([{"scheme": "ecmp", "seed": 3}])
    again.close()
    assert [r["seed"] for r in _rows(path)] == ["1", "2", "3"]


def test_a_file_with_rows_longer_than_its_header_is_refused_and_left_as_it_was(
        tmp_path: Path) -> None:
    path = tmp_path / "controller.csv"
    path.write_text("scheme,seed\ntcppath,1,4\n")
    with pytest.raises(ResultsError, match=r"line 2: 3 cells under a header of 2"):
        CsvAppender(path, ["scheme", "seed", "late_dropped"])
    assert path.read_text() == "scheme,seed\ntcppath,1,4\n"
    assert not list(tmp_path.glob("*.upgrading"))
