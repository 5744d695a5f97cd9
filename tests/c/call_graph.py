"""A rough static call graph of csrc/, to show which way calls go between folders.

APPROXIMATE, by design (stdlib only, no C parser):
- a function definition is a top-level `name(...) {` after comments, string/char literals and
  preprocessor lines are blanked out; K&R style, macros that expand to definitions and
  `__attribute__` after a parameter list are not recognised;
- a call is an identifier followed by `(` inside a body that names a project function;
  calls made inside macro bodies, and calls through function pointers (callbacks, vtables)
  are NOT seen, and a function whose address is merely taken is not a call;
- a `static` function resolves to the definition in the caller's own file (or a header);
  otherwise to the non-static definitions of that name.
So the graph can miss edges (it never follows callbacks) and the numbers are a map, not a proof.

Layer order (the same as tests/c/check_layers.py):
    common <- ir <- front <- lower <- parse <- mask <- compile, runtime
A *climb* is a call from a file in one folder to a function defined in a folder later in the
order (mask/ calling into compile/ is a climb). Folders not in the order (older trees) are
printed and never counted as climbs.

Usage:
    python3 tests/c/call_graph.py --fill [ROOT]      # calls reachable from ROOT
                                                     # (default xgr_matcher_fill_bitmask)
    python3 tests/c/call_graph.py --file-cycles      # cross-folder circles, calls and includes
    python3 tests/c/call_graph.py --csrc PATH ...    # another tree (e.g. an old commit's csrc)
With --file-cycles the exit status is 1 when a cross-folder circle exists: a strongly connected
set of files spanning two folders or more (by calls or by includes), or folders that reach each
other (by calls or by includes); so it runs as a check; --fill alone always exits 0 (its climbs are printed, not failed)."""

import argparse
import os
import re
import sys
from collections import defaultdict

ORDER = ["include", "common", "ir", "front", "lower", "parse", "mask", ("compile", "runtime")]
RANK = {}
for _i, _names in enumerate(ORDER):
    for _n in _names if isinstance(_names, tuple) else (_names,):
        RANK[_n] = _i

KEYWORDS = {
    "if", "while", "for", "switch", "return", "sizeof", "do", "else", "case", "goto",
    "_Alignof", "_Generic", "_Static_assert", "defined", "alignof", "static_assert",
}


def blank(src: str) -> str:
    """Comments, string and char literals and preprocessor lines -> spaces (newlines kept)."""
    out = []
    i, n = 0, len(src)
    line_start = True
    while i < n:
        c = src[i]
        if line_start and c in " \t":
            out.append(c)
            i += 1
            continue
        if line_start and c == "#":
            # preprocessor line, with backslash continuations
            while i < n and src[i] != "\n":
                if src[i] == "\\" and i + 1 < n and src[i + 1] == "\n":
                    out.append(" \n")
                    i += 2
                    continue
                out.append(" ")
                i += 1
            continue
        line_start = False
        if c == "/" and src.startswith("/*", i):
            j = src.find("*/", i + 2)
            j = n if j < 0 else j + 2
            out.append(re.sub(r"[^\n]", " ", src[i:j]))
            i = j
            continue
        if c == "/" and src.startswith("//", i):
            j = src.find("\n", i)
            j = n if j < 0 else j
            out.append(" " * (j - i))
            i = j
            continue
        if c in "\"'":
            j = i + 1
            while j < n and src[j] != c and src[j] != "\n":
                j += 2 if src[j] == "\\" else 1
            j = min(j + 1, n)
            out.append(c + re.sub(r"[^\n]", " ", src[i + 1:j - 1]) + c)
            i = j
            continue
        if c == "\n":
            line_start = True
        out.append(c)
        i += 1
    return "".join(out)


def _def_name(seg: str):
    """The function name when seg (text before a top-level '{') ends with `name(params)`."""
    s = seg.rstrip()
    if not s.endswith(")") or "=" in s:
        return None
    depth = 0
    for k in range(len(s) - 1, -1, -1):
        if s[k] == ")":
            depth += 1
        elif s[k] == "(":
            depth -= 1
            if depth == 0:
                m = re.search(r"([A-Za-z_]\w*)\s*$", s[:k])
                if m and m.group(1) not in KEYWORDS:
                    return m.group(1)
                return None
    return None


def definitions(text: str):
    """Yield (name, is_static, body, line) for top-level function definitions of blanked text."""
    depth = 0
    seg_start = 0
    i = 0
    while i < len(text):
        c = text[i]
        if c == "{":
            if depth == 0:
                seg = text[seg_start:i]
                name = _def_name(seg)
                if name:
                    d, j = 1, i + 1
                    while j < len(text) and d:
                        d += {"{": 1, "}": -1}.get(text[j], 0)
                        j += 1
                    static = re.search(r"\bstatic\b", seg) is not None
                    yield name, static, text[i:j], text.count("\n", 0, i) + 1
                    i = j
                    seg_start = j
                    continue
            depth += 1
        elif c == "}":
            depth -= 1
            if depth == 0:
                seg_start = i + 1
        elif c == ";" and depth == 0:
            seg_start = i + 1
        i += 1


def folder_of(rel: str) -> str:
    return rel.split("/")[0] if "/" in rel else "."


class Graph:
    def __init__(self, csrc: str):
        self.csrc = csrc
        self.defs = defaultdict(list)  # name -> [(file, static)]
        self.bodies = {}  # (file, name) -> body
        self.lines = {}
        self.includes = defaultdict(set)  # file -> files
        files = []
        for dirpath, _, names in os.walk(csrc):
            for name in sorted(names):
                if name.endswith((".c", ".h")):
                    files.append(os.path.relpath(os.path.join(dirpath, name), csrc).replace(os.sep, "/"))
        self.files = sorted(files)
        for rel in self.files:
            with open(os.path.join(csrc, rel), encoding="utf-8", errors="replace") as f:
                src = f.read()
            for m in re.finditer(r'^\s*#\s*include\s+"([^"]+)"', src, re.M):
                tgt = os.path.normpath(os.path.join(os.path.dirname(rel), m.group(1))).replace(os.sep, "/")
                if not os.path.exists(os.path.join(csrc, tgt)):
                    alt = "include/" + m.group(1)
                    tgt = alt if os.path.exists(os.path.join(csrc, alt)) else tgt
                if tgt != rel:
                    self.includes[rel].add(tgt)
            for name, static, body, line in definitions(blank(src)):
                self.defs[name].append((rel, static))
                self.bodies[(rel, name)] = body
                self.lines[(rel, name)] = line
        self.calls = {}  # (file, name) -> [(file, name)] in first-call order
        for (rel, name), body in self.bodies.items():
            seen, out = set(), []
            for m in re.finditer(r"\b([A-Za-z_]\w*)\s*\(", body):
                callee = m.group(1)
                if callee in KEYWORDS or callee not in self.defs:
                    continue
                for tgt in self.resolve(rel, callee):
                    if tgt not in seen and tgt != (rel, name):
                        seen.add(tgt)
                        out.append(tgt)
            self.calls[(rel, name)] = out

    def resolve(self, rel: str, name: str):
        cands = self.defs[name]
        own = [(f, name) for f, _ in cands if f == rel]
        if own:
            return own
        return [(f, name) for f, st in cands if not st or f.endswith(".h")]

    def folders(self):
        return sorted({folder_of(f) for f in self.files})


def is_climb(src_file: str, dst_file: str) -> bool:
    a, b = folder_of(src_file), folder_of(dst_file)
    return a in RANK and b in RANK and RANK[b] > RANK[a]


def fill_path(g: Graph, root: str):
    """Depth-first walk from root over project functions: (lines, stops, files, climbs)."""
    starts = [(f, root) for f, _ in g.defs.get(root, [])]
    lines, seen, climbs = [], set(), []

    def walk(node, depth):
        seen.add(node)
        lines.append("  " * depth + f"{node[0]}:{node[1]}")
        for tgt in g.calls[node]:
            if is_climb(node[0], tgt[0]):
                climbs.append((node, tgt))
            if tgt not in seen:
                walk(tgt, depth + 1)

    sys.setrecursionlimit(10000)
    for s in starts:
        if s not in seen:
            walk(s, 0)
    return lines, seen, {f for f, _ in seen}, climbs


def sccs(nodes, edges):
    """Tarjan's strongly connected components (recursive; the graphs here are small)."""
    index, low, stack, on, out = {}, {}, [], set(), []
    sys.setrecursionlimit(10000)

    def visit(v):
        index[v] = low[v] = len(index)
        stack.append(v)
        on.add(v)
        for w in sorted(edges.get(v, ())):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            out.append(sorted(comp))

    for v in sorted(nodes):
        if v not in index:
            visit(v)
    return out


def file_call_edges(g: Graph):
    edges = defaultdict(set)
    for (f, _), tgts in g.calls.items():
        for t, _ in tgts:
            if t != f:
                edges[f].add(t)
    return edges


def cross_folder(comps):
    return [c for c in comps if len({folder_of(f) for f in c}) > 1]


def call_cycles(g: Graph):
    return cross_folder(sccs(g.files, file_call_edges(g)))


def include_cycles(g: Graph):
    return cross_folder(sccs(g.files, g.includes))


def folder_cycles(edges):
    fe = defaultdict(set)
    for a, bs in edges.items():
        for b in bs:
            if folder_of(a) != folder_of(b):
                fe[folder_of(a)].add(folder_of(b))
    nodes = set(fe) | {b for bs in fe.values() for b in bs}
    return [c for c in sccs(nodes, fe) if len(c) > 1]


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--csrc", default=os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "csrc"))
    ap.add_argument("--fill", nargs="?", const="xgr_matcher_fill_bitmask", metavar="ROOT",
                    help="print the calls reachable from ROOT (default xgr_matcher_fill_bitmask)")
    ap.add_argument("--file-cycles", action="store_true",
                    help="print cross-folder circles of the file call graph and the include graph")
    ap.add_argument("--quiet", action="store_true", help="summaries only")
    a = ap.parse_args(argv)
    if not a.fill and not a.file_cycles:
        a.fill, a.file_cycles = "xgr_matcher_fill_bitmask", True
    g = Graph(os.path.abspath(a.csrc))
    unknown = [f for f in g.folders() if f not in RANK]
    print(f"[call_graph] {a.csrc}: {len(g.files)} files, {len(g.bodies)} function definitions, "
          f"folders {', '.join(g.folders())}" + (f" (not in the layer order: {', '.join(unknown)})" if unknown else ""))
    rc = 0
    if a.fill:
        lines, stops, files, climbs = fill_path(g, a.fill)
        if not stops:
            print(f"[fill] no definition of {a.fill}")
            return 2
        if not a.quiet:
            print("\n".join(lines))
        for (sf, sn), (tf, tn) in climbs:
            print(f"[fill] climb: {sf}:{sn} -> {tf}:{tn} ({folder_of(sf)} -> {folder_of(tf)})")
        print(f"[fill] {a.fill}: {len(stops)} stops in {len(files)} files, {len(climbs)} climbs")
    if a.file_cycles:
        cc, ic = call_cycles(g), include_cycles(g)
        for c in cc:
            print(f"[cycles] call circle across folders ({len(c)} files): {' '.join(c)}")
        for c in ic:
            print(f"[cycles] include circle across folders ({len(c)} files): {' '.join(c)}")
        fc, fi = folder_cycles(file_call_edges(g)), folder_cycles(g.includes)
        for c in fc:
            print(f"[cycles] folders calling each other: {' '.join(c)}")
        for c in fi:
            print(f"[cycles] folders including each other: {' '.join(c)}")
        print(f"[cycles] cross-folder circles: {len(cc)} between files by calls, {len(fc)} between folders "
              f"by calls, {len(ic)} between files by includes, {len(fi)} between folders by includes")
        rc = 1 if cc or ic or fc or fi else 0
    return rc


if __name__ == "__main__":
    sys.exit(main())
