"""Question surfaces and column slots of the generated SQL benchmark.

Each family pairs a task with a *look-alike* whose wording differs in one requirement (inclusive vs
strict bound, distinct vs repeated values, ascending vs descending, missing vs present value, which
foreign key to join on, which aggregate), so that a correction right for one is wrong for the
other. Several paraphrases per requirement vary the surface.
"""

from __future__ import annotations

from dataclasses import dataclass

# -- boundary wording, per value kind and (side, strictness) -----------------------------------
BOUND: dict[str, dict[tuple[str, str], tuple[str, ...]]] = {
    "generic": {
        ("lower", "inclusive"): ("at least {v}", "{v} or more", "no less than {v}", "greater than or equal to {v}", "{v} or higher"),
        ("lower", "strict"): ("more than {v}", "greater than {v}", "over {v}", "strictly above {v}", "higher than {v}"),
        ("upper", "inclusive"): ("at most {v}", "{v} or less", "no more than {v}", "less than or equal to {v}", "{v} or lower"),
        ("upper", "strict"): ("less than {v}", "below {v}", "under {v}", "strictly below {v}", "lower than {v}"),
    },
    "age": {
        ("lower", "inclusive"): ("who are {v} or older", "aged {v} or older", "who are at least {v} years old", "who are no younger than {v}"),
        ("lower", "strict"): ("who are older than {v}", "aged over {v}", "who are more than {v} years old", "who are strictly older than {v}"),
        ("upper", "inclusive"): ("who are {v} or younger", "aged at most {v}", "who are no older than {v}", "who are at most {v} years old"),
        ("upper", "strict"): ("who are younger than {v}", "aged under {v}", "who are less than {v} years old", "aged below {v}"),
    },
    "date": {
        ("lower", "inclusive"): ("on or after {v}", "no earlier than {v}", "on {v} or later"),
        ("lower", "strict"): ("after {v}", "later than {v}", "strictly after {v}"),
        ("upper", "inclusive"): ("on or before {v}", "no later than {v}", "on {v} or earlier"),
        ("upper", "strict"): ("before {v}", "earlier than {v}", "strictly before {v}"),
    },
    "year": {
        ("lower", "inclusive"): ("in {v} or later", "no earlier than {v}"),
        ("lower", "strict"): ("after {v}", "later than {v}", "strictly after {v}"),
        ("upper", "inclusive"): ("in {v} or earlier", "no later than {v}"),
        ("upper", "strict"): ("before {v}", "earlier than {v}", "strictly before {v}"),
    },
    "count": {
        ("lower", "inclusive"): ("at least {v}", "{v} or more", "no fewer than {v}"),
        ("lower", "strict"): ("more than {v}", "over {v}", "strictly more than {v}"),
        ("upper", "inclusive"): ("at most {v}", "{v} or fewer", "no more than {v}"),
        ("upper", "strict"): ("fewer than {v}", "less than {v}", "strictly fewer than {v}"),
    },
}  # fmt: skip

LEADS = (
    "List the {labels} of",
    "Show the {labels} of",
    "Find the {labels} of",
    "Give the {labels} of",
    "Return the {labels} of",
)


@dataclass(frozen=True)
class NumSlot:
    """A numeric (or date) column to filter on: `kind` picks the wording family."""

    db: str
    table: str
    column: str
    label: str  # column returned
    labels: str  # plural noun of the returned column, e.g. "names"
    entity: str  # plural noun of the rows, e.g. "employees"
    noun: str  # what the column measures, e.g. "salary"; for dates/years the verb ("were hired")
    kind: str = "generic"  # generic | age | date | year


NUM_SLOTS: tuple[NumSlot, ...] = (
    NumSlot("hr", "employees", "age", "name", "names", "employees", "age", "age"),
    NumSlot("hr", "employees", "salary", "name", "names", "employees", "salary"),
    NumSlot("hr", "employees", "years_experience", "name", "names", "employees", "years of experience"),
    NumSlot("hr", "departments", "budget", "name", "names", "departments", "budget"),
    NumSlot("hr", "projects", "budget", "name", "names", "projects", "budget"),
    NumSlot("hr", "employees", "hire_date", "name", "names", "employees", "who were hired", "date"),
    NumSlot("hr", "projects", "start_date", "name", "names", "projects", "that started", "date"),
    NumSlot("shop", "customers", "age", "name", "names", "customers", "age", "age"),
    NumSlot("shop", "customers", "loyalty_points", "name", "names", "customers", "loyalty point balance"),
    NumSlot("shop", "products", "price", "name", "names", "products", "price"),
    NumSlot("shop", "products", "stock", "name", "names", "products", "stock level"),
    NumSlot("shop", "orders", "quantity", "order_id", "order ids", "orders", "quantity"),
    NumSlot("shop", "orders", "amount", "order_id", "order ids", "orders", "amount"),
    NumSlot("shop", "customers", "signup_date", "name", "names", "customers", "who signed up", "date"),
    NumSlot("shop", "orders", "order_date", "order_id", "order ids", "orders", "that were placed", "date"),
    NumSlot("school", "students", "age", "name", "names", "students", "age", "age"),
    NumSlot("school", "students", "gpa", "name", "names", "students", "GPA"),
    NumSlot("school", "students", "grade_level", "name", "names", "students", "grade level"),
    NumSlot("school", "teachers", "years_experience", "name", "names", "teachers", "years of experience"),
    NumSlot("school", "teachers", "salary", "name", "names", "teachers", "salary"),
    NumSlot("school", "courses", "credits", "title", "titles", "courses", "number of credits"),
    NumSlot("school", "enrollments", "score", "enrollment_id", "enrollment ids", "enrollments", "score"),
    NumSlot("library", "members", "age", "name", "names", "members", "age", "age"),
    NumSlot("library", "books", "pages", "title", "titles", "books", "page count"),
    NumSlot("library", "books", "price", "title", "titles", "books", "price"),
    NumSlot("library", "books", "year", "title", "titles", "books", "that were published", "year"),
    NumSlot("library", "authors", "birth_year", "name", "names", "authors", "who were born", "year"),
    NumSlot("library", "members", "join_date", "name", "names", "members", "who joined", "date"),
    NumSlot("library", "loans", "loan_date", "loan_id", "loan ids", "loans", "that were made", "date"),
    NumSlot("sports", "players", "age", "name", "names", "players", "age", "age"),
    NumSlot("sports", "players", "points", "name", "names", "players", "points tally"),
    NumSlot("sports", "players", "height_cm", "name", "names", "players", "height in centimetres"),
    NumSlot("sports", "teams", "wins", "name", "names", "teams", "number of wins"),
    NumSlot("sports", "teams", "founded", "name", "names", "teams", "that were founded", "year"),
    NumSlot(
        "sports", "matches", "match_date", "match_id", "match ids", "matches", "that were played", "date"
    ),
)


@dataclass(frozen=True)
class TextSlot:
    """A text column with repeated values (distinct / count-distinct / group-by families)."""

    db: str
    table: str
    column: str
    noun: str  # singular, e.g. "city"
    nouns: str  # plural, e.g. "cities"
    entity: str  # plural rows, e.g. "employees"
    one: str  # singular row, e.g. "employee"


TEXT_SLOTS: tuple[TextSlot, ...] = (
    TextSlot("hr", "employees", "city", "city", "cities", "employees", "employee"),
    TextSlot("hr", "departments", "city", "city", "cities", "departments", "department"),
    TextSlot("shop", "customers", "city", "city", "cities", "customers", "customer"),
    TextSlot("shop", "customers", "country", "country", "countries", "customers", "customer"),
    TextSlot("shop", "products", "category", "category", "categories", "products", "product"),
    TextSlot("school", "students", "city", "city", "cities", "students", "student"),
    TextSlot("school", "teachers", "subject", "subject", "subjects", "teachers", "teacher"),
    TextSlot("school", "courses", "department", "department", "departments", "courses", "course"),
    TextSlot("school", "enrollments", "semester", "semester", "semesters", "enrollments", "enrollment"),
    TextSlot("library", "books", "genre", "genre", "genres", "books", "book"),
    TextSlot("library", "authors", "country", "country", "countries", "authors", "author"),
    TextSlot("library", "members", "city", "city", "cities", "members", "member"),
    TextSlot("sports", "teams", "city", "city", "cities", "teams", "team"),
)


@dataclass(frozen=True)
class Link:
    """A foreign key child.fk → parent.pk, with the words a question uses for it."""

    db: str
    child: str
    fk: str
    parent: str
    pk: str
    parent_label: str  # column of the parent shown, e.g. "name"
    role: str  # who the parent is for the child, e.g. "customer who placed it"
    child_one: str  # singular child row, e.g. "order"
    child_label: str  # e.g. "order_id"
    child_label_noun: str  # e.g. "order id"
    parents: str  # plural parent rows, e.g. "customers"
    child_phrase: str  # e.g. "have placed an order"


LINKS: tuple[Link, ...] = (
    Link("hr", "employees", "dept_id", "departments", "dept_id", "name", "department they work in", "employee", "name", "employee name", "departments", "have employees"),
    Link("hr", "employees", "manager_id", "employees", "emp_id", "name", "manager they report to", "employee", "name", "employee name", "employees", "manage someone"),
    Link("hr", "projects", "dept_id", "departments", "dept_id", "name", "department running it", "project", "name", "project name", "departments", "run a project"),
    Link("shop", "orders", "customer_id", "customers", "customer_id", "name", "customer who placed it", "order", "order_id", "order id", "customers", "have placed an order"),
    Link("shop", "orders", "product_id", "products", "product_id", "name", "product that was ordered", "order", "order_id", "order id", "products", "have been ordered"),
    Link("school", "enrollments", "student_id", "students", "student_id", "name", "student who enrolled", "enrollment", "enrollment_id", "enrollment id", "students", "have enrolled in a course"),
    Link("school", "enrollments", "course_id", "courses", "course_id", "title", "course taken", "enrollment", "enrollment_id", "enrollment id", "courses", "have enrollments"),
    Link("school", "courses", "teacher_id", "teachers", "teacher_id", "name", "teacher who teaches it", "course", "title", "course title", "teachers", "teach a course"),
    Link("school", "students", "advisor_id", "teachers", "teacher_id", "name", "advisor assigned to them", "student", "name", "student name", "teachers", "advise a student"),
    Link("library", "loans", "member_id", "members", "member_id", "name", "member who borrowed the book", "loan", "loan_id", "loan id", "members", "have borrowed a book"),
    Link("library", "loans", "book_id", "books", "book_id", "title", "book that was lent", "loan", "loan_id", "loan id", "books", "have been lent out"),
    Link("library", "books", "author_id", "authors", "author_id", "name", "author who wrote it", "book", "title", "book title", "authors", "have written a book"),
    Link("sports", "players", "team_id", "teams", "team_id", "name", "team they play for", "player", "name", "player name", "teams", "have players"),
    Link("sports", "matches", "home_team_id", "teams", "team_id", "name", "home team", "match", "match_id", "match id", "teams", "have played a home match"),
    Link("sports", "matches", "away_team_id", "teams", "team_id", "name", "away team", "match", "match_id", "match id", "teams", "have played an away match"),
)  # fmt: skip

# join + numeric filter on the child: (link index into LINKS, child numeric column, noun)
JOIN_FILTERS: tuple[tuple[int, str, str], ...] = (
    (0, "salary", "salary"), (0, "age", "age"), (3, "quantity", "quantity"), (3, "amount", "amount"),
    (4, "quantity", "quantity"), (5, "score", "score"), (9, "fine", "fine"), (11, "pages", "page count"),
    (12, "points", "points tally"), (12, "age", "age"),
)  # fmt: skip


@dataclass(frozen=True)
class NullSlot:
    """A NULL-able column with wordings for 'value missing' and 'value present'."""

    db: str
    table: str
    column: str
    label: str
    labels: str
    entity: str
    absent: tuple[str, ...]
    present: tuple[str, ...]


NULL_SLOTS: tuple[NullSlot, ...] = (
    NullSlot("hr", "employees", "manager_id", "name", "names", "employees", ("who have no manager", "who do not have a manager", "without a manager"), ("who have a manager", "who have a manager recorded", "with a manager")),
    NullSlot("hr", "employees", "bonus", "name", "names", "employees", ("who did not receive a bonus", "with no bonus recorded", "without a bonus"), ("who received a bonus", "with a bonus recorded", "who have a bonus")),
    NullSlot("hr", "projects", "end_date", "name", "names", "projects", ("that have no end date", "without an end date"), ("that have an end date", "with an end date recorded")),
    NullSlot("shop", "orders", "shipped_date", "order_id", "order ids", "orders", ("that have not been shipped yet", "with no shipping date"), ("that have already been shipped", "with a shipping date")),
    NullSlot("shop", "products", "rating", "name", "names", "products", ("that have no rating", "that are missing a rating"), ("that have a rating", "that have been rated")),
    NullSlot("shop", "customers", "email", "name", "names", "customers", ("who have no email address on file", "without an email address"), ("who have an email address", "with an email address on file")),
    NullSlot("school", "students", "advisor_id", "name", "names", "students", ("who have no advisor", "without an advisor"), ("who have an advisor", "with an advisor")),
    NullSlot("school", "enrollments", "score", "enrollment_id", "enrollment ids", "enrollments", ("that have no score yet", "with a missing score"), ("that have a score", "with a score recorded")),
    NullSlot("library", "loans", "return_date", "loan_id", "loan ids", "loans", ("that have not been returned", "with no return date"), ("that have been returned", "with a return date")),
    NullSlot("library", "loans", "fine", "loan_id", "loan ids", "loans", ("that have no fine", "without a fine"), ("that have a fine", "with a fine recorded")),
    NullSlot("library", "members", "phone", "name", "names", "members", ("who have no phone number", "without a phone number"), ("who have a phone number", "with a phone number on file")),
    NullSlot("sports", "players", "assists", "name", "names", "players", ("with no assists recorded", "whose assists are unknown"), ("with assists recorded", "whose assists are known")),
    NullSlot("sports", "matches", "attendance", "match_id", "match ids", "matches", ("whose attendance is unknown", "with no attendance recorded"), ("whose attendance is known", "with a recorded attendance")),
)  # fmt: skip

# group-by slots: (db, table to count, group column or link index, group noun plural, counted noun)
GROUPS: tuple[tuple[str, str, str, str, str], ...] = (
    ("hr", "employees", "city", "cities", "employees"),
    ("shop", "customers", "city", "cities", "customers"),
    ("shop", "customers", "country", "countries", "customers"),
    ("shop", "products", "category", "categories", "products"),
    ("school", "students", "city", "cities", "students"),
    ("school", "enrollments", "semester", "semesters", "enrollments"),
    ("library", "books", "genre", "genres", "books"),
    ("library", "members", "city", "cities", "members"),
)
# group via a link: (link index, counted noun)
LINK_GROUPS: tuple[tuple[int, str], ...] = (
    (0, "employees"),
    (3, "orders"),
    (5, "enrollments"),
    (9, "loans"),
    (11, "books"),
    (12, "players"),
)

AGG_SURFACES: dict[str, tuple[str, ...]] = {
    "AVG": ("What is the average {noun} of {entity}{where}?", "Compute the mean {noun} of {entity}{where}."),
    "SUM": ("What is the total {noun} of {entity}{where}?", "What is the sum of the {noun} of {entity}{where}?", "What is the combined {noun} of {entity}{where}?"),
    "MAX": ("What is the highest {noun} among {entity}{where}?", "What is the maximum {noun} of {entity}{where}?"),
    "MIN": ("What is the lowest {noun} among {entity}{where}?", "What is the minimum {noun} of {entity}{where}?"),
}  # fmt: skip

ORDER_SURFACES: dict[str, dict[str, tuple[str, ...]]] = {
    "generic": {
        "desc": (
            "from highest to lowest {noun}",
            "sorted by {noun} in descending order",
            "highest {noun} first",
        ),
        "asc": (
            "from lowest to highest {noun}",
            "sorted by {noun} in ascending order",
            "lowest {noun} first",
        ),
    },
    "age": {
        "desc": ("oldest first", "from oldest to youngest"),
        "asc": ("youngest first", "from youngest to oldest"),
    },
    "date": {
        "desc": ("most recent first", "from newest to oldest"),
        "asc": ("earliest first", "from oldest to newest"),
    },
    "year": {
        "desc": ("most recent first", "from latest to earliest"),
        "asc": ("earliest first", "from earliest to latest"),
    },
}
TOPK_SURFACES: dict[str, dict[str, tuple[str, ...]]] = {
    "generic": {
        "desc": (
            "the {k} {entity} with the highest {noun}",
            "the top {k} {entity} by {noun}",
            "the {k} {entity} whose {noun} is largest",
        ),
        "asc": (
            "the {k} {entity} with the lowest {noun}",
            "the bottom {k} {entity} by {noun}",
            "the {k} {entity} whose {noun} is smallest",
        ),
    },
    "age": {"desc": ("the {k} oldest {entity}",), "asc": ("the {k} youngest {entity}",)},
}
