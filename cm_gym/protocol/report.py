"""The main job's outputs: the results table (text that fits the terminal, wrapping rather than
cutting names — `cm_gym.core.tables`; Markdown or JSON); the plots (`write_plots`: score with
paired CIs, tokens, learning curves per layout) live in `cm_gym.protocol.figures` and stay
importable from here."""

from __future__ import annotations

import json
import textwrap
from collections.abc import Mapping
from typing import Any

from cm_gym.core.tables import natural_width, render, terminal_width

# the plots moved to figures.py; importable from here too (explicit re-exports)
from cm_gym.protocol.figures import learning_curve as learning_curve
from cm_gym.protocol.figures import write_plots as write_plots

COLUMNS = (
    ("Score", "score", "{:.1f}"),
    ("Score/decision", "decision_score", "{:.1f}"),
    ("Tokens (M)", "total_tokens_m", "{:.3f}"),
    ("Calls/solved", "evaluator_calls_per_solved", "{:.2f}"),
    ("Fails/solved", "failures_per_solved", "{:.2f}"),
    ("Coverage", "retrieval_coverage", "{:.1%}"),
    ("Harmful use", "harmful_use", "{:.1%}"),
    ("Helpful use", "helpful_use", "{:.1%}"),
)
#: The first-decision score, shown beside the (budget) score wherever results carry it: how much
#: of a score the first decision earns and how much the later decisions add.
FIRST_DECISION = ("First decision", "first_decision_score", "{:.1f}")
#: Short headers used when the full ones do not fit the width (explained under the table). None
#: ends in "/s": calls and failures are per solved task, and "Calls/s" reads as calls per second.
SHORT = {
    "Tokens (M)": "Tok(M)",
    "Calls/solved": "Calls/sol",
    "Fails/solved": "Fails/sol",
    "Coverage": "Cover",
    "Harmful use": "Harm",
    "Worse than draft": "Worse",
    "Score/decision": "Sc/dec",
    "First decision": "1st dec",
    "Helpful use": "Help",
}
#: The width of text written where no terminal is (`cm_gym.core.tables.FALLBACK_WIDTH`).
WIDTH = 100
FORMATS = ("text", "markdown", "json")


def _cell(metric: Mapping[str, Any] | None, fmt: str, show_std: bool) -> str:
    mean, std = (metric or {}).get("mean"), (metric or {}).get("std")
    if mean is None:
        return "—"
    text = fmt.format(mean)
    if show_std and std:
        text += " ± " + fmt.format(std).rstrip("%")
    return text


def columns(results: Mapping[str, Any]) -> tuple[tuple[str, str, str], ...]:
    """The table's columns: `COLUMNS`, with the first-decision score beside the score when any
    policy's results carry it (results written before it existed do not)."""
    if any((res.get("mean") or {}).get(FIRST_DECISION[1]) for res in results["policies"].values()):
        return (COLUMNS[0], FIRST_DECISION, *COLUMNS[1:])
    return COLUMNS


def _rows(results: Mapping[str, Any], std: str, short: bool) -> list[list[str]]:
    cols = columns(results)
    header = ["Policy"] + [SHORT.get(c[0], c[0]) if short else c[0] for c in cols]
    rows = [header]
    for res in results["policies"].values():
        label = str(res["label"])
        cells = [
            _cell(res["mean"].get(key), fmt, show_std=std == "all" or (std == "score" and i == 0))
            for i, (_, key, fmt) in enumerate(cols)
        ]
        rows.append([label, *cells])
    return rows


def _footnote(results: Mapping[str, Any]) -> str:
    split = results.get("split", {})
    cfg = results.get("config", {})
    rotation = results.get("rotation")
    pooled = (
        f" pooled over split seeds {', '.join(map(str, rotation['split_seeds']))} (one build, training "
        "and evaluation each; held-out tasks summed);"
        if rotation
        else ""
    )
    kind = f" (split: {split['label']})" if split.get("label") else ""
    return (
        f"benchmark {cfg.get('benchmark', '?')}: {split.get('eval', '?')} held-out tasks{kind},{pooled} "
        f"{len(cfg.get('seeds', ()))} selector seed(s), store of {results['snapshot']['records']} records; "
        "mean ± std over seeds. Score = 100 × mean final U per task (within the decision budget); "
        "first decision = 100 × mean U of each task's first executed action; score/decision = 100 × mean U of "
        "every executed action; calls and fails per solved task; coverage per retrieval opportunity; "
        "harmful / helpful use per selected record use (the revised action scored below / above the "
        "memory-free draft, checked on a fork: SPEC §3 amended)."
    )


def _warnings(results: Mapping[str, Any]) -> list[str]:
    return [
        f"warning: {res['label']} picked a masked action {res['masked_actions']} time(s); they ran as skip."
        for res in results["policies"].values()
        if res.get("masked_actions")
    ]


#: The one line a table of a run on an empty store starts with (instead of identical rows and
#: ``+0.0 [+0.0, +0.0]`` CIs): results.json still holds every policy.
EMPTY_STORE_LINE = "The store holds 0 records: every policy equals None{} (None shown alone)."
SKIPPED_TRAINING = " and no selector was trained"


def _empty_store_line(results: Mapping[str, Any]) -> str:
    return EMPTY_STORE_LINE.format(SKIPPED_TRAINING if results.get("training_skipped_reason") else "")


def _empty_store(results: Mapping[str, Any]) -> bool:
    return (results.get("snapshot") or {}).get("records") == 0


def _none_only(results: Mapping[str, Any]) -> dict[str, Any]:
    """`results` with the None row alone (every row when there is none), without paired CIs."""
    policies = results["policies"]
    kept = {k: v for k, v in policies.items() if k == "none"} or dict(policies)
    drop = {key for key, _ in CI_KINDS}
    return {
        **results,
        "policies": {k: {f: x for f, x in v.items() if f not in drop} for k, v in kept.items()},
    }


def results_table(results: Mapping[str, Any], fmt: str = "text", width: int | None = None) -> str:
    """The results as text (every line ≤ `width`, by default the terminal's width or `WIDTH`
    where there is no terminal), a Markdown table or JSON. Rates keep their own denominators:
    calls and failures per solved task, coverage per retrieval opportunity, harmful use per
    selected record use. To fit, the text drops the std beside every metric but the score, then
    shortens headers (explained under the table), then wraps cells; it never cuts a name."""
    if fmt == "json":
        return json.dumps(results_json(results), indent=2)
    if fmt not in FORMATS:
        raise ValueError(f"format must be one of {FORMATS}, got {fmt!r}")
    empty = _empty_store(results)
    if empty:
        results = _none_only(results)
    if fmt == "markdown":
        return (_empty_store_line(results) + "\n\n" if empty else "") + markdown_table(results)
    width = terminal_width(WIDTH) if width is None else width
    for std, short in (("all", False), ("score", False), ("score", True)):
        rows = _rows(results, std, short)
        if natural_width(rows) <= width:
            break
    lines = render(rows, width)
    foot = _footnote(results)
    if short:
        foot += (
            " Short headers: "
            + ", ".join(f"{SHORT[c[0]]} = {c[0]}" for c in columns(results) if c[0] in SHORT)
            + "."
        )
    notes = [textwrap.fill(foot, width)] + [textwrap.fill(w, width) for w in _warnings(results)]
    head = [*textwrap.wrap(_empty_store_line(results), width), ""] if empty else []
    return "\n".join([*head, *lines, "", *notes, *ci_table(results, width)])


def _ci(c: Mapping[str, Any] | None) -> str:
    if not c or c.get("diff") is None:
        return "—"
    return f"{c['diff']:+.1f} [{c['lo']:+.1f}, {c['hi']:+.1f}]"


#: the two CI kinds a results table shows: key in a policy's results, heading
CI_KINDS = (
    ("paired_ci", "Score difference, paired over tasks (seeds averaged per task; 95% bootstrap CI):"),
    (
        "paired_ci_two_level",
        "Score difference, paired, seeds and tasks resampled (two-level bootstrap; 95% CI):",
    ),
)


def _ci_rows(results: Mapping[str, Any], key: str = "paired_ci") -> list[list[str]]:
    rows = [["Policy", "vs Random valid", "vs Top-1"]]
    for res in results["policies"].values():
        label = str(res["label"])
        ci = res.get(key, {})
        rows.append([label, _ci(ci.get("vs_random")), _ci(ci.get("vs_top1"))])
    return rows


def ci_table(results: Mapping[str, Any], width: int | None = None) -> list[str]:
    """Paired score differences against random valid and top-1, two ways (SPEC §8): over tasks
    with each policy's seeds averaged per task first (seeds fixed), and over seeds and tasks (the
    two-level bootstrap, where results carry it); 95% percentile bootstrap. Lines ≤ `width` (by
    default the terminal's), names wrapped, never cut."""
    width = terminal_width(WIDTH) if width is None else width
    out: list[str] = []
    for key, heading in CI_KINDS:
        if not any(key in res for res in results["policies"].values()):
            continue
        out += ["", *textwrap.wrap(heading, width), *render(_ci_rows(results, key), width)]
    return out


def markdown_table(results: Mapping[str, Any]) -> str:
    """A GitHub Markdown table (mean ± std everywhere) and its footnote."""
    rows = _rows(results, "all", False)
    lines = ["| " + " | ".join(rows[0]) + " |", "|" + "---|" * len(rows[0])]
    lines += ["| " + " | ".join(r) + " |" for r in rows[1:]]
    for key, heading in CI_KINDS:
        if any(key in res for res in results["policies"].values()):
            ci = _ci_rows(results, key=key)
            if key == "paired_ci":  # the heading markdown tables always had
                heading = "Score difference, paired over tasks (95% bootstrap CI):"
            lines += ["", heading, ""]
            lines += ["| " + " | ".join(ci[0]) + " |", "|" + "---|" * len(ci[0])]
            lines += ["| " + " | ".join(r) + " |" for r in ci[1:]]
    return "\n".join([*lines, "", _footnote(results), *_warnings(results)])


def results_json(results: Mapping[str, Any]) -> dict[str, Any]:
    """The table's content as plain data: one row per policy, each metric's mean and std."""
    rows = []
    for name, res in results["policies"].items():
        row: dict[str, Any] = {"policy": name, "label": res["label"]}
        for header, key, _ in columns(results):
            metric = res["mean"].get(key) or {}
            row[key] = {"mean": metric.get("mean"), "std": metric.get("std"), "header": header}
        row["masked_actions"] = res.get("masked_actions", 0)
        row["paired_ci"] = res.get("paired_ci", {})
        row["paired_ci_two_level"] = res.get("paired_ci_two_level", {})
        rows.append(row)
    return {
        "benchmark": results.get("config", {}).get("benchmark"),
        "seeds": list(results.get("config", {}).get("seeds", ())),
        "eval_tasks": results.get("split", {}).get("eval"),
        "split": results.get("split", {}).get("kind"),
        "store_records": results["snapshot"]["records"],
        "rows": rows,
    }
