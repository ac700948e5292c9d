"""In-sandbox side of a judged test run (stdlib only; copied into the sandbox as ``_cm_program.py``).

Usage: ``python -I -S _cm_program.py REQUEST_FD REPLY_FD`` in the sandbox copy, with
``_cm_program.json`` (the module to import, ``sys.path`` entries), ``_cm_wire.py`` and
``_cm_frames.py`` next to it.
It imports the program on the first request and answers requests from the judge, one at a time:
``("call", function, table, roots, kwarg_names)`` calls a function of the program with the
decoded arguments; ``("eval", expr, table, roots, names, function)`` evaluates an expression with
`names` and the function bound. The reply is ``("ok", table, roots)`` (the result and the new
state of every received object, see `wire.py`), ``("raise", exception type, message)`` or
``("error", message)``. Nothing here decides a verdict: this process holds no expected value,
no test and no channel to anything but the judge, which reads every reply as bounded plain data.
"""

import importlib
import json
import os
import pickle
import sys


def _describe(exc):
    try:
        text = str(exc)
    except BaseException:  # noqa: BLE001 - a str() that raises
        text = ""
    return text[:500]


def main():
    req, rep = int(sys.argv[1]), int(sys.argv[2])
    with open("_cm_program.json", encoding="utf-8") as f:
        cfg = json.load(f)
    sys.path[:0] = cfg["sys_path"]
    wire = importlib.import_module("_cm_wire")
    frames = importlib.import_module("_cm_frames")
    dumps, loads, exit_ = pickle.dumps, pickle.loads, os._exit  # bound before any program code
    read, write = frames.read_frame, frames.write_frame
    module = None
    while True:
        body = read(req)
        if body is None:
            exit_(0)
        msg = loads(body)
        try:
            if module is None:
                module = importlib.import_module(cfg["module"])
            objs = []
            if msg[0] == "call":
                _, name, table, roots, kw_names = msg
                values, objs = wire.decode_all(table, roots)
                n = len(values) - len(kw_names)
                result = getattr(module, name)(*values[:n], **dict(zip(kw_names, values[n:], strict=False)))
            else:
                _, expr, table, roots, names, function = msg
                values, objs = wire.decode_all(table, roots)
                ns = dict(zip(names, values, strict=False))
                if function:
                    ns[function] = getattr(module, function)
                ns["__builtins__"] = __builtins__
                result = eval(expr, ns)  # noqa: S307 - the test's own expression, in the sandbox
            classes = {wire.class_key(type(o)) for o in objs if type(o) not in wire.ATOMS}
            out_table, out_roots, _ = wire.encode([result], known=objs, classes=classes)
            reply = ("ok", out_table, out_roots)
        except wire.WireError as exc:
            reply = ("error", "the result cannot be checked: " + _describe(exc))
        except BaseException as exc:  # noqa: BLE001 - whatever the program raises is reported
            reply = ("raise", type(exc).__name__[:100], _describe(exc))
        try:
            data = dumps(reply, protocol=4)
        except BaseException as exc:  # noqa: BLE001 - e.g. a value that cannot be pickled
            data = dumps(("error", "the result cannot be sent: " + _describe(exc)), protocol=4)
        write(rep, data)


if __name__ == "__main__":
    main()
