"""SAT edit grammar: one-line edits of encodings and one-key edits of solver configurations, the
canonical contrast key of a correction, and how a correction is re-applied to another draft.

Encoding edits change one constraint line: its cardinality head (``exactly_one`` ↔ ``at_least_one``
↔ ``at_most_one``, ``at_most K`` ↔ ``exactly K``, K ± 1), an index offset (``c+1`` → ``c``), a
``where`` comparison (``<`` ↔ ``<=``), a range bound, or drop the line. Configuration edits change
one key: the solver, the phase, preprocessing, or the budget.
"""

from __future__ import annotations

import difflib
import re
from collections.abc import Mapping
from typing import Any

from cm_gym.domains.base import Edit
from cm_gym.domains.sat.errors import SatError
from cm_gym.domains.sat.language import CARD_HEADS, K_HEADS, parse_encoding
from cm_gym.domains.sat.solver import CONFIG_KEYS

STRONG_SOLVERS = ("maplecm", "minisat22", "glucose4", "cadical153")
_CONFIG_LINE = re.compile(r"^\s*([A-Za-z_]+)\s*[:=]\s*(\S+)\s*(#.*)?$")
_HEAD = re.compile(
    r"^(\s*)(at_least_one|at_most_one|exactly_one|at_least|at_most|exactly|clause|not_both|implies)\b(\s+(\d+))?"
)
_OFFSET = re.compile(r"\[([A-Za-z_]\w*)\s*([+-])\s*(\d+)\]")
_WHERE_OP = re.compile(r"(?<=[\s\w)])(<=|>=|<|>)(?=\s*[-\w(])")
_RANGE = re.compile(r"(-?\d+)\.\.(-?\d+)")
FLIP = {"<": "<=", "<=": "<", ">": ">=", ">=": ">"}


def is_config(text: str) -> bool:
    """True when every non-blank line is ``key: value`` with a configuration key."""
    lines = [ln for ln in text.splitlines() if ln.split("#", 1)[0].strip()]
    return bool(lines) and all(
        (m := _CONFIG_LINE.match(ln)) is not None and m.group(1).lower() in CONFIG_KEYS for ln in lines
    )


def config_values(text: str) -> dict[str, str]:
    """The ``key: value`` pairs of a configuration (lower-cased keys and values)."""
    out: dict[str, str] = {}
    for ln in text.splitlines():
        m = _CONFIG_LINE.match(ln)
        if m:
            out.setdefault(m.group(1).lower(), m.group(2).lower())
    return out


def set_config_value(text: str, key: str, value: str) -> str:
    """`text` with `key` set to `value` (its line rewritten in place, or appended)."""
    lines = text.splitlines()
    for i, ln in enumerate(lines):
        m = _CONFIG_LINE.match(ln)
        if m and m.group(1).lower() == key:
            lines[i] = f"{m.group(1)}: {value}"
            return "\n".join(lines)
    return "\n".join([*lines, f"{key}: {value}"])


# -- encoding lines -----------------------------------------------------------------------------
def head_alternatives(head: str, k: int | None) -> list[str]:
    """Other heads for a cardinality line, most plausible first."""
    if head in CARD_HEADS:
        order = {
            "exactly_one": ["at_least_one", "at_most_one"],
            "at_least_one": ["exactly_one", "at_most_one"],
            "at_most_one": ["exactly_one", "at_least_one"],
        }[head]
        return order + [head.removesuffix("_one") + " 2"]
    if head in K_HEADS and k is not None:
        others = [f"{h} {k}" for h in K_HEADS if h != head]
        return others + [f"{head} {k + 1}"] + ([f"{head} {k - 1}"] if k > 1 else [])
    return []


def line_edits(line: str) -> list[tuple[str, str, str]]:
    """(new line, unit kind, description) for each one-unit edit of one encoding line."""
    out: list[tuple[str, str, str]] = []
    m = _HEAD.match(line)
    if m:
        head, k = m.group(2), int(m.group(4)) if m.group(4) else None
        for alt in head_alternatives(head, k):
            out.append(
                (
                    m.group(1) + alt + line[m.end() :],
                    "head",
                    f"{head}{f' {k}' if k is not None else ''} -> {alt}",
                )
            )
    for mo in _OFFSET.finditer(line):
        fixed = line[: mo.start()] + f"[{mo.group(1)}]" + line[mo.end() :]
        out.append((fixed, "index", f"index {mo.group(0)} -> [{mo.group(1)}]"))
    where = line.find(" where ")
    if where >= 0:
        for mo in _WHERE_OP.finditer(line, where):
            new = line[: mo.start()] + FLIP[mo.group(1)] + line[mo.end() :]
            out.append((new, "where", f"where {mo.group(1)} -> {FLIP[mo.group(1)]}"))
    for mo in _RANGE.finditer(line):
        lo, hi = int(mo.group(1)), int(mo.group(2))
        for new_lo, new_hi in ((lo - 1, hi), (lo, hi + 1)):
            new = line[: mo.start()] + f"{new_lo}..{new_hi}" + line[mo.end() :]
            out.append((new, "range", f"range {lo}..{hi} -> {new_lo}..{new_hi}"))
    return out


def encoding_edits(action: str) -> list[Edit]:
    """Every one-line edit of an encoding (in line order, then the line drops)."""
    lines = action.splitlines()
    edits: list[Edit] = []
    adds: list[Edit] = []
    drops: list[Edit] = []
    for i, line in enumerate(lines):
        if not line.split("#", 1)[0].strip():
            continue
        for new, kind, desc in line_edits(line):
            edits.append(Edit("\n".join(lines[:i] + [new] + lines[i + 1 :]), f"line{i + 1}:{kind}", desc))
        comp = _complement(line)
        if comp is not None and comp.strip() not in (ln.strip() for ln in lines):
            adds.append(
                Edit(
                    "\n".join(lines[: i + 1] + [comp] + lines[i + 1 :]),
                    f"line{i + 2}:add",
                    f"add '{comp.strip()}'",
                )
            )
        if sum(1 for ln in lines if ln.split("#", 1)[0].strip()) > 1:
            drops.append(
                Edit("\n".join(lines[:i] + lines[i + 1 :]), f"line{i + 1}:drop", f"drop '{line.strip()}'")
            )
    return edits + adds + drops


def _complement(line: str) -> str | None:
    """The complementary constraint family of an at-least-one / at-most-one line (toggling on the
    other half of an exactly-one), or None."""
    m = _HEAD.match(line)
    if m is None or m.group(2) not in ("at_least_one", "at_most_one"):
        return None
    other = "at_most_one" if m.group(2) == "at_least_one" else "at_least_one"
    return m.group(1) + other + line[m.end() :]


def config_edits(task_features: Mapping[str, Any], action: str) -> list[Edit]:
    """One-key edits of a solver configuration (budget to the allowance first)."""
    values = config_values(action)
    edits: list[Edit] = []
    allowance = task_features.get("max_budget")
    budget = values.get("budget", "")
    if budget.isdigit():
        b = int(budget)
        targets = [allowance] if isinstance(allowance, int) else []
        targets += [b * 2, max(1, b // 2)]
        for t in dict.fromkeys(targets):
            if t != b:
                edits.append(Edit(set_config_value(action, "budget", str(t)), "budget", f"budget {b} -> {t}"))
    for solver in STRONG_SOLVERS:
        if solver != values.get("solver"):
            edits.append(Edit(set_config_value(action, "solver", solver), "solver", f"solver -> {solver}"))
    for phase in ("default", "true", "false"):
        if phase != values.get("phase", "default"):
            edits.append(Edit(set_config_value(action, "phase", phase), "phase", f"phase -> {phase}"))
    pre = "off" if values.get("preprocess", "off") in ("on", "true", "yes") else "on"
    edits.append(Edit(set_config_value(action, "preprocess", pre), "preprocess", f"preprocess -> {pre}"))
    return edits


# -- contrasts ----------------------------------------------------------------------------------
def _norm(line: str) -> str:
    return " ".join(line.split("#", 1)[0].split())


def _lines(text: str) -> list[str]:
    return [n for n in (_norm(ln) for ln in text.splitlines()) if n]


def changed_lines(a_minus: str, a_plus: str) -> list[tuple[str | None, str | None]]:
    """(old, new) normalised line pairs: a change, a drop (new None) or an addition (old None)."""
    a, b = _lines(a_minus), _lines(a_plus)
    out: list[tuple[str | None, str | None]] = []
    for op, i1, i2, j1, j2 in difflib.SequenceMatcher(a=a, b=b, autojunk=False).get_opcodes():
        if op == "equal":
            continue
        olds, news = a[i1:i2], b[j1:j2]
        for k in range(max(len(olds), len(news))):
            out.append((olds[k] if k < len(olds) else None, news[k] if k < len(news) else None))
    return out


def array_of(line: str) -> str:
    """The first array a constraint line mentions ('' when none)."""
    m = re.search(r"([A-Za-z_]\w*)\s*\[", line)
    return m.group(1) if m else ""


def describe_line_change(old: str | None, new: str | None) -> str:
    """Canonical description of one line change (used in contrast keys and situations)."""
    if old is None:
        return f"add: {new}"
    if new is None:
        return f"drop: {old}"
    for cand, kind, desc in line_edits(old):
        if _norm(cand) == new:
            return f"{kind} {array_of(old)}: {desc}"
    return f"rewrite {array_of(old)}: {old} -> {new}"


def config_contrast(a_minus: str, a_plus: str) -> list[str]:
    """Canonical per-key changes between two configurations (budget by direction)."""
    va, vb = config_values(a_minus), config_values(a_plus)
    parts = []
    for key in CONFIG_KEYS:
        if va.get(key) == vb.get(key):
            continue
        if key == "budget" and va.get(key, "").isdigit() and vb.get(key, "").isdigit():
            parts.append("budget: raise" if int(vb[key]) > int(va[key]) else "budget: lower")
        else:
            parts.append(f"{key}: {va.get(key, '-')} -> {vb.get(key, '-')}")
    return parts


def contrast_parts(a_minus: str, a_plus: str) -> list[str]:
    """What changed from a⁻ to a⁺, one canonical phrase per unit."""
    if is_config(a_minus) and is_config(a_plus):
        return config_contrast(a_minus, a_plus)
    return [describe_line_change(o, n) for o, n in changed_lines(a_minus, a_plus)]


def _apply_config(draft: str, a_minus: str, a_plus: str) -> str | None:
    va, vb, vd = config_values(a_minus), config_values(a_plus), config_values(draft)
    out = draft
    for key in CONFIG_KEYS:
        if va.get(key) == vb.get(key) or key not in vb:
            continue
        if key == "budget" and vb[key].isdigit() and vd.get(key, "").isdigit() and va.get(key, "").isdigit():
            raise_ = int(vb[key]) > int(va[key])
            if (raise_ and int(vd[key]) < int(vb[key])) or (not raise_ and int(vd[key]) > int(vb[key])):
                out = set_config_value(out, key, vb[key])
        elif vd.get(key, "default" if key == "phase" else "off" if key == "preprocess" else None) == va.get(
            key, "default" if key == "phase" else "off" if key == "preprocess" else None
        ):
            out = set_config_value(out, key, vb[key])
    return out if out != draft else None


def _apply_line(lines: list[str], old: str | None, new: str | None, arrays: set[str] | None) -> bool:
    norms = [_norm(ln) for ln in lines]
    if old is None:
        assert new is not None
        if new in norms:
            return False
        if arrays is not None and array_of(new) and array_of(new) not in arrays:
            return False
        lines.append(new)
        return True
    if old in norms:
        i = norms.index(old)
        if new is None:
            del lines[i]
        else:
            lines[i] = new
        return True
    if new is None:
        return False
    # structural match: same head and array, apply the same kind of one-unit edit
    m_old = _HEAD.match(old)
    for i, norm in enumerate(norms):
        m = _HEAD.match(norm)
        if not (m and m_old and m.group(2) == m_old.group(2) and array_of(norm) == array_of(old)):
            continue
        for cand, _kind, desc in line_edits(old):
            if _norm(cand) != new:
                continue
            for dcand, _dkind, ddesc in line_edits(norm):
                if ddesc == desc:
                    lines[i] = dcand
                    return True
    return False


def apply_contrast_text(task_meta: Mapping[str, Any], draft: str, a_minus: str, a_plus: str) -> str | None:
    """Apply the a⁻ → a⁺ correction to `draft` where its pattern occurs (None when it does not)."""
    if is_config(a_minus) and is_config(a_plus):
        return _apply_config(draft, a_minus, a_plus) if is_config(draft) else None
    arrays: set[str] | None = None
    problem = task_meta.get("problem")
    if isinstance(problem, Mapping):
        try:
            from cm_gym.domains.sat.problems import family

            arrays = set(family(problem["family"]).signature(problem["params"]).arrays)
        except (SatError, KeyError, TypeError):
            arrays = None
    lines = [ln for ln in draft.splitlines() if ln.strip()]
    changed = False
    for old, new in changed_lines(a_minus, a_plus):
        changed |= _apply_line(lines, old, new, arrays)
    return "\n".join(lines) if changed else None


def parses(action: str) -> bool:
    """True when `action` parses as an encoding."""
    try:
        parse_encoding(action)
    except SatError:
        return False
    return True
