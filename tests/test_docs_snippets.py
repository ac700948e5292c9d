"""Every code block of README.md and docs/**/*.md runs, as a user would copy it (issue 26).

One test per block, named ``path:line`` of its opening fence. A page's blocks run in order in one
fresh folder (`docs_tools.runner`), under ``CM_GYM_QUICK=1`` (the documented smoke sizes); a block
marked ``<!-- not-run: reason -->`` is reported as skipped with its reason, and the site shows the
reason (`docs_tools.mkdocs_hooks`). The other tests keep the conventions honest: markers well
placed and visible, README's install commands those CI runs, and the collector itself able to
fail (it catches the README block that lacked ``import cm_gym``).
"""

from __future__ import annotations

import os
import re
import tempfile
from pathlib import Path

import pytest

from docs_tools.mkdocs_hooks import NOTE_TITLE, mark_not_run
from docs_tools.runner import PageRun, run_text
from docs_tools.snippets import (
    Block,
    ci_extras,
    doc_pages,
    marker_errors,
    parse_file,
    parse_page,
    shell_script,
)

ROOT = Path(__file__).resolve().parents[1]
PAGES = [parse_file(p, ROOT) for p in doc_pages(ROOT)]
BLOCKS = [b for page in PAGES for b in page.blocks if b.kind]
_RUNS: dict[str, PageRun] = {}


@pytest.fixture(scope="session")
def docs_cache() -> Path:
    """One CM_GYM_CACHE for every page: the run's own (CI sets one) or a fresh folder."""
    return Path(os.environ.get("CM_GYM_CACHE") or tempfile.mkdtemp(prefix="cm_gym_docs_cache_"))


@pytest.mark.slow
@pytest.mark.docs
@pytest.mark.timeout(1800)
@pytest.mark.parametrize("block", BLOCKS, ids=[b.id for b in BLOCKS])
def test_snippet(block: Block, docs_cache: Path) -> None:
    if block.not_run:
        pytest.skip(f"not run in CI: {block.not_run}")
    page = next(p for p in PAGES if p.path == block.path)
    run = _RUNS.setdefault(block.path, PageRun(page.blocks, docs_cache, examples=ROOT / "examples"))
    result = run.run(block)
    assert result.returncode == 0, result.failure()


def test_there_are_blocks_to_run() -> None:
    """The collector sees the README's commands and Python blocks (a broken parser sees none)."""
    readme = [b for b in BLOCKS if b.path == "README.md"]
    assert {b.kind for b in readme} >= {"shell", "python"}
    assert sum(1 for b in BLOCKS if not b.not_run) >= 10


def test_not_run_markers_are_well_placed() -> None:
    errors = [e for page in PAGES for e in marker_errors(page)]
    assert not errors, "\n".join(errors)


def test_not_run_blocks_are_visibly_marked_in_the_site() -> None:
    """The site's transform puts "Not run in CI" and the reason right above every not-run block."""
    marked = 0
    for page in PAGES:
        rendered = mark_not_run((ROOT / page.path).read_text(encoding="utf-8"))
        after = parse_page(rendered, page.path)
        lines = rendered.splitlines()
        assert len(after.blocks) == len(page.blocks)
        for before, block in zip(page.blocks, after.blocks, strict=True):
            if before.not_run:
                above = lines[block.line - 4 : block.line - 1]
                assert above[0].strip() == f'!!! note "{NOTE_TITLE}"', (before.id, above)
                assert above[1].strip() == before.not_run and above[2] == "", (before.id, above)
                marked += 1
    assert marked == sum(1 for page in PAGES for b in page.blocks if b.not_run) > 0


def test_readme_commands_are_what_ci_runs() -> None:
    """README command 2 (set up + tests) is .ci/run's install and test command; command 1 sets
    up a subset of its extras; every setup the collector drops installs extras CI has."""
    readme = [b for b in BLOCKS if b.path == "README.md" and b.kind == "shell"]
    one, two = readme[0].text.strip(), readme[1].text.strip()
    ci = (ROOT / ".ci" / "run").read_text()
    m = re.fullmatch(r"python3 -m venv \.venv && \. \.venv/bin/activate && (.+) && (python -m pytest.*)", two)
    assert m, two
    installs, test = m.groups()
    for install in installs.split(" && "):
        assert install.startswith("pip install "), two
        assert f"pip install -q {install.removeprefix('pip install ')}" in ci, (
            f"README command 2's {install!r} is not in .ci/run"
        )
    assert re.search(rf"^{re.escape(test)}( -q| -p no:cacheprovider)*\s*(#.*)?$", ci, re.M), (
        "README's test command is not .ci/run's"
    )
    assert one.startswith("python3 -m venv .venv && . .venv/bin/activate && pip install ")
    for block in BLOCKS:
        if block.kind != "python":
            _, extras = shell_script(block)
            assert set(extras) <= ci_extras(ci), (
                f"{block.id} sets up extras {extras} that CI does not install"
            )


#: README's "With your RL library" block before issue 26, under the ``if __name__ == "__main__":``
#: its own comment asked for (verbatim, it fails earlier: a process pool started at import time).
OLD_RL_LIBRARY_BLOCK = """
```python
import gymnasium
from sb3_contrib import MaskablePPO
from stable_baselines3.common.env_util import make_vec_env
from stable_baselines3.common.vec_env import SubprocVecEnv

if __name__ == "__main__":  # in a script, as for any process pool
    venv = make_vec_env("cm_gym/SQL-v0", n_envs=4, vec_env_cls=SubprocVecEnv)  # SB3's defaults work
    MaskablePPO("MlpPolicy", venv).learn(10_000)  # masks via env_method("action_masks")
    envs = gymnasium.make_vec("cm_gym/SQL-v0", num_envs=4, vectorization_mode="async")
```
"""


@pytest.mark.slow
@pytest.mark.docs
def test_collector_fails_on_the_old_readme_block_without_import_cm_gym(docs_cache: Path) -> None:
    """The old block never imported cm_gym: the collector runs it as a user would, and the test
    fails, with Gymnasium's NamespaceNotFound from the workers in the report."""
    (result,) = run_text(OLD_RL_LIBRARY_BLOCK, "old-README.md", docs_cache)
    assert result.returncode != 0
    assert "NamespaceNotFound: Namespace cm_gym not found" in result.output, result.output[-3000:]
    assert "old-README.md:2" in result.failure()
