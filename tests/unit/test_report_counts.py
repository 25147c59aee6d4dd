"""The report's counts read as English (``1 prompt · 1 turn · 1 file change``) and its gutter
is sized from the largest line number a diff shows, whatever its number of digits."""

from __future__ import annotations

import re

from ledger.review.html import counted, gutter_css, header_counts
from ledger.review.html_diff import MAX_GUTTER_DIGITS, diff_table, gutter_digits


def test_one_of_each_is_singular_in_the_header() -> None:
    one = {"prompts": 1, "turns": 1, "files": 1}
    assert header_counts(one) == "1 prompt · 1 turn · 1 file change"


def test_zero_and_many_are_plural_in_the_header() -> None:
    assert header_counts({"prompts": 0, "turns": 2, "files": 30}) == (
        "0 prompts · 2 turns · 30 file changes"
    )
    assert counted(1, "file") == "1 file" and counted(21, "file") == "21 files"


def test_gutter_digits_come_from_the_largest_line_a_hunk_shows() -> None:
    assert gutter_digits(["@@ -1 +1 @@", "-a", "+b"]) == 3
    assert gutter_digits(["@@ -9990,5 +9990,5 @@"]) == 4  # lines 9990..9994
    assert gutter_digits(["@@ -9995,10 +9995,10 @@"]) == 5  # ... up to 10004
    assert gutter_digits(["@@ -1,3 +1,3 @@", "@@ -123456,2 +123450,9 @@"]) == 6
    assert gutter_digits(["@@ -0,0 +1,20000 @@"]) == 5
    assert gutter_digits(["diff --git a/x b/x", "Binary files a/x and b/x differ"]) == 3
    assert gutter_digits([f"@@ -1 +{10**20} @@"]) == MAX_GUTTER_DIGITS


def test_every_gutter_class_a_table_can_carry_has_a_width() -> None:
    table = diff_table("x.txt", ["@@ -99999,2 +99999,2 @@", " a", "-b", "+c"])
    assert table.startswith('<table class="diff g6">')
    assert ">99999<" in table and ">100000<" in table
    widths = dict(
        re.findall(r"table\.g(\d+) col\.nc\{width:calc\((\d+)ch \+ 14px\)\}", gutter_css())
    )
    assert widths == {str(n): str(n) for n in range(3, MAX_GUTTER_DIGITS + 1)}
