"""What the documentation's code blocks cost to run (the CI step of issue 26), block by block.

    python bench/bench_docs_snippets.py [PAGE ...]     # default: README.md and every page of docs/

Runs each page's blocks in order in a fresh folder exactly as `tests/test_docs_snippets.py` does
(``CM_GYM_QUICK=1``, one shared cache: a fresh one here unless ``--cache DIR``) and prints, per
block, wall-clock seconds and CPU seconds (user + system of its processes): on a machine shared
with other jobs the CPU time is the steadier figure. Totals at the end.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from docs_tools.runner import PageRun  # noqa: E402
from docs_tools.snippets import doc_pages, parse_file  # noqa: E402


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("pages", nargs="*", type=Path, help="Markdown pages (default: all)")
    ap.add_argument("--cache", type=Path, default=None, help="CM_GYM_CACHE for the blocks (default: fresh)")
    args = ap.parse_args(argv)
    cache = args.cache or Path(tempfile.mkdtemp(prefix="cm_gym_docs_bench_"))
    pages = [p.resolve() for p in args.pages] or doc_pages(ROOT)
    wall = cpu = 0.0
    failed = 0
    print(f"{'block':<44} {'status':>6} {'wall s':>8} {'CPU s':>8}")
    for path in pages:
        page = parse_file(path, ROOT)
        run = PageRun(page.blocks, cache, examples=ROOT / "examples")
        for block in page.blocks:
            if not block.kind:
                continue
            if block.not_run:
                print(f"{block.id:<44} {'skip':>6}")
                continue
            result = run.run(block)
            ok = result.returncode == 0
            failed += not ok
            wall, cpu = wall + result.seconds, cpu + result.cpu_seconds
            print(
                f"{block.id:<44} {'ok' if ok else 'FAIL':>6} {result.seconds:8.1f} {result.cpu_seconds:8.1f}",
                flush=True,
            )
            if not ok:
                print(result.failure(), file=sys.stderr)
    print(f"{'total':<44} {'':>6} {wall:8.1f} {cpu:8.1f}   ({failed} failed)")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
