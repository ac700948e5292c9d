"""SMT edit grammar: one-line edits of SMT-LIB scripts, one-key edits of solver configurations,
canonical contrast keys, and re-applying a correction to another draft.

Script edits change one command line: a comparison's strictness (``>=`` ↔ ``>``, ``bvule`` ↔
``bvult``), signedness (``bvult`` ↔ ``bvslt``), a declared sort (``Int`` ↔ ``Real``), a bit-width
(``(_ BitVec 8)`` → 16), wrap-around (``(bv2nat (bvadd x y))`` ↔ ``(+ (bv2nat x) (bv2nat y))``),
drop an assertion, or add ``(assert (distinct ...))`` over the declared integer constants.
"""

from __future__ import annotations

import difflib
import re
from collections.abc import Mapping
from typing import Any

from cm_gym.domains.base import Edit
from cm_gym.domains.smt.solver import CONFIG_KEYS

_CFG = re.compile(r"^\s*([A-Za-z_]+)\s*[:=]\s*(.+?)\s*$")
_B = r"(?<=[(\s]){}(?=[\s)])"
STRICT_FLIP = {
    ">=": ">",
    ">": ">=",
    "<=": "<",
    "<": "<=",
    "bvuge": "bvugt",
    "bvugt": "bvuge",
    "bvule": "bvult",
    "bvult": "bvule",
    "bvsge": "bvsgt",
    "bvsgt": "bvsge",
    "bvsle": "bvslt",
    "bvslt": "bvsle",
}
SIGN_FLIP = {
    "bvult": "bvslt",
    "bvslt": "bvult",
    "bvule": "bvsle",
    "bvsle": "bvule",
    "bvugt": "bvsgt",
    "bvsgt": "bvugt",
    "bvuge": "bvsge",
    "bvsge": "bvuge",
}
_OPS = re.compile(_B.format("(>=|<=|>|<|bv[us](?:ge|gt|le|lt))"))
_SORT = re.compile(r"^(\s*\((?:declare-const\s+\S+|declare-fun\s+\S+\s+\(\))\s+)(Int|Real)(\s*\)\s*)$")
_WIDTH = re.compile(r"\(_ BitVec (\d+)\)")
WRAP_SUM = re.compile(r"\(bv2nat \(bvadd (\S+) (\S+)\)\)")
_NOWRAP = re.compile(r"\(\+ \(bv2nat (\S+)\) \(bv2nat (\S+)\)\)")
_DECL_INT = re.compile(r"^\s*\(declare-const\s+(\S+)\s+Int\s*\)\s*$")


# -- configurations -----------------------------------------------------------------------------
def is_config(text: str) -> bool:
    """True when every non-blank line is ``key: value`` with a configuration key."""
    lines = [ln for ln in text.splitlines() if ln.split("#", 1)[0].strip()]
    return bool(lines) and all(
        (m := _CFG.match(ln)) is not None and m.group(1).lower() in CONFIG_KEYS for ln in lines
    )


def config_values(text: str) -> dict[str, str]:
    """The ``key: value`` pairs of a configuration (keys lower-cased, spaces normalised)."""
    out: dict[str, str] = {}
    for ln in text.splitlines():
        m = _CFG.match(ln.split("#", 1)[0])
        if m:
            out.setdefault(m.group(1).lower(), " ".join(m.group(2).split()))
    return out


def set_config_value(text: str, key: str, value: str) -> str:
    """`text` with `key` set to `value` (its line rewritten in place, or appended)."""
    lines = text.splitlines()
    for i, ln in enumerate(lines):
        m = _CFG.match(ln)
        if m and m.group(1).lower() == key:
            lines[i] = f"{m.group(1)}: {value}"
            return "\n".join(lines)
    return "\n".join([*lines, f"{key}: {value}"])


def config_edits(features: Mapping[str, Any], action: str) -> list[Edit]:
    """One-key edits: rlimit to the allowance / ×4 / ÷4, logic, tactic."""
    values = config_values(action)
    out: list[Edit] = []
    allowance = features.get("max_rlimit")
    raw = values.get("rlimit", "").replace("_", "")
    if raw.isdigit():
        r = int(raw)
        targets = ([allowance] if isinstance(allowance, int) else []) + [r * 4, max(1, r // 4)]
        for t in dict.fromkeys(targets):
            if t != r:
                out.append(Edit(set_config_value(action, "rlimit", str(t)), "rlimit", f"rlimit {r} -> {t}"))
    logic = str(features.get("logic", ""))
    for cand in dict.fromkeys([logic, "auto"]):
        if cand and cand != values.get("logic"):
            out.append(Edit(set_config_value(action, "logic", cand), "logic", f"logic -> {cand}"))
    for tactic in (
        "default",
        "smt",
        "(then simplify smt)",
        {"QF_BV": "qfbv", "QF_LRA": "qflra"}.get(logic, "smt"),  # never qflia: wall-clock inside z3
    ):
        if tactic != values.get("tactic", "default"):
            out.append(Edit(set_config_value(action, "tactic", tactic), "tactic", f"tactic -> {tactic}"))
    return out


# -- scripts ------------------------------------------------------------------------------------
def line_edits(line: str) -> list[tuple[str, str, str]]:
    """(new line, unit kind, description) for each one-unit edit of one script line."""
    out: list[tuple[str, str, str]] = []
    stripped = line.strip()
    if stripped.startswith("(assert"):
        for m in _OPS.finditer(line):
            op = m.group(1)
            out.append(
                (line[: m.start()] + STRICT_FLIP[op] + line[m.end() :], "cmp", f"{op} -> {STRICT_FLIP[op]}")
            )
            if op in SIGN_FLIP:
                out.append(
                    (line[: m.start()] + SIGN_FLIP[op] + line[m.end() :], "sign", f"{op} -> {SIGN_FLIP[op]}")
                )
        for m in WRAP_SUM.finditer(line):
            new = f"(+ (bv2nat {m.group(1)}) (bv2nat {m.group(2)}))"
            out.append((line[: m.start()] + new + line[m.end() :], "wrap", "wrap-around sum -> natural sum"))
        for m in _NOWRAP.finditer(line):
            new = f"(bv2nat (bvadd {m.group(1)} {m.group(2)}))"
            out.append((line[: m.start()] + new + line[m.end() :], "wrap", "natural sum -> wrap-around sum"))
    m = _SORT.match(line)
    if m:
        other = "Real" if m.group(2) == "Int" else "Int"
        out.append((m.group(1) + other + m.group(3), "sort", f"sort {m.group(2)} -> {other}"))
    for m in _WIDTH.finditer(line):
        w = int(m.group(1))
        for nw in (w * 2, w // 2):
            if nw >= 1:
                out.append(
                    (line[: m.start()] + f"(_ BitVec {nw})" + line[m.end() :], "width", f"width {w} -> {nw}")
                )
    return out


def _insert_point(lines: list[str]) -> int:
    for i, ln in enumerate(lines):
        if ln.strip().startswith(("(check-sat", "(get-model", "(get-value")):
            return i
    return len(lines)


def distinct_line(lines: list[str]) -> str | None:
    """``(assert (distinct ...))`` over the declared Int constants (None when fewer than two)."""
    names = [m.group(1) for ln in lines if (m := _DECL_INT.match(ln))]
    return f"(assert (distinct {' '.join(names)}))" if len(names) >= 2 else None


def script_edits(action: str) -> list[Edit]:
    """Every one-line edit of a script (line edits in order, then add-distinct, then drops)."""
    lines = action.splitlines()
    edits: list[Edit] = []
    drops: list[Edit] = []
    for i, line in enumerate(lines):
        for new, kind, desc in line_edits(line):
            edits.append(Edit("\n".join(lines[:i] + [new] + lines[i + 1 :]), f"line{i + 1}:{kind}", desc))
        if line.strip().startswith("(assert"):
            drops.append(
                Edit("\n".join(lines[:i] + lines[i + 1 :]), f"line{i + 1}:drop", f"drop {line.strip()}")
            )
    has_distinct = any("(distinct" in ln for ln in lines)
    add = distinct_line(lines)
    if add and not has_distinct:
        at = _insert_point(lines)
        edits.append(Edit("\n".join(lines[:at] + [add] + lines[at:]), f"line{at + 1}:add", "add distinct"))
    return edits + drops


# -- contrasts ----------------------------------------------------------------------------------
def _norm(line: str) -> str:
    return " ".join(line.split(";", 1)[0].split())


def changed_lines(a_minus: str, a_plus: str) -> list[tuple[str | None, str | None]]:
    """(old, new) normalised line pairs: a change, a drop (new None) or an addition (old None)."""
    a = [n for n in map(_norm, a_minus.splitlines()) if n]
    b = [n for n in map(_norm, a_plus.splitlines()) if n]
    out: list[tuple[str | None, str | None]] = []
    for op, i1, i2, j1, j2 in difflib.SequenceMatcher(a=a, b=b, autojunk=False).get_opcodes():
        if op != "equal":
            olds, news = a[i1:i2], b[j1:j2]
            for k in range(max(len(olds), len(news))):
                out.append((olds[k] if k < len(olds) else None, news[k] if k < len(news) else None))
    return out


def describe(old: str | None, new: str | None) -> str:
    """Canonical description of one line change."""
    if old is None:
        return "add distinct" if new and "(distinct" in new else f"add: {new}"
    if new is None:
        return "drop distinct" if "(distinct" in old else f"drop: {old}"
    for cand, kind, desc in line_edits(old):
        if _norm(cand) == new:
            return f"{kind} {desc}"
    return f"rewrite: {old} -> {new}"


def contrast_parts(a_minus: str, a_plus: str) -> list[str]:
    """What changed from a⁻ to a⁺, one canonical phrase per unit (rlimit by direction)."""
    if is_config(a_minus) and is_config(a_plus):
        va, vb = config_values(a_minus), config_values(a_plus)
        parts = []
        for key in CONFIG_KEYS:
            if va.get(key) == vb.get(key):
                continue
            x, y = va.get(key, ""), vb.get(key, "")
            if key == "rlimit" and x.isdigit() and y.isdigit():
                parts.append("rlimit: raise" if int(y) > int(x) else "rlimit: lower")
            else:
                parts.append(f"{key}: {x or '-'} -> {y or '-'}")
        return parts
    return [describe(o, n) for o, n in changed_lines(a_minus, a_plus)]


def _apply_config(draft: str, a_minus: str, a_plus: str) -> str | None:
    va, vb, vd = config_values(a_minus), config_values(a_plus), config_values(draft)
    out = draft
    for key in CONFIG_KEYS:
        if va.get(key) == vb.get(key) or key not in vb:
            continue
        if key == "rlimit" and all(v.get(key, "").isdigit() for v in (va, vb, vd)):
            up = int(vb[key]) > int(va[key])
            if (up and int(vd[key]) < int(vb[key])) or (not up and int(vd[key]) > int(vb[key])):
                out = set_config_value(out, key, vb[key])
        elif vd.get(key, "default" if key == "tactic" else "auto") == va.get(
            key, "default" if key == "tactic" else "auto"
        ):
            out = set_config_value(out, key, vb[key])
    return out if out != draft else None


def _apply_line(lines: list[str], old: str | None, new: str | None) -> bool:
    norms = [_norm(ln) for ln in lines]
    if old is None and new is not None:
        if new in norms:
            return False
        if "(distinct" in new:
            rebuilt = distinct_line(lines)
            if rebuilt is None or any("(distinct" in n for n in norms):
                return False
            new = rebuilt
        lines.insert(_insert_point(lines), new)
        return True
    if old is not None and old in norms:
        i = norms.index(old)
        if new is None:
            del lines[i]
        else:
            lines[i] = new
        return True
    if old is not None and new is None and "(distinct" in old:
        for i, n in enumerate(norms):
            if n.startswith("(assert (distinct"):
                del lines[i]
                return True
        return False
    if old is None or new is None:
        return False
    wanted = describe(old, new)
    for i, n in enumerate(norms):
        for cand, kind, desc in line_edits(n):
            if f"{kind} {desc}" == wanted:
                lines[i] = cand
                return True
    return False


def apply_contrast_text(draft: str, a_minus: str, a_plus: str) -> str | None:
    """Apply the a⁻ → a⁺ correction to `draft` where its pattern occurs (None when it does not)."""
    if is_config(a_minus) and is_config(a_plus):
        return _apply_config(draft, a_minus, a_plus) if is_config(draft) else None
    lines = [ln for ln in draft.splitlines() if ln.strip()]
    changed = False
    for old, new in changed_lines(a_minus, a_plus):
        changed |= _apply_line(lines, old, new)
    return "\n".join(lines) if changed else None
