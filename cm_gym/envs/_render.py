"""``render_mode="rgb_array"``: the ``ansi`` text drawn into a fixed-size RGB frame.

Gymnasium's video recorders and SB3's ``make_vec_env`` (which asks for ``rgb_array`` by default)
need an image; the env's state is text, so the frame is that text in Pillow's built-in bitmap font
(6 × 11 px per character, Latin-1), on a fixed ``ROWS × COLS`` character grid so every frame of an
episode has the same shape. Drawing a frame costs about 2 ms.
"""

from __future__ import annotations

from functools import lru_cache
from typing import Any

import numpy as np

COLS = 100
ROWS = 8
MARGIN = 4
BACKGROUND = (250, 250, 245)
FOREGROUND = (20, 20, 20)


@lru_cache(maxsize=1)
def _font() -> Any:
    from PIL import ImageFont

    loader = getattr(ImageFont, "load_default_imagefont", None)  # the bitmap font (Pillow >= 10.1)
    return loader() if loader is not None else ImageFont.load_default()


def _cell() -> tuple[int, int]:
    left, top, right, bottom = _font().getbbox("M" * 10)
    return max(1, (right - left) // 10), max(1, bottom - top) + 1


def frame_shape() -> tuple[int, int, int]:
    """(height, width, 3) of every frame."""
    w, h = _cell()
    return ROWS * h + 2 * MARGIN, COLS * w + 2 * MARGIN, 3


def _printable(line: str) -> str:
    line = line.expandtabs(4).encode("latin-1", "replace").decode("latin-1")
    line = "".join(ch if ch.isprintable() else "?" for ch in line)
    return line if len(line) <= COLS else line[: COLS - 1] + "~"


def text_frame(text: str) -> np.ndarray:
    """`text` (first `ROWS` lines, each cut to `COLS` characters) as a uint8 RGB array."""
    from PIL import Image, ImageDraw

    height, width, _ = frame_shape()
    _, line_h = _cell()
    image = Image.new("RGB", (width, height), BACKGROUND)
    draw = ImageDraw.Draw(image)
    lines = text.splitlines()
    if len(lines) > ROWS:
        lines = lines[: ROWS - 1] + [f"... {len(lines) - ROWS + 1} more line(s)"]
    for row, line in enumerate(lines):
        draw.text((MARGIN, MARGIN + row * line_h), _printable(line), font=_font(), fill=FOREGROUND)
    return np.asarray(image, dtype=np.uint8).copy()


class RenderMixin:
    """`MemorySelectionEnv.render`: the decision as text (``"ansi"``) or as an RGB frame of that
    text (``"rgb_array"``)."""

    render_mode: str | None
    _task: Any
    _decisions: int
    max_decisions: int
    _draft: str
    _retrieved: list[Any]

    def render(self) -> str | np.ndarray | None:
        """The decision as text (``"ansi"``) or as an RGB frame of that text (``"rgb_array"``)."""
        if self.render_mode is None:
            import gymnasium as gym

            gym.logger.warn("render() called with render_mode=None: pass render_mode='ansi' or 'rgb_array'")
            return None
        lines = [
            f"task {self._task.task_id if self._task else '-'} decision {self._decisions}/{self.max_decisions}"
        ]
        lines.append(f"draft: {self._draft}")
        for j, r in enumerate(self._retrieved, start=1):
            lines.append(f"slot {j}: {r.record.record_id} rel={r.relevance:.3f} u={r.record.u:+.2f}")
        text = "\n".join(lines)
        if self.render_mode == "ansi":
            return text
        return text_frame(text)
