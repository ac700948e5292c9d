"""The generated benchmark's databases: five small seeded SQLite databases (hr, shop, school,
library, sports) with numeric, text, date, NULL-able and foreign-key columns.

They are built on first use into ``cache_dir("sql", "generated")`` — written to a temporary file
and renamed into place, so a crash or a concurrent builder never leaves a half-written database —
and their content is a pure function of (database, seed, `DB_VERSION`). Bump `DB_VERSION` when
the generator changes: it is part of the file name.
"""

from __future__ import annotations

import datetime as dt
import logging
import os
import random
import re
import sqlite3
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

from cm_gym.core.paths import cache_dir
from cm_gym.domains.sql._engine import settle
from cm_gym.domains.sql.schema import SQLDataError

logger = logging.getLogger(__name__)

DB_VERSION = "v1"
DATABASES = ("hr", "shop", "school", "library", "sports")

FIRST = (
    "Ada", "Ben", "Cara", "Dev", "Eli", "Fay", "Gus", "Hana", "Ivo", "Jade", "Kai", "Lena", "Milo",
    "Nia", "Omar", "Pia", "Quinn", "Rosa", "Sam", "Tara", "Uma", "Vic", "Wes", "Xena", "Yuri",
    "Zoe", "Aldo", "Bea", "Cruz", "Dana", "Emil", "Faye", "Gil", "Hugo", "Iris", "Joel", "Kira",
    "Luca", "Maya", "Noel",
)  # fmt: skip
LAST = (
    "Abbott", "Baker", "Chen", "Diaz", "Evans", "Fischer", "Garcia", "Hansen", "Ito", "Jensen",
    "Khan", "Lopez", "Moreau", "Novak", "Okafor", "Patel", "Quist", "Rossi", "Silva", "Tanaka",
    "Ueda", "Varga", "Weber", "Xu", "Young", "Zhou",
)  # fmt: skip
CITIES = ("Lyon", "Porto", "Oslo", "Turin", "Ghent", "Cork", "Bern", "Graz", "Split", "Malmo")
COUNTRIES = ("France", "Portugal", "Norway", "Italy", "Belgium", "Ireland")
ADJ = ("Silent", "Golden", "Hidden", "Broken", "Rapid", "Quiet", "Bright", "Lost", "Iron", "Blue")
NOUN = ("River", "Garden", "Engine", "Window", "Harbor", "Forest", "Signal", "Mirror", "Bridge", "Lantern")


def _names(rng: random.Random, n: int) -> list[str]:
    pool = [f"{f} {last}" for f in FIRST for last in LAST]
    return rng.sample(pool, n)


def _date(rng: random.Random, start: int, end: int) -> str:
    first = dt.date(start, 1, 1).toordinal()
    last = dt.date(end, 12, 31).toordinal()
    return dt.date.fromordinal(rng.randint(first, last)).isoformat()


def _later(day: str, rng: random.Random, lo: int, hi: int) -> str:
    return (dt.date.fromisoformat(day) + dt.timedelta(days=rng.randint(lo, hi))).isoformat()


def _maybe(rng: random.Random, p_null: float, value: Any) -> Any:
    return None if rng.random() < p_null else value


Rows = dict[str, list[tuple[Any, ...]]]


def _hr(rng: random.Random) -> Rows:
    depts = (
        "Engineering",
        "Sales",
        "Marketing",
        "Finance",
        "Legal",
        "Support",
        "Research",
        "Operations",
        "Design",
        "Security",
    )
    d = [
        (i + 1, n, rng.choice(CITIES[:6]), rng.randrange(100, 900) * 1000, _date(rng, 1990, 2015))
        for i, n in enumerate(depts)
    ]
    names = _names(rng, 90)
    e = []
    for i in range(90):
        mgr = None if i < 6 or rng.random() < 0.1 else rng.randint(1, 6)
        bonus = _maybe(rng, 0.4, rng.randrange(1, 20) * 500)
        e.append((i + 1, names[i], rng.randint(21, 64), rng.randrange(30, 120) * 1000, rng.randint(1, 10),
                  rng.choice(CITIES), _date(rng, 2008, 2024), mgr, bonus, rng.randint(0, 40)))  # fmt: skip
    p = []
    for i in range(30):
        start = _date(rng, 2015, 2024)
        p.append((i + 1, f"Project {ADJ[i % 10]} {NOUN[(i * 3) % 10]}", rng.randint(1, 10),
                  rng.randrange(5, 200) * 1000, start, _maybe(rng, 0.3, _later(start, rng, 30, 900))))  # fmt: skip
    return {"departments": d, "employees": e, "projects": p}


def _shop(rng: random.Random) -> Rows:
    names = _names(rng, 80)
    c = [(i + 1, names[i], rng.choice(CITIES), rng.choice(COUNTRIES), rng.randint(18, 75), _date(rng, 2018, 2024),
          _maybe(rng, 0.25, names[i].lower().replace(" ", ".") + "@example.com"), rng.randrange(0, 100) * 50)
         for i in range(80)]  # fmt: skip
    cats = ("Books", "Toys", "Garden", "Kitchen", "Sports", "Music", "Office", "Games")
    pr = [(i + 1, f"{ADJ[i % 10]} {NOUN[(i * 7) % 10]} {i + 1}", cats[i % 8], rng.randrange(4, 400) / 2,
           rng.randint(0, 200), _maybe(rng, 0.2, rng.randint(10, 50) / 10)) for i in range(40)]  # fmt: skip
    o = []
    for i in range(200):
        prod = rng.randint(1, 40)
        qty = rng.randint(1, 10)
        day = _date(rng, 2022, 2024)
        o.append((i + 1, rng.randint(1, 80), prod, qty, day, round(qty * pr[prod - 1][3], 2),
                  _maybe(rng, 0.2, _later(day, rng, 1, 14))))  # fmt: skip
    return {"customers": c, "products": pr, "orders": o}


def _school(rng: random.Random) -> Rows:
    subjects = ("Math", "Physics", "History", "Biology", "Art", "Music", "Chemistry", "Literature")
    tn = _names(rng, 15)
    t = [
        (i + 1, tn[i], rng.choice(subjects), rng.randint(1, 35), rng.randrange(35, 90) * 1000)
        for i in range(15)
    ]
    sn = _names(rng, 100)
    s = [(i + 1, sn[i], rng.randint(17, 25), rng.randint(1, 4), rng.choice(CITIES), rng.randint(15, 40) / 10,
          _maybe(rng, 0.3, rng.randint(1, 15))) for i in range(100)]  # fmt: skip
    depts = ("Science", "Humanities", "Arts", "Engineering", "Languages", "Business")
    co = [(i + 1, f"{ADJ[i % 10]} {subjects[i % 8]} {100 + i}", depts[i % 6], rng.randint(1, 5), rng.randint(1, 15))
          for i in range(20)]  # fmt: skip
    semesters = ("2023-Fall", "2024-Spring", "2024-Fall")
    en = [(i + 1, rng.randint(1, 100), rng.randint(1, 20), _maybe(rng, 0.15, rng.randint(40, 100)), rng.choice(semesters))
          for i in range(250)]  # fmt: skip
    return {"teachers": t, "students": s, "courses": co, "enrollments": en}


def _library(rng: random.Random) -> Rows:
    an = _names(rng, 25)
    a = [(i + 1, an[i], rng.choice(COUNTRIES), rng.randint(1900, 1995)) for i in range(25)]
    genres = ("Mystery", "Poetry", "History", "Science", "Fantasy", "Travel", "Biography", "Drama")
    b = [(i + 1, f"The {ADJ[i % 10]} {NOUN[(i * 3 + i // 10) % 10]} {i + 1}", genres[rng.randrange(8)],
          rng.randrange(8, 90) * 10, rng.randint(1950, 2024), rng.randrange(10, 80) / 2, rng.randint(1, 25))
         for i in range(70)]  # fmt: skip
    mn = _names(rng, 60)
    m = [(i + 1, mn[i], rng.randint(12, 85), rng.choice(CITIES), _date(rng, 2015, 2024),
          _maybe(rng, 0.35, f"555-{rng.randint(1000, 9999)}")) for i in range(60)]  # fmt: skip
    loans = []
    for i in range(180):
        day = _date(rng, 2022, 2024)
        loans.append((i + 1, rng.randint(1, 60), rng.randint(1, 70), day, _maybe(rng, 0.25, _later(day, rng, 3, 60)),
                      _maybe(rng, 0.6, rng.randint(1, 40) / 2)))  # fmt: skip
    return {"authors": a, "books": b, "members": m, "loans": loans}


def _sports(rng: random.Random) -> Rows:
    mascots = (
        "Wolves",
        "Hawks",
        "Bears",
        "Otters",
        "Comets",
        "Giants",
        "Foxes",
        "Rams",
        "Owls",
        "Lynx",
        "Bulls",
        "Sharks",
    )
    teams = [(i + 1, f"{CITIES[i % 10]} {mascots[i]}", CITIES[i % 10], rng.randint(1890, 2010), rng.randint(10, 70),
              rng.randint(10, 70)) for i in range(12)]  # fmt: skip
    pn = _names(rng, 120)
    players = [(i + 1, pn[i], rng.randint(19, 38), rng.randint(1, 12), rng.randint(170, 215), rng.randint(0, 250) * 10,
                _maybe(rng, 0.2, rng.randint(0, 120) * 5), rng.randint(0, 99)) for i in range(120)]  # fmt: skip
    matches = []
    for i in range(100):
        home = rng.randint(1, 12)
        away = rng.choice([t for t in range(1, 13) if t != home])
        matches.append((i + 1, home, away, rng.randint(60, 130), rng.randint(60, 130), _date(rng, 2022, 2024),
                        _maybe(rng, 0.15, rng.randrange(20, 200) * 100)))  # fmt: skip
    return {"teams": teams, "players": players, "matches": matches}


DDL: dict[str, str] = {
    "hr": """
CREATE TABLE departments (dept_id INTEGER PRIMARY KEY, name TEXT NOT NULL, city TEXT, budget INTEGER, founded DATE);
CREATE TABLE employees (emp_id INTEGER PRIMARY KEY, name TEXT NOT NULL, age INTEGER, salary INTEGER,
  dept_id INTEGER REFERENCES departments(dept_id), city TEXT, hire_date DATE,
  manager_id INTEGER REFERENCES employees(emp_id), bonus INTEGER, years_experience INTEGER);
CREATE TABLE projects (project_id INTEGER PRIMARY KEY, name TEXT NOT NULL,
  dept_id INTEGER REFERENCES departments(dept_id), budget INTEGER, start_date DATE, end_date DATE);""",
    "shop": """
CREATE TABLE customers (customer_id INTEGER PRIMARY KEY, name TEXT NOT NULL, city TEXT, country TEXT, age INTEGER,
  signup_date DATE, email TEXT, loyalty_points INTEGER);
CREATE TABLE products (product_id INTEGER PRIMARY KEY, name TEXT NOT NULL, category TEXT, price REAL, stock INTEGER,
  rating REAL);
CREATE TABLE orders (order_id INTEGER PRIMARY KEY, customer_id INTEGER REFERENCES customers(customer_id),
  product_id INTEGER REFERENCES products(product_id), quantity INTEGER, order_date DATE, amount REAL, shipped_date DATE);""",
    "school": """
CREATE TABLE teachers (teacher_id INTEGER PRIMARY KEY, name TEXT NOT NULL, subject TEXT, years_experience INTEGER,
  salary INTEGER);
CREATE TABLE students (student_id INTEGER PRIMARY KEY, name TEXT NOT NULL, age INTEGER, grade_level INTEGER,
  city TEXT, gpa REAL, advisor_id INTEGER REFERENCES teachers(teacher_id));
CREATE TABLE courses (course_id INTEGER PRIMARY KEY, title TEXT NOT NULL, department TEXT, credits INTEGER,
  teacher_id INTEGER REFERENCES teachers(teacher_id));
CREATE TABLE enrollments (enrollment_id INTEGER PRIMARY KEY, student_id INTEGER REFERENCES students(student_id),
  course_id INTEGER REFERENCES courses(course_id), score INTEGER, semester TEXT);""",
    "library": """
CREATE TABLE authors (author_id INTEGER PRIMARY KEY, name TEXT NOT NULL, country TEXT, birth_year INTEGER);
CREATE TABLE books (book_id INTEGER PRIMARY KEY, title TEXT NOT NULL, genre TEXT, pages INTEGER, year INTEGER,
  price REAL, author_id INTEGER REFERENCES authors(author_id));
CREATE TABLE members (member_id INTEGER PRIMARY KEY, name TEXT NOT NULL, age INTEGER, city TEXT, join_date DATE,
  phone TEXT);
CREATE TABLE loans (loan_id INTEGER PRIMARY KEY, member_id INTEGER REFERENCES members(member_id),
  book_id INTEGER REFERENCES books(book_id), loan_date DATE, return_date DATE, fine REAL);""",
    "sports": """
CREATE TABLE teams (team_id INTEGER PRIMARY KEY, name TEXT NOT NULL, city TEXT, founded INTEGER, wins INTEGER,
  losses INTEGER);
CREATE TABLE players (player_id INTEGER PRIMARY KEY, name TEXT NOT NULL, age INTEGER,
  team_id INTEGER REFERENCES teams(team_id), height_cm INTEGER, points INTEGER, assists INTEGER, jersey_number INTEGER);
CREATE TABLE matches (match_id INTEGER PRIMARY KEY, home_team_id INTEGER REFERENCES teams(team_id),
  away_team_id INTEGER REFERENCES teams(team_id), home_score INTEGER, away_score INTEGER, match_date DATE,
  attendance INTEGER);""",
}
GENERATORS: dict[str, Callable[[random.Random], Rows]] = {
    "hr": _hr, "shop": _shop, "school": _school, "library": _library, "sports": _sports,
}  # fmt: skip


def database_path(db_id: str, seed: int = 0) -> Path:
    """Where the database lives in the cache (the version is part of the name)."""
    return cache_dir("sql", "generated") / f"{db_id}-{DB_VERSION}-s{seed}.sqlite"


def _valid(path: Path, db_id: str) -> bool:
    try:
        conn = sqlite3.connect(path.resolve().as_uri() + "?mode=ro", uri=True)
        try:
            names = {r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type='table'")}
        finally:
            conn.close()
    except sqlite3.DatabaseError:
        return False
    return names == set(re.findall(r"CREATE TABLE (\w+)", DDL[db_id]))


def ensure_database(db_id: str, seed: int = 0) -> Path:
    """Build the database once (atomically) and return its path."""
    if db_id not in GENERATORS:
        raise SQLDataError(f"unknown generated database {db_id!r}; known: {', '.join(DATABASES)}")
    path = database_path(db_id, seed)
    if path.is_file() and _valid(path, db_id):
        return path
    fd, tmp = tempfile.mkstemp(prefix=f".{db_id}-", suffix=".tmp", dir=path.parent)
    os.close(fd)
    try:
        conn = sqlite3.connect(tmp)
        try:
            conn.executescript(DDL[db_id])
            rows = GENERATORS[db_id](random.Random(f"{db_id}:{seed}:{DB_VERSION}"))
            for table, values in rows.items():
                marks = ",".join("?" * len(values[0]))
                conn.executemany(f"INSERT INTO {table} VALUES ({marks})", values)
            conn.commit()
        finally:
            conn.close()
        os.chmod(tmp, 0o644)  # mkstemp creates 0600; the cache is shareable
        settle(tmp)  # quiet for every reader at once (`_engine.settle`)
        os.replace(tmp, path)
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)
    logger.info("built generated SQL database %s", path)
    return path
