"""Plain-text tables that wrap instead of cutting (issue 36): `rich.table.Table` rendered to a
string, in plain ASCII (a header, a dashed rule, the rows; no colour, no escape codes), so logs
and files stay clean. A cell too wide for its column wraps at spaces (a word longer than the
column folds onto the next line); no cell is ever cut with "…"."""

from __future__ import annotations

import io
import shutil
from collections.abc import Collection, Sequence

from rich import box
from rich.cells import cell_len
from rich.console import Console
from rich.table import Table
from rich.text import Text

#: The width used when the terminal's width is unknown (output piped to a file or a log).
FALLBACK_WIDTH = 100

#: The old fixed-width layout in ASCII: the header, a dashed rule under it, the rows; no frame.
#: Box lines are (left, horizontal, divider, right) for: top, head row, head rule, row rule, row,
#: foot rule, foot row, bottom.
PLAIN = box.Box("    \n    \n -  \n    \n    \n -  \n    \n    \n", ascii=True)


def terminal_width(fallback: int = FALLBACK_WIDTH) -> int:
    """The terminal's width (``COLUMNS`` first), or `fallback` when there is no terminal."""
    return shutil.get_terminal_size((fallback, 24)).columns


#: The narrowest the wrapping column (by default the first: the names) gets before the others wrap.
MIN_NAME_WIDTH = 12
#: Columns are two spaces apart: one of padding, one of divider.
GAP = 2


def _longest_word(text: str) -> int:
    return max((cell_len(word) for word in text.split()), default=0)


def natural_width(rows: Sequence[Sequence[str]]) -> int:
    """The width `render` needs to show `rows` (header first) without wrapping any cell."""
    n = len(rows[0])
    return sum(max(cell_len(row[i]) for row in rows) for i in range(n)) + GAP * (n - 1)


def column_widths(rows: Sequence[Sequence[str]], width: int, wrap: int = 0) -> list[int]:
    """Each column's text width so the table fits `width`: every column as wide as its widest
    cell where that fits; else column `wrap` (by default the first: the names) narrows to
    `MIN_NAME_WIDTH`, then the others narrow to their longest word (their cells wrap at spaces:
    no number or header is split), then column `wrap` to its longest word; only then do long
    words fold."""
    n = len(rows[0])
    widths = [max(cell_len(row[i]) for row in rows) for i in range(n)]
    words = [max(_longest_word(row[i]) for row in rows) for i in range(n)]
    budget = max(width - GAP * (n - 1), n)
    narrow = min(widths[wrap], max(words[wrap], MIN_NAME_WIDTH))
    floors = [
        [narrow if i == wrap else widths[i] for i in range(n)],
        [narrow if i == wrap else words[i] for i in range(n)],
        words,
        [1] * n,
    ]
    for floor in floors:
        while sum(widths) > budget:
            free = [i for i in range(n) if widths[i] > floor[i]]
            if not free:
                break
            widest = max(free, key=lambda i: (widths[i] - floor[i], -i))
            widths[widest] -= 1
    return widths


def _table(
    rows: Sequence[Sequence[str]], widths: Sequence[int], *, separated: bool, right: Collection[int]
) -> Table:
    table = Table(
        box=PLAIN,
        show_edge=False,
        pad_edge=False,
        padding=(0, 1, 0, 0),
        show_lines=separated,
        highlight=False,
    )
    for i, (header, w) in enumerate(zip(rows[0], widths, strict=True)):
        justify = "right" if i in right else "left"
        table.add_column(Text(header), overflow="fold", width=w, justify=justify)
    for row in rows[1:]:
        table.add_row(*(Text(cell) for cell in row))
    return table


def _console(width: int) -> Console:
    return Console(
        file=io.StringIO(),
        width=width,
        force_terminal=False,
        no_color=True,
        color_system=None,
        highlight=False,
        emoji=False,
        legacy_windows=False,
    )


def render(
    rows: Sequence[Sequence[str]],
    width: int | None = None,
    *,
    wrap: int = 0,
    right: Collection[int] = (),
) -> list[str]:
    """`rows` (the header first) as plain-text lines no wider than `width` (default: the
    terminal's, `terminal_width`): columns two spaces apart (those in `right` right-aligned), a
    dashed rule under the header. Where the table does not fit, cells wrap at spaces as
    `column_widths` says (column `wrap` first: by default the names); a blank line then
    separates the rows, so a wrapped cell reads as one. Nothing is cut."""
    width = terminal_width() if width is None else width
    widths = column_widths(rows, width, wrap)
    console = _console(max(width, sum(widths) + GAP * (len(widths) - 1)))
    with console.capture() as capture:
        console.print(_table(rows, widths, separated=natural_width(rows) > width, right=right))
    return [line.rstrip() for line in capture.get().splitlines()]
