"""MkDocs hooks of the documentation site (``hooks:`` in mkdocs.yml).

- The home page is ``README.md`` itself (one text for GitHub and the site), its links to
  ``docs/...`` rewritten to the site's pages.
- A ``<!-- not-run: reason -->`` marker (`docs_tools.snippets`) becomes a visible note right
  above its code block: "Not run in CI: reason".
- ``<!-- docstring: cm_gym/envs/selection.py::MemorySelectionEnv -->`` is replaced by that
  docstring, read statically (the env's spec sheet is generated, so it cannot drift).
- A link to a file of the repository outside ``docs/`` (``../examples/x.py``, from the README
  ``examples/x.py``) becomes a link into the repository when ``repo_url`` is set, else the path
  as code: the site holds only the docs, and ``mkdocs build --strict`` fails on broken links.

The functions take and return Markdown text, so the tests check them without MkDocs installed.
"""

from __future__ import annotations

import ast
import posixpath
import re
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:  # MkDocs loads this file by path
    sys.path.insert(0, str(ROOT))

from docs_tools.snippets import MARKER  # noqa: E402

NOTE_TITLE = "Not run in CI"
_LINK = re.compile(r"(?<!!)\[(?P<text>[^\]\n]+)\]\((?P<target>[^)\s]+)\)")


def mark_not_run(markdown: str) -> str:
    """Each not-run marker replaced by a visible admonition (same indentation) with its reason."""
    out = []
    for line in markdown.splitlines():
        m = MARKER.match(line)
        if m is None:
            out.append(line)
            continue
        indent = line[: len(line) - len(line.lstrip())]
        out += [f'{indent}!!! note "{NOTE_TITLE}"', f"{indent}    {m.group(1).strip()}", ""]
    return "\n".join(out) + ("\n" if markdown.endswith("\n") else "")


def rewrite_links(markdown: str, page_dir: str, repo_url: str | None = None) -> str:
    """Links from a page in `page_dir` (repository-relative, "docs" or "") to repository files
    outside docs/: into the repository (`repo_url`) or as code. Links into docs/ from the README
    are made relative to the site's root."""

    def fix(m: re.Match[str]) -> str:
        text, target = m.group("text"), m.group("target")
        if re.match(r"^[a-z][a-z0-9+.-]*:|^#|^/", target):
            return m.group(0)
        path, _, anchor = target.partition("#")
        resolved = posixpath.normpath(posixpath.join(page_dir, path))
        if resolved.startswith("docs/"):
            site_path = resolved[len("docs/") :]
            if page_dir == "docs" or page_dir.startswith("docs/"):
                return m.group(0)
            return f"[{text}]({site_path}{'#' + anchor if anchor else ''})"
        if resolved.startswith(".."):
            return m.group(0)
        if repo_url:
            return f"[{text}]({repo_url.rstrip('/')}/blob/main/{resolved})"
        return text if text.startswith("`") else f"`{text}`" if text == resolved else f"{text} (`{resolved}`)"

    return _LINK.sub(fix, markdown)


_DOCSTRING = re.compile(r"^<!--\s*docstring:\s*(?P<file>[\w./-]+\.py)::(?P<name>[\w.]+)\s*-->\s*$", re.M)


def docstring_of(file: Path, name: str) -> str:
    """The docstring of class or function `name` (dotted for nested) in a Python file, read
    statically (nothing is imported)."""
    node: Any = ast.parse(file.read_text(encoding="utf-8"))
    for part in name.split("."):
        node = next(
            (n for n in node.body if isinstance(n, (ast.ClassDef, ast.FunctionDef)) and n.name == part), None
        )
        if node is None:
            raise ValueError(f"{file}: no {name} for the docs")
    doc = ast.get_docstring(node)
    if not doc:
        raise ValueError(f"{file}: {name} has no docstring")
    return doc


def include_docstrings(markdown: str, root: Path = ROOT) -> str:
    """Each ``<!-- docstring: path/to/file.py::Name -->`` line replaced by that docstring."""
    return _DOCSTRING.sub(lambda m: docstring_of(root / m.group("file"), m.group("name")), markdown)


def readme_as_home(readme: str, repo_url: str | None = None) -> str:
    """The README as the site's home page."""
    return rewrite_links(readme, "", repo_url)


def on_files(files: Any, config: Any) -> Any:
    """Add README.md as the site's home page (index.md), unless docs/ has its own."""
    from mkdocs.structure.files import File

    if files.get_file_from_path("index.md") is None:
        text = readme_as_home((ROOT / "README.md").read_text(encoding="utf-8"), config.get("repo_url"))
        files.append(File.generated(config, "index.md", content=text))
    return files


def on_page_markdown(markdown: str, page: Any, config: Any, files: Any) -> str:
    """Not-run notes and repository links, on every page."""
    is_home = page.file.src_uri == "index.md" and page.file.generated_by is not None
    if not is_home:
        page_dir = posixpath.join("docs", posixpath.dirname(page.file.src_uri)).rstrip("/")
        markdown = rewrite_links(markdown, page_dir, config.get("repo_url"))
    return mark_not_run(include_docstrings(markdown))
