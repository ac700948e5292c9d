"""Run a page's code blocks in order, in one fresh folder, the way a reader would.

A page's blocks share their folder (a later block may read what an earlier one wrote), which
starts with a copy of the repository's ``examples/`` (what a reader in a clone has), but not
their variables: each Python block is a whole script run by ``python`` (so ``if __name__ ==
"__main__":`` and process pools behave as for a user), each shell block a ``bash -e -o pipefail``
script. The environment is the test run's own, plus:

- ``CM_GYM_QUICK=1``: the documented smoke sizes (`cm_gym.core.quick`), so a block that runs the
  main job finishes in a minute or two while its text stays what a user types;
- ``CM_GYM_CACHE``: one cache for the whole run (default stores are built once, content-keyed);
- ``MPLBACKEND=Agg`` and no terminal: progress is printed as lines;
- a page that pip-installs something (the example plugin) gets its own virtual environment
  layered on the test environment (it sees every installed package, its installs stay in it,
  and its console scripts run its interpreter); pip runs offline there (``PIP_NO_INDEX``).
"""

from __future__ import annotations

import contextlib
import os
import resource
import shutil
import signal
import subprocess
import sys
import sysconfig
import tempfile
import textwrap
import time
from dataclasses import dataclass
from pathlib import Path

from docs_tools.snippets import Block, installs_packages, shell_script

#: seconds one block may run (the slowest, the main job at quick sizes, takes about two minutes)
BLOCK_TIMEOUT_S = 900
TAIL = 60  # output lines shown when a block fails
_JUNK = ("__pycache__", "*.egg-info", "build", "runs")


@dataclass
class Result:
    block: Block
    returncode: int
    output: str
    seconds: float  # wall clock
    cpu_seconds: float = 0.0  # user + system of the block's processes (those waited for)

    def failure(self) -> str:
        tail = "\n".join(self.output.splitlines()[-TAIL:])
        return (
            f"{self.block.id}: the {self.block.lang} block exited with status {self.returncode} "
            f"after {self.seconds:.0f} s\n--- block ---\n{self.block.text}--- output (last {TAIL} lines) ---\n{tail}"
        )


def _layered_venv(where: Path) -> Path:
    """A venv whose site-packages adds the running interpreter's (``site.addsitedir``, so its
    .pth files, editable installs included, apply) and whose console scripts are the running
    environment's, rewritten to start its own interpreter."""
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(where)], check=True)
    python = where / "bin" / "python"
    child_site = subprocess.run(
        [str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
        check=True,
        capture_output=True,
        text=True,
    ).stdout.strip()
    parent_site = sysconfig.get_paths()["purelib"]
    Path(child_site, "_cm_gym_docs_parent.pth").write_text(f"import site; site.addsitedir({parent_site!r})\n")
    parent_bin = Path(sys.executable).parent
    for script in parent_bin.iterdir():
        target = where / "bin" / script.name
        if target.exists() or not script.is_file():
            continue
        try:
            head, _, rest = script.read_bytes().partition(b"\n")
        except OSError:
            continue
        if head.startswith(b"#!") and b"python" in head and not script.name.startswith("activate"):
            target.write_bytes(b"#!" + str(python).encode() + b"\n" + rest)
            target.chmod(0o755)
    pip = where / "bin" / "pip"
    pip.write_text(f"#!{python}\nimport sys\nfrom pip._internal.cli.main import main\nsys.exit(main())\n")
    pip.chmod(0o755)
    return where


class PageRun:
    """The folder and environment shared by one page's blocks; runs them in order, once each."""

    def __init__(
        self, blocks: list[Block], cache: Path, scratch: Path | None = None, examples: Path | None = None
    ) -> None:
        self.blocks = [b for b in blocks if b.kind and not b.not_run]
        self.scratch = Path(scratch or tempfile.mkdtemp(prefix="cm_gym_docs_"))
        self.folder = self.scratch / "work"
        self.folder.mkdir(parents=True, exist_ok=True)
        if examples is not None:  # what a reader in a clone has next to them
            shutil.copytree(examples, self.folder / "examples", ignore=shutil.ignore_patterns(*_JUNK))
        self.cache = cache
        self.results: dict[str, Result] = {}
        self._env: dict[str, str] | None = None

    def env(self) -> dict[str, str]:
        if self._env is None:
            env = dict(os.environ)
            env.update(CM_GYM_QUICK="1", CM_GYM_CACHE=str(self.cache), MPLBACKEND="Agg", PYTHONUNBUFFERED="1")
            env.pop("PYTEST_CURRENT_TEST", None)
            bin_dir = str(Path(sys.executable).parent)
            if any(b.kind != "python" and installs_packages(shell_script(b)[0]) for b in self.blocks):
                venv = _layered_venv(self.scratch / "venv")
                bin_dir = str(venv / "bin")
                env.update(VIRTUAL_ENV=str(venv), PIP_NO_INDEX="1", PIP_DISABLE_PIP_VERSION_CHECK="1")
                env["PIP_NO_BUILD_ISOLATION"] = "0"  # pip's inverted switch: build with what is installed
            env["PATH"] = bin_dir + os.pathsep + env.get("PATH", "")
            self._env = env
        return self._env

    def _command(self, block: Block) -> list[str]:
        if block.kind == "python":
            script = self.scratch / f"block_L{block.line}.py"
            script.write_text(block.text)
            return ["python", str(script)]
        text, _ = shell_script(block)
        return ["bash", "-e", "-o", "pipefail", "-c", text]

    def run(self, block: Block) -> Result:
        """Run `block` (and, first, every earlier runnable block of the page not run yet)."""
        for earlier in self.blocks:
            if earlier.line >= block.line:
                break
            if earlier.id not in self.results:
                self._run_one(earlier)
        if block.id not in self.results:
            self._run_one(block)
        return self.results[block.id]

    def _run_one(self, block: Block) -> None:
        env = self.env()
        started, cpu = time.perf_counter(), _children_cpu()
        proc = subprocess.Popen(
            self._command(block),
            cwd=self.folder,
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            start_new_session=True,  # its own process group: nothing it started outlives it
        )
        try:
            out, _ = proc.communicate(timeout=BLOCK_TIMEOUT_S)
            code = proc.returncode
        except subprocess.TimeoutExpired:
            _kill_group(proc.pid)
            out, _ = proc.communicate()
            code, out = -9, out + f"\n[timed out after {BLOCK_TIMEOUT_S} s]"
        finally:
            _kill_group(proc.pid)  # a server a block left in the background, a stray worker
        wall = time.perf_counter() - started
        self.results[block.id] = Result(block, code, out, wall, _children_cpu() - cpu)


def _children_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def _kill_group(pgid: int) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pgid, signal.SIGKILL)


def run_text(markdown: str, path: str, cache: Path) -> list[Result]:
    """Run every runnable block of a Markdown text in order (for testing the collector itself)."""
    from docs_tools.snippets import parse_page

    page = parse_page(textwrap.dedent(markdown), path)
    run = PageRun(page.blocks, cache)
    return [run.run(b) for b in run.blocks]
