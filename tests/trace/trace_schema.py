#!/usr/bin/env python3
"""The hostoff trace format, schema version 1 (docs/trace-format.md), as a validator.

A trace is JSON Lines: one JSON object per line. The first line describes the run:

    {"hostoff_trace": 1, "device": {"name": STR, "mem_bytes": INT}, ...more keys allowed}

Every other line is one event, {"e": KIND, "t": INT, ...}: "t" is the host time in ns since the
first event. The keys of each kind are in SCHEMA below: required ones with their type, optional
ones likewise. Any other key, and any other "e", is allowed and ignored by readers. Integers are
JSON integers >= 0 (no fraction, no exponent). Buffer ids must be live: allocated before they are
used or freed, and not allocated again while live.

Usage: trace_schema.py TRACE...   prints FILE:LINE: problem for each problem and exits 1, or
prints a one-line summary per file and exits 0. As a module: validate(path) -> Trace."""

import json
import sys

UINT = "uint"
STR = "str"
BOOL = "bool"
UINTS = "uint list"

# kind: (required keys, optional keys). "d" (the host time spent inside the call, written by the
# library) is optional everywhere.
SCHEMA = {
    "alloc": ({"t": UINT, "id": UINT, "bytes": UINT}, {"s": UINT, "site": STR, "managed": BOOL}),
    "free": ({"t": UINT, "id": UINT}, {"s": UINT}),
    "launch": ({"t": UINT, "s": UINT, "k": STR, "ns": UINT, "use": UINTS}, {}),
    "copy": ({"t": UINT, "s": UINT, "dir": STR, "bytes": UINT, "use": UINTS},
             {"sync": BOOL, "memset": BOOL}),
    "sync": ({"t": UINT}, {"s": UINT}),
    "wait": ({"t": UINT, "s": UINT, "on": UINT}, {}),
    "step": ({"t": UINT}, {}),
    # The engine's timeline (offload mode): moves whose copy completed, and stalls. Not calls:
    # no "d"; ids are not checked against lifetimes (a move completes after a free is noted).
    "evict": ({"t": UINT, "ns": UINT, "id": UINT, "bytes": UINT}, {"cancelled": BOOL}),
    "restore": ({"t": UINT, "ns": UINT, "id": UINT, "bytes": UINT}, {"cancelled": BOOL}),
    "prefetch": ({"t": UINT, "ns": UINT, "id": UINT, "bytes": UINT}, {"cancelled": BOOL}),
    "stall": ({"t": UINT, "ns": UINT, "id": UINT, "why": STR}, {}),
}
ENGINE = ("evict", "restore", "prefetch", "stall")
STALL_WHY = ("demand", "late", "room")
COMMON_OPTIONAL = {"d": UINT}
COPY_DIRS = ("h2d", "d2h", "d2d")


def is_uint(v):
    return isinstance(v, int) and not isinstance(v, bool) and v >= 0


def type_ok(v, kind):
    if kind == UINT:
        return is_uint(v)
    if kind == STR:
        return isinstance(v, str)
    if kind == BOOL:
        return isinstance(v, bool)
    if kind == UINTS:
        return isinstance(v, list) and all(is_uint(x) for x in v)
    raise ValueError(kind)


class Trace:
    """What validate() found: the header, the known events (with their line numbers), the
    unconstrained peak (most bytes live at once) and the problems."""

    def __init__(self):
        self.header = None
        self.events = []  # (line number, dict)
        self.engine = []  # the engine's timeline: (line number, dict)
        self.peak = 0
        self.problems = []  # "LINE: what"


def _strict_ints(text):
    # json.loads turns 1.0 and 1e3 into floats, which type_ok rejects; integers stay ints.
    return json.loads(text)


def validate(path):
    t = Trace()
    live = {}
    live_bytes = 0
    with open(path, encoding="utf-8") as f:
        for n, raw in enumerate(f, start=1):
            if not raw.strip():
                continue
            try:
                obj = _strict_ints(raw)
            except ValueError as e:
                t.problems.append(f"{n}: not valid JSON: {e}")
                continue
            if not isinstance(obj, dict):
                t.problems.append(f"{n}: a line must be a JSON object")
                continue
            if t.header is None:
                t.header = obj
                if obj.get("hostoff_trace") != 1 or isinstance(obj.get("hostoff_trace"), bool):
                    t.problems.append(f"{n}: the first line must have \"hostoff_trace\": 1")
                dev = obj.get("device")
                if not isinstance(dev, dict) or not isinstance(dev.get("name"), str) or \
                        not is_uint(dev.get("mem_bytes")):
                    t.problems.append(f"{n}: \"device\" must be {{\"name\": STR, \"mem_bytes\": INT}}")
                continue
            kind = obj.get("e")
            if not isinstance(kind, str):
                t.problems.append(f"{n}: missing \"e\"")
                continue
            if kind not in SCHEMA:
                continue  # readers ignore unknown events
            required, optional = SCHEMA[kind]
            bad = False
            for key, ty in required.items():
                if key not in obj:
                    t.problems.append(f"{n}: {kind}: missing \"{key}\"")
                    bad = True
                elif not type_ok(obj[key], ty):
                    t.problems.append(f"{n}: {kind}: \"{key}\" must be a {ty}")
                    bad = True
            for key, ty in {**optional, **COMMON_OPTIONAL}.items():
                if key in obj and not type_ok(obj[key], ty):
                    t.problems.append(f"{n}: {kind}: \"{key}\" must be a {ty}")
                    bad = True
            if bad:
                continue
            if kind in ENGINE:
                if kind == "stall" and obj["why"] not in STALL_WHY:
                    t.problems.append(f"{n}: stall: \"why\" must be one of {STALL_WHY}")
                else:
                    t.engine.append((n, obj))
                continue
            if kind == "copy" and obj["dir"] not in COPY_DIRS:
                t.problems.append(f"{n}: copy: \"dir\" must be one of {COPY_DIRS}")
                continue
            if kind == "copy" and not obj["use"]:
                t.problems.append(f"{n}: copy: \"use\" names no buffer")
                continue
            if kind == "alloc":
                if obj["id"] in live:
                    t.problems.append(f"{n}: alloc: buffer {obj['id']} is already live")
                    continue
                if obj["bytes"] == 0:
                    t.problems.append(f"{n}: alloc: 0 bytes")
                    continue
                live[obj["id"]] = obj["bytes"]
                live_bytes += obj["bytes"]
                t.peak = max(t.peak, live_bytes)
            elif kind == "free":
                if obj["id"] not in live:
                    t.problems.append(f"{n}: free: buffer {obj['id']} is not live")
                    continue
                live_bytes -= live.pop(obj["id"])
            elif kind in ("launch", "copy"):
                dead = [i for i in obj["use"] if i not in live]
                if dead:
                    t.problems.append(f"{n}: {kind}: buffers {dead} are not live")
                    continue
            t.events.append((n, obj))
    if t.header is None:
        t.problems.append("1: empty: no first line")
    return t


def main(argv):
    status = 0
    for path in argv[1:]:
        t = validate(path)
        for p in t.problems:
            print(f"{path}:{p}")
        if t.problems:
            status = 1
        else:
            print(f"{path}: {len(t.events)} events, peak {t.peak} bytes")
    return status


if __name__ == "__main__":
    sys.exit(main(sys.argv))
