"""The documentation's code blocks as tests: find them, and turn each into a command to run.

Which blocks run: every fenced block of ``README.md`` and ``docs/**/*.md`` whose language is
``python``/``py`` (run as a script with ``python``), ``bash``/``sh``/``shell`` (run with
``bash -e -o pipefail``) or ``console`` (only the lines that start with ``$ `` are commands, a
line ending in ``\\`` continues on the next; every other line is sample output, never compared).
Other languages (``text``, ``toml``, ``yaml``, …) are not run.

A block that cannot run in CI (a remote endpoint, a cluster, hours of compute) is immediately
preceded by the line ``<!-- not-run: <one-line reason> -->``; the site shows the reason as a
visible note (`docs_tools.mkdocs_hooks`). A marker that is not right above a block, or has no
reason, is an error (`marker_errors`).

Setting up this checkout is not repeated per block: the commands ``python3 -m venv .venv``,
``. .venv/bin/activate`` and ``pip install ... -e ".[extras]"`` (the checkout itself, optionally
with ``torch==X``) are the environment the tests already run in — CI builds it with README's
command 2 — so they are dropped from a block (`setup_commands` lists them, and the tests check
that their extras are among CI's). Everything else runs as written.
"""

from __future__ import annotations

import re
import shlex
from dataclasses import dataclass, field
from pathlib import Path

RUN_LANGS = {"python": "python", "py": "python", "bash": "shell", "sh": "shell", "shell": "shell"}
RUN_LANGS["console"] = "console"
MARKER = re.compile(r"^\s*<!--\s*not-run:(.*?)-->\s*$")
_FENCE = re.compile(r"^(?P<indent>[ \t]*)(?P<fence>`{3,}|~{3,})[ \t]*(?P<info>[^`\s]*)[^`]*$")
_SETUP_VENV = re.compile(r"^python3? -m venv \.venv$")
_SETUP_ACTIVATE = re.compile(r"^(\.|source) \.venv/bin/activate$")
_SELF = re.compile(r"^\.(\[(?P<extras>[\w,-]+)\])?$")


@dataclass(frozen=True)
class Block:
    """One fenced code block of a Markdown page."""

    path: str  # relative to the repository root, with "/"
    line: int  # 1-based line of the opening fence
    lang: str  # the fence's info word, lower case ("" when none)
    text: str  # the block's content, its fence indentation removed
    not_run: str | None = None  # the reason of a preceding not-run marker

    @property
    def id(self) -> str:
        return f"{self.path}:{self.line}"

    @property
    def kind(self) -> str | None:
        """ "python", "shell" or "console" for a block that runs, else None."""
        return RUN_LANGS.get(self.lang)


@dataclass
class Page:
    """A Markdown page's blocks, and its not-run markers that stand above no block."""

    path: str
    blocks: list[Block] = field(default_factory=list)
    orphan_markers: list[int] = field(default_factory=list)  # 1-based lines
    empty_reasons: list[int] = field(default_factory=list)


def parse_page(text: str, path: str) -> Page:
    """The fenced blocks of a Markdown text (CommonMark fences of backticks or tildes)."""
    page = Page(path)
    lines = text.splitlines()
    i = 0
    pending: tuple[int, str] | None = None  # (line, reason) of a marker just read
    while i < len(lines):
        line = lines[i]
        m = _FENCE.match(line)
        if m is None:
            marker = MARKER.match(line)
            if pending is not None:
                page.orphan_markers.append(pending[0])
            pending = None
            if marker is not None:
                reason = marker.group(1).strip()
                if not reason:
                    page.empty_reasons.append(i + 1)
                pending = (i + 1, reason)
            i += 1
            continue
        indent, fence, info = m.group("indent"), m.group("fence"), m.group("info").lower()
        body: list[str] = []
        j = i + 1
        close = re.compile(rf"^[ \t]*{re.escape(fence[0])}{{{len(fence)},}}[ \t]*$")
        while j < len(lines) and not close.match(lines[j]):
            raw = lines[j]
            body.append(raw[len(indent) :] if raw.startswith(indent) else raw.lstrip())
            j += 1
        reason = pending[1] if pending is not None else None
        page.blocks.append(Block(path, i + 1, info, "\n".join(body) + "\n", reason))
        pending = None
        i = j + 1
    if pending is not None:
        page.orphan_markers.append(pending[0])
    return page


def doc_pages(root: Path) -> list[Path]:
    """README.md and every Markdown file under docs/, in a stable order."""
    pages = [root / "README.md"] if (root / "README.md").is_file() else []
    return pages + sorted((root / "docs").rglob("*.md"))


_INCLUDE = re.compile(r'^[ \t]*-{1,}8<-{1,}[ \t]+"(?P<file>[^"]+)"[ \t]*$', re.M)


def expand_includes(text: str, root: Path) -> str:
    """pymdownx.snippets' ``--8<-- "path"`` lines replaced by the file (relative to the repository
    root), as the site shows them: a tutorial's block is the tested script itself."""

    def read(m: re.Match[str]) -> str:
        path = root / m.group("file")
        if not path.is_file():
            raise FileNotFoundError(f"--8<-- include of a missing file: {m.group('file')}")
        return path.read_text(encoding="utf-8").rstrip("\n")

    return _INCLUDE.sub(read, text)


def parse_file(path: Path, root: Path) -> Page:
    """The blocks of a page of the repository, with their includes expanded."""
    page = parse_page(path.read_text(encoding="utf-8"), path.relative_to(root).as_posix())
    page.blocks = [
        Block(b.path, b.line, b.lang, expand_includes(b.text, root), b.not_run) for b in page.blocks
    ]
    return page


def marker_errors(page: Page) -> list[str]:
    """Misplaced or empty not-run markers of a page, one message each."""
    out = [
        f"{page.path}:{n}: not-run marker is not immediately followed by a code block"
        for n in page.orphan_markers
    ]
    out += [f"{page.path}:{n}: not-run marker without a reason" for n in page.empty_reasons]
    return out


def _console_commands(text: str) -> list[str]:
    """The commands of a console block: ``$ `` lines, with backslash continuations."""
    commands: list[str] = []
    lines = text.splitlines()
    i = 0
    while i < len(lines):
        line = lines[i]
        if line.startswith("$ ") or line == "$":
            command = line[2:]
            while command.endswith("\\") and i + 1 < len(lines):
                i += 1
                command = command + "\n" + lines[i]
            commands.append(command)
        i += 1
    return commands


def _is_setup(part: str) -> list[str] | None:
    """The extras (possibly empty) when `part` sets up this checkout, else None."""
    part = part.strip()
    if _SETUP_VENV.match(part) or _SETUP_ACTIVATE.match(part):
        return []
    try:
        words = shlex.split(part)
    except ValueError:
        return None
    if words[:2] == ["python", "-m"]:
        words = words[2:]
    if words[:2] != ["pip", "install"]:
        return None
    extras: list[str] | None = None
    rest = [w for w in words[2:] if w not in ("-q", "--quiet", "-U", "--upgrade")]
    for k, w in enumerate(rest):
        if w == "-e" and k + 1 < len(rest) and (m := _SELF.match(rest[k + 1])):
            extras = (m.group("extras") or "").split(",") if m.group("extras") else []
        elif w.startswith("torch==") or (k > 0 and rest[k - 1] == "-e"):
            continue
        else:
            return None
    return extras


def split_setup(script: str) -> tuple[str, list[str]]:
    """`script` without the commands that set up this checkout, and the extras they install."""
    kept_lines: list[str] = []
    extras: list[str] = []
    for line in script.splitlines():
        parts = [p for p in re.split(r"\s+&&\s+", line.strip())] if line.strip() else []
        if not parts or line.lstrip().startswith("#"):
            kept_lines.append(line)
            continue
        comment = ""
        if "  #" in parts[-1]:
            parts[-1], comment = parts[-1].split("  #", 1)
            comment = "  #" + comment
        kept = []
        for part in parts:
            found = _is_setup(part)
            if found is None:
                kept.append(part)
            else:
                extras += found
        if kept:
            kept_lines.append(" && ".join(kept) + comment)
    return "\n".join(kept_lines) + "\n", extras


def shell_script(block: Block) -> tuple[str, list[str]]:
    """The bash script a shell or console block runs, and the extras of its dropped setup."""
    text = "\n".join(_console_commands(block.text)) + "\n" if block.kind == "console" else block.text
    return split_setup(text)


def installs_packages(script: str) -> bool:
    """True when the script pip-installs something (the page then gets its own environment)."""
    return re.search(r"(^|[\s;&|(])(python3? -m )?pip3? install\b", script) is not None


def ci_extras(ci_script: str) -> set[str]:
    """The extras of this checkout that CI installs (every ``pip install -e ".[...]"`` line)."""
    found: set[str] = set()
    for m in re.finditer(r"-e\s+[\"']?\.\[([\w,-]+)\]", ci_script):
        found |= set(m.group(1).split(","))
    return found
