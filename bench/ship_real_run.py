"""Ship a real-model run: merge the replies a local model gave in a run's response cache into the
package's export (``cm_gym/llm/real_runs/<model>.jsonl.gz`` + manifest), so that
``--llm local:<model> --llm-cache-mode ro`` replays the run anywhere with 0 live calls.

    python bench/ship_real_run.py RUN_CACHE.sqlite qwen2.5-coder-1.5b --benchmark SpiderSQL \
        [--results RUN_DIR/results.json]

A run enters the manifest with its replay command; CI replays only the runs whose entry says
``"ci": true`` (set it by hand for a run short enough: the 24/24/24 SpiderSQL one takes minutes,
the CodeHumanEvalSynth one 30). Safe to run while the run goes on (the run's cache is read, never written) and again later: the
export only grows. Prints the manifest.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from cm_gym.llm.shipped import ship


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("cache", type=Path, help="the run's response cache (--llm-cache)")
    parser.add_argument("model", help="the local model whose replies to ship")
    parser.add_argument("--benchmark", default="", help="benchmark name, counted in the manifest")
    parser.add_argument(
        "--results", type=Path, default=None, help="the run's results.json: its replay command and scores"
    )
    args = parser.parse_args()
    print(json.dumps(ship(args.cache, args.model, benchmark=args.benchmark, results=args.results), indent=2))


if __name__ == "__main__":
    main()
