"""By-value transfer of Python values between the trusted judge and the untrusted program process,
with object identity preserved. Stdlib only: the same file is copied into each sandbox.

`encode(roots)` flattens a value graph into a *table*: a list of entries ``(kind, payload)``, one per
container or object, whose payloads hold atoms (None, bool, int, float, str, bytes) or references
``(index,)`` to other entries. Shared references and cycles are kept (each object is one entry),
deep structures stay flat (a 10,000-node linked list is 10,000 entries, not 10,000 nesting
levels), and the receiving side never recurses. Kinds: ``l`` list, ``t`` tuple, ``s`` set, ``f``
frozenset, ``d`` dict (keys and values alternate), ``q`` deque, ``i`` a materialised iterator
or generator (received as an iterator), ``c`` complex, ``b`` bytearray, ``o`` an instance of a
*plain class* (its ``__dict__``) named ``module:qualname``.

Objects are sent only for classes the receiver allows (`decode`'s `classes`): the judge sends
what the tests build (e.g. QuixBugs' graph ``Node``) and accepts back only those classes; any
other object from the program is refused, so no class of the program's choosing ever reaches the
judge. `encode(..., known=objects)` gives `objects` the first table indices, in order, and
`decode(..., existing=objects)` writes entries at those indices *into* the given objects: call by
copy-restore, so a function that relinks the nodes it was passed (``reverse_linked_list``)
relinks the judge's own nodes, and ``result is node1`` holds.

Every size is bounded by the caller's limits; malformed tables raise `WireError` only. Decoding
never does unbounded work in C, where a deadline (a signal) cannot interrupt it: integers are
capped at `MAX_INT_BITS`, tuples / frozensets / iterators nest at most `MAX_FROZEN_DEPTH` deep (a
hash of a deeper chain recurses in C), and before a dict, set or frozenset is built its keys are
hashed under a budget (`MAX_HASH_WORK`, counting a tuple's hash as the work of all it holds, shared
parts every time) and refused when more than `MAX_COLLISIONS` of them share one hash value
(colliding keys make each insertion scan all the others).
"""

import collections
import importlib
import types

ATOMS = (type(None), bool, int, float, str, bytes)
MUTABLE = "lsdqo"
MAX_ITEMS = 2_000_000
MAX_INT_BITS = 1 << 16
MAX_FROZEN_DEPTH = 100
MAX_COLLISIONS = 32
MAX_HASH_WORK = 8_000_000
_PLAIN_MUTABLE = {list: "l", set: "s", dict: "d", collections.deque: "q"}


class WireError(Exception):
    """A value cannot be sent, or a received table is malformed or too large."""


def class_key(cls):
    return (getattr(cls, "__module__", "") or "") + ":" + (getattr(cls, "__qualname__", "") or "")


def is_plain_object(value):
    cls = type(value)
    return (
        isinstance(getattr(value, "__dict__", None), dict)
        and cls.__new__ is object.__new__
        and not isinstance(value, (type, types.ModuleType, types.FunctionType, BaseException))
        and "__slots__" not in cls.__dict__
    )


def encode(roots, known=(), classes=None, max_items=MAX_ITEMS):
    """(table, root slots, objects by table index) for the values `roots`; `known` objects get
    indices 0..len-1. `classes`: the class keys objects may have (None: any plain class)."""
    table, index, items, objects = [], {}, [0], []

    def slot(value, todo):
        t = type(value)
        if t in ATOMS:
            if t is int and value.bit_length() > MAX_INT_BITS:
                raise WireError("an integer is too large to send")
            return value
        ref = index.get(id(value))
        if ref is None:
            ref = len(table)
            index[id(value)] = ref
            table.append(None)
            objects.append(value)
            todo.append((ref, value))
        return (ref,)

    todo = []
    keep = list(known) + list(roots)  # ids stay valid while we hold the objects
    for i, obj in enumerate(known):  # one entry per position, even for a repeated object
        if type(obj) in ATOMS:
            raise WireError("a known value must be a container or an object")
        table.append(None)
        objects.append(obj)
        index.setdefault(id(obj), i)
        todo.append((i, obj))
    root_slots = tuple(slot(v, todo) for v in roots)
    while todo:
        ref, value = todo.pop()
        items[0] += 1
        t = type(value)
        if t is list or t is tuple or t is set or t is frozenset or t is collections.deque:
            kind = {list: "l", tuple: "t", set: "s", frozenset: "f", collections.deque: "q"}[t]
            members = list(value)
        elif (
            t is dict
            or t is collections.defaultdict
            or t is collections.OrderedDict
            or t is collections.Counter
        ):
            kind, members = "d", [x for kv in value.items() for x in kv]  # dict subclasses arrive as dicts
        elif t is complex:
            table[ref] = ("c", (value.real, value.imag))
            continue
        elif t is bytearray:
            table[ref] = ("b", (bytes(value),))
            continue
        elif is_plain_object(value):
            key = class_key(t)
            if classes is not None and key not in classes:
                raise WireError(f"a {t.__name__} object cannot be sent (class {key} is not checked)")
            table[ref] = ("o", (key, slot(vars(value), todo)))
            continue
        elif hasattr(value, "__next__") and hasattr(value, "__iter__"):
            kind, members = "i", []
            for x in value:
                members.append(x)
                items[0] += 1
                if items[0] > max_items:
                    raise WireError("an iterator yields too many items to send")
        else:
            raise WireError(f"a {t.__name__} value cannot be sent")
        items[0] += len(members)
        if items[0] > max_items:
            raise WireError("the value is too large to send")
        table[ref] = (kind, tuple(slot(m, todo) for m in members))
    del keep
    return table, root_slots, objects


def _check(table, roots, max_items):
    if type(table) is not list or type(roots) is not tuple or len(table) > max_items:
        raise WireError("malformed value")
    total = 0
    for entry in table:
        if (
            type(entry) is not tuple
            or len(entry) != 2
            or type(entry[0]) is not str
            or type(entry[1]) is not tuple
        ):
            raise WireError("malformed value")
        total += len(entry[1])
    if total > max_items:
        raise WireError("value too large")
    n = len(table)
    for s in _all_slots(table, roots):
        if type(s) is tuple and (len(s) != 1 or type(s[0]) is not int or not 0 <= s[0] < n):
            raise WireError("malformed reference")
        if type(s) not in ATOMS and type(s) is not tuple:
            raise WireError("malformed value")
        if type(s) is int and s.bit_length() > MAX_INT_BITS:
            raise WireError("an integer is too large to check")


def _all_slots(table, roots):
    yield from roots
    for kind, payload in table:
        if kind == "o":
            if len(payload) != 2 or type(payload[0]) is not str or type(payload[1]) is not tuple:
                raise WireError("malformed object")
            yield payload[1]
        elif kind in ("c", "b"):
            continue
        else:
            yield from payload


def decode(table, roots, existing=(), classes=None, max_items=MAX_ITEMS):
    """The values of `roots` (see module doc). `classes` maps class keys to the classes objects
    may be built as (None: import the module and look the class up, else a stand-in class)."""
    return decode_all(table, roots, existing, classes, max_items)[0]


def decode_all(table, roots, existing=(), classes=None, max_items=MAX_ITEMS):
    """(values of `roots`, objects by table index): `decode` plus what copy-restore needs."""
    try:
        return _decode_all(table, roots, existing, classes, max_items)
    except WireError:
        raise
    except (TypeError, ValueError, AttributeError, RecursionError, MemoryError, OverflowError) as exc:
        raise WireError(f"malformed value ({type(exc).__name__})") from None


def _decode_all(table, roots, existing, classes, max_items):
    _check(table, roots, max_items)
    objs = [None] * len(table)
    done = [False] * len(table)
    for i, (kind, payload) in enumerate(table):  # 1. shells of mutable containers and objects
        if i < len(existing):
            old = existing[i]
            if (kind in "ldsq" and _PLAIN_MUTABLE.get(type(old)) != kind) or (
                kind == "o" and not is_plain_object(old)
            ):
                raise WireError("a received value changed its type")
            objs[i], done[i] = old, kind not in MUTABLE
            continue
        if kind == "l":
            objs[i] = []
        elif kind == "s":
            objs[i] = set()
        elif kind == "d":
            objs[i] = {}
        elif kind == "q":
            objs[i] = collections.deque()
        elif kind == "o":
            objs[i] = _new_object(payload[0], classes)
        elif kind not in "tfcbi":
            raise WireError(f"unknown kind {kind!r}")
    budget = _HashBudget(table, objs)
    depth = [0] * len(table)
    for i in range(len(table)):  # 2. immutable entries, dependencies first (iteratively)
        _build_immutable(table, objs, done, i, budget, depth)

    def val(s):
        return objs[s[0]] if type(s) is tuple else s

    order = sorted(range(len(table)), key=lambda k: "lqdso".find(table[k][0]))
    for i in order:  # 3. fill containers, then objects (an object's attributes are a dict entry)
        kind, payload = table[i]
        if done[i] and i < len(existing) and kind not in MUTABLE:
            continue
        obj = objs[i]
        if kind == "l":
            obj[:] = [val(s) for s in payload]
        elif kind == "q":
            obj.clear()
            obj.extend(val(s) for s in payload)
        elif kind == "o":
            attrs = val(payload[1])
            if type(attrs) is not dict or not all(type(k) is str for k in attrs):
                raise WireError("malformed object")
            obj.__dict__.clear()
            obj.__dict__.update(attrs)
        elif kind == "d":
            budget.admit(payload[::2])
            obj.clear()
            obj.update(zip([val(s) for s in payload[::2]], [val(s) for s in payload[1::2]], strict=False))
        elif kind == "s":
            budget.admit(payload)
            obj.clear()
            obj.update(val(s) for s in payload)
    return tuple(val(s) for s in roots), objs


class _HashBudget:
    """Hashes the keys of one container before it is built (see module doc)."""

    def __init__(self, table, objs):
        self.table, self.objs, self.left, self.memo = table, objs, MAX_HASH_WORK, {}

    def cost(self, s):
        """Work of hashing slot `s` once: 1 per atom (plus its length), a tuple all it holds."""
        if type(s) is not tuple:
            if type(s) is int:
                return 1 + s.bit_length() // 64
            return 1 + len(s) // 64 if type(s) in (str, bytes) else 1
        i = s[0]
        if i in self.memo:
            return self.memo[i]
        kind, payload = self.table[i]
        total = 1
        if kind == "t":  # a tuple's hash is not cached: every use rehashes what it holds
            for child in payload:
                total += self.cost(child)  # recursion bounded by MAX_FROZEN_DEPTH
                if total > MAX_HASH_WORK:
                    break
        self.memo[i] = total
        return total

    def admit(self, keys):
        counts = {}
        for s in keys:
            self.left -= self.cost(s)
            if self.left < 0:
                raise WireError("the value's keys take too much work to hash")
            h = hash(self.objs[s[0]] if type(s) is tuple else s)
            n = counts.get(h, 0) + 1
            if n > MAX_COLLISIONS:
                raise WireError(f"more than {MAX_COLLISIONS} keys of one dict or set share a hash value")
            counts[h] = n


def _build_immutable(table, objs, done, start, budget, depth):
    stack = [start]
    visiting = set()
    while stack:
        i = stack[-1]
        kind, payload = table[i]
        if done[i] or kind in MUTABLE:
            done[i] = True
            stack.pop()
            continue
        if kind == "c":
            if len(payload) != 2 or not all(type(x) in (int, float) for x in payload):
                raise WireError("malformed complex")
            objs[i], done[i] = complex(*payload), True
            stack.pop()
            continue
        if kind == "b":
            if len(payload) != 1 or type(payload[0]) is not bytes:
                raise WireError("malformed bytearray")
            objs[i], done[i] = bytearray(payload[0]), True
            stack.pop()
            continue
        pending = list(
            dict.fromkeys(
                s[0] for s in payload if type(s) is tuple and not done[s[0]] and table[s[0]][0] not in MUTABLE
            )
        )
        if pending:
            if i in visiting or any(p in visiting for p in pending):
                raise WireError("a cycle through immutable values")
            visiting.add(i)  # on the current path until built (shared parts are built once)
            stack.extend(pending)
            continue
        visiting.discard(i)
        inner = [depth[s[0]] for s in payload if type(s) is tuple and table[s[0]][0] not in MUTABLE]
        depth[i] = 1 + max(inner, default=0)
        if depth[i] > MAX_FROZEN_DEPTH:
            raise WireError(f"tuples or frozensets nested deeper than {MAX_FROZEN_DEPTH} levels")
        if kind == "f":
            budget.admit(payload)
        values = [objs[s[0]] if type(s) is tuple else s for s in payload]
        try:
            objs[i] = {"t": tuple, "f": frozenset, "i": iter}[kind](values)
        except TypeError as exc:
            raise WireError(f"malformed value ({exc})") from None
        done[i] = True
        stack.pop()


_STANDINS = {}


def _new_object(key, classes):
    if classes is not None:
        cls = classes.get(key)
        if cls is None:
            raise WireError(f"an object of class {key} cannot be checked")
        return cls.__new__(cls)
    module, _, qualname = key.partition(":")
    cls = None
    try:
        cls = importlib.import_module(module)
        for part in qualname.split("."):
            cls = getattr(cls, part)
        obj = cls.__new__(cls) if isinstance(cls, type) and cls.__new__ is object.__new__ else None
    except Exception:  # noqa: BLE001 - the class is not importable here: a stand-in
        obj = None
    if obj is None:
        name = qualname.rsplit(".", 1)[-1] or "Object"
        stand_in = _STANDINS.setdefault(key, type(name, (), {"__module__": module, "__qualname__": qualname}))
        obj = stand_in.__new__(stand_in)
    return obj
