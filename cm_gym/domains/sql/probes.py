"""Statements that broke the SQL world model's bounds before issue 14 (our own writing), for the
tests and `bench/bench_isolation.py`: vetting regexes that backtrack exponentially, one SQLite
call the progress handler cannot interrupt, and memory that grows without bound."""

from __future__ import annotations

#: inputs that made the old statement regexes backtrack exponentially (100-160 characters each)
BACKTRACKING = [
    "/**/" * 40 + "x",
    "/**/" * 40 + "drop",
    "--\n" * 30 + "/**/" * 30 + "valuez",
    " /**/" * 35 + ";",
]
#: one SQLite call the progress handler cannot interrupt (4-9 s inside one instr on a 2-core box;
#: under a second on a fast machine: for bounds that must hold on any machine use `HEAVY`)
UNINTERRUPTIBLE = [
    "SELECT instr(printf('%.*c',999999,'a'), printf('%.*c',99999,'a')||'b')",
    "SELECT instr(hex(zeroblob(499999)), printf('%.*c',60000,'0')||'1')",
]
#: memory that grows without the progress handler noticing (~1 GB on the old evaluator)
MEMORY = [
    "WITH RECURSIVE r(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM r WHERE i < 9000) SELECT zeroblob(900000) FROM r",
    "WITH RECURSIVE r(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM r WHERE i < 9000) "
    "SELECT printf('%.*c', 900000, 'x') FROM r",
]
#: uninterruptible calls repeated over a few rows: ~1e13 byte comparisons inside `instr` (minutes of
#: CPU time on any machine) for a few thousand virtual-machine steps, so only a CPU-time or
#: wall-clock bound can stop them (the row number in the needle defeats constant factoring)
HEAVY = [
    "WITH RECURSIVE r(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM r WHERE i < 200) "
    "SELECT sum(instr(printf('%.*c', 999999, 'a'), printf('%.*c', 99999, 'a') || 'b' || i)) FROM r",
]
