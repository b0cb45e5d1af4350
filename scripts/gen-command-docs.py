#!/usr/bin/env python3
"""Writes kvcore/src/commands/redis-docs.txt: what COMMAND INFO and COMMAND DOCS say of every
Redis command, computed from Redis's command JSON files the way Redis computes it at start-up
(implicit ACL categories, the legacy first/last/step range and the movablekeys flag, flags and
categories in Redis's output order, tokens upper-cased, display texts lower-cased).

Usage: scripts/gen-command-docs.py DIR_OF_JSON_FILES > kvcore/src/commands/redis-docs.txt
(for example the files of Redis's tag 7.4.1, `src/commands/*.json`).

Output: one token per line. `>name` starts a command (`>config|get` a subcommand), `+` marks a
container, `G` a command with a key-finding function of its own, `c@a,@b` lists its ACL categories (for COMMAND LIST FILTERBY ACLCAT), each `K` line
one key spec for GETKEYS (`K<begin>;<find>;<flags>`: begin `i<pos>`, `w<startfrom>,<keyword>`
or `u`; find `r<lastkey>,<step>,<limit>`, `n<keynumidx>,<firstkey>,<step>` or `u`), `I` then tokens: the INFO reply from the arity to
the key specs, `D<n>` then tokens: the n fields of the DOCS map before `subcommands`.
Tokens: `m<n>` map, `a<n>` array, `s<n>` set, `i<n>` integer, `t<text>` status, `b<text>`
bulk; texts escape backslash and newline.
"""

import json
import os
import sys

FLAG_ORDER = [  # addReplyFlagsForCommand; hidden flags are left out
    "WRITE", "READONLY", "DENYOOM", "MODULE", "ADMIN", "PUBSUB", "NOSCRIPT", "BLOCKING",
    "LOADING", "STALE", "SKIP_MONITOR", "SKIP_SLOWLOG", "ASKING", "FAST", "NO_AUTH",
    "NO_MANDATORY_KEYS", "NO_ASYNC_LOADING", "NO_MULTI", "MOVABLE_KEYS", "ALLOW_BUSY",
]
FLAG_NAMES = {"MOVABLE_KEYS": "movablekeys"}
CATEGORIES = [
    "keyspace", "read", "write", "set", "sortedset", "list", "hash", "string", "bitmap",
    "hyperloglog", "geo", "stream", "pubsub", "admin", "fast", "slow", "blocking", "dangerous",
    "connection", "transaction", "scripting",
]
KEY_FLAGS = [
    ("RO", "RO"), ("RW", "RW"), ("OW", "OW"), ("RM", "RM"), ("ACCESS", "access"),
    ("UPDATE", "update"), ("INSERT", "insert"), ("DELETE", "delete"), ("NOT_KEY", "not_key"),
    ("INCOMPLETE", "incomplete"), ("VARIABLE_FLAGS", "variable_flags"),
]
GROUPS = {"sorted_set": "sorted-set"}


def esc(s):
    return s.replace("\\", "\\\\").replace("\n", "\\n")


class Out:
    def __init__(self):
        self.lines = []

    def m(self, n):
        self.lines.append(f"m{n}")

    def a(self, n):
        self.lines.append(f"a{n}")

    def s(self, n):
        self.lines.append(f"s{n}")

    def i(self, n):
        self.lines.append(f"i{n}")

    def t(self, x):
        self.lines.append("t" + esc(x))

    def b(self, x):
        self.lines.append("b" + esc(x))

    def flags(self, names):
        self.s(len(names))
        for n in names:
            self.t(n)


def key_specs(out, specs):
    out.s(len(specs))
    for ks in specs:
        out.m(4 if ks.get("notes") else 3)
        if ks.get("notes"):
            out.b("notes")
            out.b(ks["notes"])
        out.b("flags")
        given = ks.get("flags", [])
        out.flags([name for f, name in KEY_FLAGS if f in given])
        out.b("begin_search")
        bs = ks["begin_search"]
        out.m(2)
        out.b("type")
        if "index" in bs:
            out.b("index")
            out.b("spec")
            out.m(1)
            out.b("index")
            out.i(bs["index"]["pos"])
        elif "keyword" in bs:
            out.b("keyword")
            out.b("spec")
            out.m(2)
            out.b("keyword")
            out.b(bs["keyword"]["keyword"])
            out.b("startfrom")
            out.i(bs["keyword"]["startfrom"])
        else:
            out.b("unknown")
            out.b("spec")
            out.m(0)
        out.b("find_keys")
        fk = ks["find_keys"]
        out.m(2)
        out.b("type")
        if "range" in fk:
            r = fk["range"]
            out.b("range")
            out.b("spec")
            out.m(3)
            out.b("lastkey")
            out.i(r["lastkey"])
            out.b("keystep")
            out.i(r["step"])
            out.b("limit")
            out.i(r["limit"])
        elif "keynum" in fk:
            k = fk["keynum"]
            out.b("keynum")
            out.b("spec")
            out.m(3)
            out.b("keynumidx")
            out.i(k["keynumidx"])
            out.b("firstkey")
            out.i(k["firstkey"])
            out.b("keystep")
            out.i(k["step"])
        else:
            out.b("unknown")
            out.b("spec")
            out.m(0)


def legacy_range(specs, flags):
    """populateCommandLegacyRangeSpec: (first, last, step) and whether keys are movable."""
    movable = False

    def is_range(ks):
        return "index" in ks["begin_search"] and "range" in ks["find_keys"]

    if not specs:
        return (0, 0, 0), movable
    if len(specs) == 1 and is_range(specs[0]):
        ks = specs[0]
        if "INCOMPLETE" in ks.get("flags", []):
            movable = True
        first = ks["begin_search"]["index"]["pos"]
        last = ks["find_keys"]["range"]["lastkey"]
        if last >= 0:
            last += first
        return (first, last, ks["find_keys"]["range"]["step"]), movable
    first, last, prev_last = None, 0, 0
    for ks in specs:
        if not is_range(ks):
            movable = True
            continue
        pos = ks["begin_search"]["index"]["pos"]
        r = ks["find_keys"]["range"]
        if r["step"] != 1 or (prev_last and prev_last != pos - 1):
            movable = True
            continue
        if "INCOMPLETE" in ks.get("flags", []):
            movable = True
        first = pos if first is None else min(first, pos)
        abs_last = r["lastkey"] + pos if r["lastkey"] >= 0 else r["lastkey"]
        # Redis compares as unsigned: a negative lastkey wins.
        last = abs_last if (abs_last & 0xFFFFFFFF) > (last & 0xFFFFFFFF) else last
        prev_last = last
    if first is None:
        return (0, 0, 0), True
    rel = last if last < 0 else last - first
    return (first, rel + first if rel >= 0 else rel, 1), movable


# Redis 7.0 has no `display_text` (for checking this script against a 7.0 server).
WITH_DISPLAY = "--redis-7.0" not in sys.argv


def args_list(out, args):
    out.a(len(args))
    for a in args:
        kind = a["type"]
        nested = kind in ("oneof", "block")
        shown = WITH_DISPLAY and not nested
        fields = 2 + (1 if shown else 0)
        flags = [f for f in ("optional", "multiple", "multiple_token") if a.get(f)]
        for f in ("key_spec_index", "token", "summary", "since", "deprecated_since"):
            if f in a and a[f] not in (None, ""):
                fields += 1
        if flags:
            fields += 1
        if nested:
            fields += 1
        out.m(fields)
        out.b("name")
        out.b(a["name"].lower())
        out.b("type")
        out.b(kind)
        if shown:
            out.b("display_text")
            out.b(a["display"].lower() if "display" in a else a["name"].lower())
        if "key_spec_index" in a:
            out.b("key_spec_index")
            out.i(a["key_spec_index"])
        if a.get("token"):
            out.b("token")
            # Redis pastes the token into a C string literal, so MIGRATE's `""` token
            # becomes "" "" there: the empty string.
            out.b(a["token"].upper().replace('"', ""))
        for f in ("summary", "since", "deprecated_since"):
            if a.get(f):
                out.b(f)
                out.b(a[f])
        if flags:
            out.b("flags")
            out.flags(flags)
        if nested:
            out.b("arguments")
            args_list(out, a["arguments"])


def command(name, d, container):
    flags = list(d.get("command_flags", []))
    if "ONLY_SENTINEL" in flags:
        return None
    specs = d.get("key_specs", [])
    (first, last, step), movable = legacy_range(specs, flags)
    if movable:
        flags.append("MOVABLE_KEYS")
    cats = set(c.lower() for c in d.get("acl_categories", []))
    if "WRITE" in flags:
        cats.add("write")
    if "READONLY" in flags and "scripting" not in cats:
        cats.add("read")
    if "ADMIN" in flags:
        cats |= {"admin", "dangerous"}
    if "PUBSUB" in flags:
        cats.add("pubsub")
    if "FAST" in flags:
        cats.add("fast")
    if "BLOCKING" in flags:
        cats.add("blocking")
    if "fast" not in cats:
        cats.add("slow")
    cats = ["@" + c for c in CATEGORIES if c in cats]

    out = Out()
    out.lines.append(">" + name)
    if container:
        out.lines.append("+")
    out.lines.append("c" + ",".join(cats))
    if "get_keys_function" in d:
        out.lines.append("G")
    for ks in specs:
        bs, fk = ks["begin_search"], ks["find_keys"]
        if "index" in bs:
            b = f"i{bs['index']['pos']}"
        elif "keyword" in bs:
            b = f"w{bs['keyword']['startfrom']},{bs['keyword']['keyword']}"
        else:
            b = "u"
        if "range" in fk:
            r = fk["range"]
            f = f"r{r['lastkey']},{r['step']},{r['limit']}"
        elif "keynum" in fk:
            k = fk["keynum"]
            f = f"n{k['keynumidx']},{k['firstkey']},{k['step']}"
        else:
            f = "u"
        given = ks.get("flags", [])
        out.lines.append(f"K{b};{f};" + ",".join(n for fl, n in KEY_FLAGS if fl in given))
    out.lines.append("I")
    out.i(d["arity"])
    out.flags([FLAG_NAMES.get(f, f.lower()) for f in FLAG_ORDER if f in flags])
    out.i(first)
    out.i(last)
    out.i(step)
    out.s(len(cats))
    for c in cats:
        out.t(c)
    tips = d.get("command_tips", [])
    out.s(len(tips))
    for t in tips:
        out.b(t.lower())
    key_specs(out, specs)

    docs = Out()
    n = 1
    for f in ("summary", "since"):
        if d.get(f):
            n += 1
            docs.b(f)
            docs.b(d[f])
    docs.b("group")
    docs.b(GROUPS.get(d["group"], d["group"]))
    if d.get("complexity"):
        n += 1
        docs.b("complexity")
        docs.b(d["complexity"])
    doc_flags = [f.lower() for f in ("DEPRECATED", "SYSCMD") if f in d.get("doc_flags", [])]
    if doc_flags:
        n += 1
        docs.b("doc_flags")
        docs.flags(doc_flags)
    for f in ("deprecated_since", "replaced_by"):
        if d.get(f):
            n += 1
            docs.b(f)
            docs.b(d[f])
    if d.get("history"):
        n += 1
        docs.b("history")
        docs.s(len(d["history"]))
        for since, change in d["history"]:
            docs.a(2)
            docs.b(since)
            docs.b(change)
    if d.get("arguments"):
        n += 1
        docs.b("arguments")
        args_list(docs, d["arguments"])
    out.lines.append(f"D{n}")
    out.lines.extend(docs.lines)
    return out.lines


def main():
    src = sys.argv[1]
    tops, subs = {}, {}
    for f in sorted(os.listdir(src)):
        if not f.endswith(".json"):
            continue
        for name, d in json.load(open(os.path.join(src, f))).items():
            if "container" in d:
                subs.setdefault(d["container"].lower(), {})[name.lower()] = d
            else:
                tops[name.lower()] = d
    lines = []
    for name in sorted(tops):
        entry = command(name, tops[name], name in subs)
        if entry is None:
            continue
        lines += entry
        for sub in sorted(subs.get(name, {})):
            entry = command(f"{name}|{sub}", subs[name][sub], False)
            if entry is not None:
                lines += entry
    sys.stdout.write("\n".join(lines) + "\n")


main()
