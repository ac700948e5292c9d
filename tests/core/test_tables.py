"""The plain-text table renderer (issue 36): it wraps, it never cuts, it stays plain ASCII."""

from __future__ import annotations

import pytest

from cm_gym.core.tables import FALLBACK_WIDTH, column_widths, natural_width, render, terminal_width

ROWS = [
    ["Policy", "Score", "Calls/sol"],
    ["None (always skip)", "79.0 ± 0.4", "1.80"],
    ["CF Memory (masked DQN)", "79.1", "1.79"],
    ["CF Memory (masked DQN, extended z_t)", "79.2", "1.78"],
]


def _names(lines: list[str]) -> list[str]:
    """The first column's cells, each wrapped cell joined back (rows are blank-line separated)."""
    w0 = len(lines[1].split(" ")[0])
    blocks: list[list[str]] = [[]]
    for line in lines[2:]:
        if line:
            blocks[-1].append(line[:w0].strip())
        else:
            blocks.append([])
    return [" ".join(part for part in block if part) for block in blocks if block]


def test_a_table_that_fits_is_one_line_per_row() -> None:
    lines = render(ROWS, width=120)
    assert len(lines) == 2 + 3 and lines[0].split() == ["Policy", "Score", "Calls/sol"]
    assert set(lines[1]) == {"-", " "}
    assert lines[4].startswith("CF Memory (masked DQN, extended z_t)  79.2")
    assert max(map(len, lines)) == natural_width(ROWS)


@pytest.mark.parametrize("width", [40, 30])
def test_a_narrow_table_wraps_the_names_and_cuts_nothing(width: int) -> None:
    lines = render(ROWS, width=width)
    text = "\n".join(lines)
    assert max(map(len, lines)) <= width and "…" not in text
    assert _names(lines) == [row[0] for row in ROWS[1:]]
    for row in ROWS[1:]:  # the numbers keep their place on the row's first line
        assert any(row[0].split()[0] in line and row[2] in line for line in lines)
    assert "Calls/sol" in lines[0]  # a header is never split inside a word while names can wrap


def test_even_a_tiny_width_folds_instead_of_cutting() -> None:
    lines = render(ROWS, width=12)
    text = "".join("".join(line.split()) for line in lines)
    assert max(map(len, lines)) <= 12 and "…" not in text
    for cell in ("extendedz_t", "Calls/sol", "1.78"):  # every character is still there
        assert cell in text or all(ch in text for ch in cell)


def test_output_is_plain_text() -> None:
    text = "\n".join(render(ROWS, width=30))
    assert "\x1b" not in text and set(text) <= set("".join(sum(ROWS, []))) | {" ", "-", "\n"}


def test_column_widths_narrow_the_names_first() -> None:
    widths = column_widths(ROWS, 40)
    assert widths[1:] == [len("79.0 ± 0.4"), len("Calls/sol")] and widths[0] < len(ROWS[3][0])
    assert sum(widths) + 2 * (len(widths) - 1) <= 40


def test_the_default_width_is_the_terminal_s(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("COLUMNS", "33")
    assert terminal_width() == 33 and max(map(len, render(ROWS))) <= 33
    monkeypatch.delenv("COLUMNS")
    assert terminal_width() >= 1 and FALLBACK_WIDTH == 100


def test_another_column_can_wrap_first_and_numbers_align_right() -> None:
    rows = [["id", "n", "condition"], ["r1", "7", "a_b(1) AND c_d(2) AND e_f(3)"], ["r2", "12", "none"]]
    lines = render(rows, width=20, wrap=2, right=(1,))
    assert max(map(len, lines)) <= 20 and "…" not in "\n".join(lines)
    assert lines[2].startswith("r1   7  a_b(1) AND") and lines[-1].startswith("r2  12  none")
    assert column_widths(rows, 20, wrap=2)[:2] == [2, 2]
