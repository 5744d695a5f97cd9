"""Summarise an upstream-suite run (pytest junit XML) for the compatibility gate.

    python tests/compat/summarize.py --ours OURS.xml --reference REF.xml --out docs/compat.md
    python tests/compat/summarize.py --count OURS.xml                  # prints the passed count
    python tests/compat/summarize.py --ratchet tests/compat/ratchet.json OURS.xml
    python tests/compat/summarize.py --ratchet tests/compat/ratchet.json --update-ratchet OURS.xml

Every non-passing test of our run is put under one reason: *intended difference*, *upstream
private API*, *tokenizer not available*, *skipped by the test itself* (an environment skip
that the reference run takes too) or *missing feature / bug* (the default). The first two come
only from explicit rules in ``reasons.toml`` (test-id / error patterns, each with its
justification); everything that matches no rule is a missing feature or a bug.
"""

from __future__ import annotations

import argparse
import collections
import datetime
import json
import re
import sys
import tomllib
import xml.etree.ElementTree as ET
from dataclasses import dataclass, field
from pathlib import Path

HERE = Path(__file__).resolve().parent

PASSED, FAILED, ERROR, SKIPPED = "passed", "failed", "error", "skipped"
TOKENIZER_SKIP = re.compile(r"(tokenizer|model config|hub file) not available: (\S+)")


@dataclass
class Case:
    id: str
    file: str
    outcome: str
    message: str = ""  # first line of the error / skip reason
    text: str = ""
    collection: bool = False


@dataclass
class Run:
    cases: dict = field(default_factory=dict)  # id -> Case
    meta: dict = field(default_factory=dict)
    path: str = ""

    def by_file(self):
        out = collections.defaultdict(list)
        for c in self.cases.values():
            out[c.file].append(c)
        return out

    def count(self, outcome, file=None):
        return sum(
            1 for c in self.cases.values()
            if c.outcome == outcome and not c.collection and (file is None or c.file == file)
        )

    def collected(self, file=None):
        return sum(1 for c in self.cases.values() if not c.collection and (file is None or c.file == file))


_RANK = {PASSED: 0, SKIPPED: 1, FAILED: 2, ERROR: 3}


def _first_error_line(message: str, text: str) -> str:
    line = _first_error_line_raw(message, text)
    return re.sub(r" \((/|[A-Za-z]:\\)[^()]*\.py\)$", "", line)  # "cannot import name ... (/path/x.py)"


def _first_error_line_raw(message: str, text: str) -> str:
    message = (message or "").strip()
    m = re.match(r'failed on (setup|teardown) with "(.*)"$', message, re.S)
    if m:
        message = m.group(2)
    if message and message not in ("collection failure",) and not message.startswith("Failed:"):
        return message.splitlines()[0].strip()
    for line in (text or "").splitlines():
        if line.startswith("E   "):
            line = line[4:].strip()
            if line:
                return line
    if message:
        return message.splitlines()[0].strip()
    for line in (text or "").splitlines():
        if line.strip():
            return line.strip()
    return ""


def parse_junit(path: Path) -> Run:
    root = ET.parse(path).getroot()
    run = Run(path=str(path))
    suites = [root] if root.tag == "testsuite" else root.findall("testsuite")
    for suite in suites:
        run.meta = dict(suite.attrib)
        for tc in suite.iter("testcase"):
            classname = tc.get("classname", "")
            name = tc.get("name", "")
            fpath = tc.get("file") or ""
            collection = False
            if not classname:  # collection error: name is the module ("python.test_x")
                collection = True
                mod = name.replace("/", ".")
                if mod.endswith(".py"):
                    mod = mod[:-3]
                fname = mod.split(".")[-1] + ".py"
                cid = f"{fname}::(collection)"
            else:
                parts = classname.split(".")
                # "python.test_x" or "python.test_x.TestClass"
                idx = next((i for i, p in enumerate(parts) if p.startswith("test_")), len(parts) - 1)
                fname = Path(fpath).name if fpath else parts[idx] + ".py"
                cls = parts[idx + 1:]
                cid = "::".join([fname, *cls, name])
            outcome, message, text = PASSED, "", ""
            for child in tc:
                if child.tag in ("failure", "error", "skipped"):
                    kind = {"failure": FAILED, "error": ERROR, "skipped": SKIPPED}[child.tag]
                    msg = _first_error_line(child.get("message", ""), child.text or "")
                    if kind == SKIPPED:
                        msg = re.sub(r"^Skipped: ", "", child.get("message", "") or (child.text or ""))
                        msg = msg.strip().splitlines()[0] if msg.strip() else ""
                    if _RANK[kind] > _RANK[outcome]:
                        outcome, message, text = kind, msg, child.text or ""
            prev = run.cases.get(cid)
            if prev is not None and _RANK[prev.outcome] >= _RANK[outcome]:
                continue  # keep the worse record (e.g. a failure plus a teardown error)
            run.cases[cid] = Case(cid, fname, outcome, message, text, collection)
    return run


# --------------------------------------------------------------------------------- rules


@dataclass
class Rule:
    reason: str
    why: str
    test: re.Pattern | None
    error: re.Pattern | None
    group: str | None
    message: re.Pattern | None = None

    def matches(self, case: Case) -> bool:
        if self.test is not None and not self.test.search(case.id):
            return False
        if self.error is not None and not (
            self.error.search(case.message) or self.error.search(case.text)
        ):
            return False
        if self.message is not None and not self.message.search(case.message):
            return False
        return True


REASON_TITLES = {
    "intended": "Intended difference",
    "private": "Upstream private API",
    "tokenizer": "Tokenizer not available",
    "env_skip": "Skipped by the test itself",
    "missing": "Missing feature / bug",
}


def load_rules(path: Path) -> list[Rule]:
    with open(path, "rb") as f:
        data = tomllib.load(f)
    rules = []
    for r in data.get("rule", []):
        if r["reason"] not in ("intended", "private", "missing"):
            raise SystemExit(f"{path}: unknown reason {r['reason']!r}")
        if not r.get("why"):
            raise SystemExit(f"{path}: a rule without 'why': {r}")
        if not (r.get("test") or r.get("error") or r.get("message")):
            raise SystemExit(f"{path}: a rule needs 'test', 'error' or 'message': {r}")
        rules.append(Rule(
            r["reason"], r["why"],
            re.compile(r["test"]) if r.get("test") else None,
            re.compile(r["error"], re.M) if r.get("error") else None,
            r.get("group"),
            re.compile(r["message"]) if r.get("message") else None,
        ))
    return rules


_MISSING_ATTR = re.compile(r"(?:module|type object) '([\w.]+)' has no attribute '(\w+)'")
_OBJ_ATTR = re.compile(r"'(\w+)' object has no attribute '(\w+)'")
_IMPORT_NAME = re.compile(r"cannot import name '(\w+)' from '([\w.]+)'")
_NO_MODULE = re.compile(r"No module named '([\w.]+)'")
_UNEXPECTED_KW = re.compile(r"(\w+)\(\) got an unexpected keyword argument '(\w+)'")


def _normalize(text: str) -> str:
    """A message without the parts that vary between tests (paths, positions, numbers)."""
    text = re.sub(r"^(parsing EBNF|accepting a string|compiling[^:]*): ", "", text)
    text = re.sub(r"^\$[^ ]*: ", "", text)  # structural-tag JSON path
    text = re.sub(r"(at )?line \d+, column \d+:? ?", "", text)
    text = re.sub(r"EBNF (syntax |lexer |parser )?error ?:? ?", "", text)
    text = re.sub(r"\bregex (syntax )?error (at column \d+: )?", "regex: ", text)
    text = re.sub(r"(#|\$defs)/[\w/]+", "#/...", text)
    text = re.sub(r"\b\d+\b", "N", text)
    text = re.split(r";| \(|: (?=[a-z].{40})", text)[0].strip()
    return text[:110]


def missing_group(case: Case) -> str:
    msg = case.message
    for pat, fmt in (
        (_IMPORT_NAME, lambda m: f"missing name `{m.group(2).replace('xgrammar2', 'xgrammar')}.{m.group(1)}`"),
        (_NO_MODULE, lambda m: f"missing module `{m.group(1)}`"),
        (_MISSING_ATTR, lambda m: f"missing attribute `{m.group(1).replace('xgrammar2', 'xgrammar')}.{m.group(2)}`"),
        (_OBJ_ATTR, lambda m: f"missing attribute `{m.group(1)}.{m.group(2)}`"),
        (_UNEXPECTED_KW, lambda m: f"unsupported keyword `{m.group(1)}({m.group(2)}=...)`"),
    ):
        m = pat.search(msg)
        if m:
            return fmt(m)
    func = case.id.split("[")[0].split("::")[-1]
    if msg.startswith("AssertionError: Regex pattern did not match"):
        return "error message differs from upstream's (the exception class matches)"
    m = re.match(r"([\w.]+(?:Error|Exception|Exit|Interrupt|Warning|Failed))\b", msg) or re.match(
        r"([A-Za-z_]\w*(?:\.[A-Za-z_]\w*)+):\s", msg)  # e.g. pkg.module._PrivateExc: ...
    if m:
        exc = m.group(1)
        if exc == "Failed" or msg.startswith("Failed: DID NOT RAISE"):
            return "expected exception not raised (`DID NOT RAISE`)"
        if exc == "AssertionError":
            return f"wrong result in `{func}`"
        if exc.endswith("Timeout") or "Timeout" in msg[:80]:
            return "timeout"
        return f"`{exc.split('.')[-1]}`: {_normalize(msg[len(exc):].lstrip(': '))}"
    if msg.startswith("assert") or msg.startswith("AssertionError"):
        return f"wrong result in `{func}`"
    if msg.startswith("Failed: Timeout"):
        return "timeout (pytest --timeout)"
    if msg.startswith("Failed: DID NOT RAISE"):
        return "expected exception not raised (`DID NOT RAISE`)"
    if msg.startswith("Failed:"):
        return "pytest.fail / " + msg.split(":", 1)[1].strip()[:60]
    return "other"


def classify(case: Case, rules: list[Rule]) -> tuple[str, str, str]:
    """(reason, group, why) for a non-passing case."""
    if case.outcome == SKIPPED:
        m = TOKENIZER_SKIP.search(case.message)
        if m:
            return "tokenizer", f"`{m.group(2)}` ({m.group(1)})", ""
        return "env_skip", case.message or "(no reason)", ""
    for rule in rules:
        if rule.matches(case):
            group = rule.group or (missing_group(case) if rule.reason == "missing" else rule.why)
            return rule.reason, group, rule.why
    return "missing", missing_group(case), ""


# ------------------------------------------------------------------------------- markdown


def _md(s: str, limit: int = 240, code: bool = False) -> str:
    s = s.replace("|", "\\|").replace("\n", " ")
    if not code:
        s = s.replace("`", "'")
    return s if len(s) <= limit else s[: limit - 1] + "…"


def missing_imports(path: Path) -> list[str]:
    """`xgrammar[.X]` names a test file imports that xgrammar2 does not provide."""
    import ast
    import importlib

    if not path.is_file():
        return []
    tree = ast.parse(path.read_text(encoding="utf-8"))
    out = []

    def target(mod: str) -> str:
        return "xgrammar2" + mod[len("xgrammar"):]

    def have_module(mod: str) -> bool:
        try:
            importlib.import_module(target(mod))
            return True
        except ImportError:
            return False

    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module and (
            node.module == "xgrammar" or node.module.startswith("xgrammar.")
        ):
            if not have_module(node.module):
                out.append(node.module)
                continue
            mod = importlib.import_module(target(node.module))
            for alias in node.names:
                if not hasattr(mod, alias.name) and not have_module(f"{node.module}.{alias.name}"):
                    out.append(f"{node.module}.{alias.name}")
        elif isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name.startswith("xgrammar.") and not have_module(alias.name):
                    out.append(alias.name)
    return sorted(dict.fromkeys(out))


def write_markdown(ours: Run, ref: Run | None, rules: list[Rule], out: Path, meta: dict,
                   suite: Path | None = None) -> dict:
    files = sorted(set(ours.by_file()) | set(ref.by_file() if ref else []))
    lines = []
    w = lines.append
    w("# Compatibility with upstream xgrammar's own test suite")
    w("")
    w("Generated by `tests/compat/summarize.py` from two runs of `tests/compat/run_upstream_suite.sh`:")
    w("upstream xgrammar 0.2.8's `tests/python` (from its PyPI sdist, sha256-pinned, not stored in this")
    w("repository) run against xgrammar2 through an `xgrammar -> xgrammar2` import alias, and the same")
    w("harness run against the real xgrammar 0.2.8 (`--reference`). Hub tokenizers come from")
    w("`../shared/data/tokenizers` (`tests/compat/hub_plugin.py`); a name with no local copy skips its test")
    w("in both runs. Failure reasons come from `tests/compat/reasons.toml`; anything no rule explains is")
    w("listed as a missing feature or bug. The pass count is ratcheted (`tests/compat/ratchet.json`).")
    w("")
    for k, v in meta.items():
        w(f"- {k}: {v}")
    w("")
    w("## Totals")
    w("")
    w("| run | collected | passed | failed | errors | skipped | files failing at import |")
    w("| --- | ---: | ---: | ---: | ---: | ---: | ---: |")
    for label, run in (("xgrammar2", ours), ("real xgrammar 0.2.8", ref)):
        if run is None:
            continue
        ncoll = sum(1 for c in run.cases.values() if c.collection)
        w(f"| {label} | {run.collected()} | {run.count(PASSED)} | {run.count(FAILED)} | "
          f"{run.count(ERROR)} | {run.count(SKIPPED)} | {ncoll} |")
    w("")
    w("## Per file")
    w("")
    w("`collected` is what our run collected (0 when the file stops at import); `ref collected` /")
    w("`ref passed` are the reference run's numbers.")
    w("")
    w("| file | collected | passed | failed | errors | skipped | ref collected | ref passed |")
    w("| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: |")
    for f in files:
        imp = any(c.collection for c in ours.by_file().get(f, []))
        name = f"`{f}`" + (" (import error)" if imp else "")
        w(f"| {name} | {ours.collected(f)} | {ours.count(PASSED, f)} | {ours.count(FAILED, f)} | "
          f"{ours.count(ERROR, f)} | {ours.count(SKIPPED, f)} | "
          f"{ref.collected(f) if ref else ''} | {ref.count(PASSED, f) if ref else ''} |")
    w(f"| **total** | {ours.collected()} | {ours.count(PASSED)} | {ours.count(FAILED)} | "
      f"{ours.count(ERROR)} | {ours.count(SKIPPED)} | {ref.collected() if ref else ''} | "
      f"{ref.count(PASSED) if ref else ''} |")
    w("")

    # classification
    buckets: dict[str, dict[str, list]] = {k: collections.defaultdict(list) for k in REASON_TITLES}
    whys: dict[tuple, str] = {}
    for case in sorted(ours.cases.values(), key=lambda c: c.id):
        if case.outcome == PASSED:
            continue
        reason, group, why = classify(case, rules)
        buckets[reason][group].append(case)
        if why:
            whys[(reason, group)] = why

    def ref_outcome(case: Case) -> str:
        if ref is None:
            return ""
        if case.collection:
            n = ref.collected(case.file)
            p = ref.count(PASSED, case.file)
            return f"blocks {n} tests (ref passes {p})"
        rc = ref.cases.get(case.id)
        return rc.outcome if rc else "not collected"

    w("## Non-passing tests by reason")
    w("")
    w("| reason | tests | of which the reference passes |")
    w("| --- | ---: | ---: |")
    summary = {}
    for reason, title in REASON_TITLES.items():
        cases = [c for g in buckets[reason].values() for c in g]
        refp = sum(1 for c in cases if ref and (rc := ref.cases.get(c.id)) and rc.outcome == PASSED)
        blocked = sum(ref.collected(c.file) for c in cases if c.collection and ref)
        extra = f" (+{blocked} tests behind {sum(1 for c in cases if c.collection)} import errors)" if blocked else ""
        w(f"| {title} | {len(cases)}{extra} | {refp} |")
        summary[reason] = len(cases)
    w("")

    blocked = sorted((c for c in ours.cases.values() if c.collection), key=lambda c: c.file)
    if blocked:
        w("## Files that stop at import")
        w("")
        w("A module-level import of a name xgrammar2 lacks stops the whole file, so none of its tests run.")
        w("`all missing imports` lists every `xgrammar` name the file imports that xgrammar2 does not have")
        w("(static check of the file's import statements), i.e. what has to exist before it runs.")
        w("")
        w("| file | ref collected | ref passed | error | all missing imports |")
        w("| --- | ---: | ---: | --- | --- |")
        for c in blocked:
            names = missing_imports(suite / c.file) if suite else []
            w(f"| `{c.file}` | {ref.collected(c.file) if ref else ''} | {ref.count(PASSED, c.file) if ref else ''} | "
              f"{_md(c.message, 160)} | {', '.join(f'`{n}`' for n in names)} |")
        w("")

    for reason, title in REASON_TITLES.items():
        groups = buckets[reason]
        total = sum(len(v) for v in groups.values())
        w(f"### {title} ({total})")
        w("")
        if reason == "intended":
            w("Behaviour xgrammar2 does differently on purpose; each rule in `reasons.toml` says why.")
        elif reason == "private":
            w("Tests that exercise upstream internals (`xgrammar.testing._*` helpers, C++ functors) or")
            w("compare upstream's exact printed EBNF / converter text, not behaviour.")
        elif reason == "tokenizer":
            w("Hub tokenizers with no local copy in `../shared/data/tokenizers` (skipped in both runs).")
        elif reason == "env_skip":
            w("Skips the upstream tests take themselves (no GPU, optional packages, ...).")
        else:
            w("Everything else: a missing name or a behaviour difference. Grouped by the missing name or")
            w("by the exception; `ref` is the reference run's outcome for the same test.")
        w("")
        if not groups:
            continue
        w("| group | tests | ref passes | per file |")
        w("| --- | ---: | ---: | --- |")
        for group, cases in sorted(groups.items(), key=lambda kv: (-len(kv[1]), kv[0])):
            per_file = collections.Counter(c.file for c in cases)
            pf = ", ".join(f"{f.removeprefix('test_').removesuffix('.py')} {n}" for f, n in per_file.most_common())
            refp = sum(1 for c in cases if ref and (rc := ref.cases.get(c.id)) and rc.outcome == PASSED)
            w(f"| {_md(group, 160, code=True)} | {len(cases)} | {refp} | {pf} |")
        w("")
        if reason in ("tokenizer", "env_skip"):
            continue
        for group, cases in sorted(groups.items(), key=lambda kv: (-len(kv[1]), kv[0])):
            why = whys.get((reason, group))
            w(f"<details><summary>{_md(group, 160, code=True)} — {len(cases)}</summary>")
            w("")
            if why:
                w(f"Why: {why}")
                w("")
            w("| test | ref | first line of the error |")
            w("| --- | --- | --- |")
            for c in cases:
                w(f"| `{_md(c.id, 200)}` | {ref_outcome(c)} | {_md(c.message)} |")
            w("")
            w("</details>")
            w("")
    if ref is not None:
        both = [c for c in ours.cases.values() if c.outcome in (FAILED, ERROR) and not c.collection
                and (rc := ref.cases.get(c.id)) and rc.outcome in (FAILED, ERROR)]
        w("## Failing in the reference run too")
        w("")
        if both:
            w(f"{len(both)} of our failures also fail with the real xgrammar under this harness:")
        else:
            w("None of our failures fails with the real xgrammar too (each one is a difference of xgrammar2,")
            w("not of the harness).")
        w("")
        for c in sorted(both, key=lambda c: c.id):
            w(f"- `{_md(c.id, 200)}`: ours: {_md(c.message, 160)}; reference: {_md(ref.cases[c.id].message, 160)}")
        w("")
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return summary


# --------------------------------------------------------------------------------- ratchet


def check_ratchet(ratchet_path: Path, run: Run, update: bool) -> int:
    data = json.loads(ratchet_path.read_text())
    floor = int(data["min_passed"])
    passed = run.count(PASSED)
    print(f"[compat] xgrammar2 passes {passed} of {run.collected()} collected upstream tests "
          f"(ratchet: {floor})")
    if update:
        if passed != floor:
            data["min_passed"] = passed
            ratchet_path.write_text(json.dumps(data, indent=2) + "\n")
            print(f"[compat] ratchet set to {passed}")
        return 0
    if passed < floor:
        print(f"[compat] FAIL: pass count {passed} fell below the ratchet {floor} "
              f"({floor - passed} fewer); see the failures above or run with --docs", file=sys.stderr)
        return 1
    if passed > floor:
        print(f"[compat] the pass count rose by {passed - floor}: raise the ratchet with "
              f"`python tests/compat/summarize.py --ratchet tests/compat/ratchet.json --update-ratchet "
              f"{run.path}` (or set min_passed to {passed} in tests/compat/ratchet.json)")
    return 0


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("junit", nargs="?", type=Path, help="junit XML of our run (for --count / --ratchet)")
    ap.add_argument("--ours", type=Path)
    ap.add_argument("--reference", type=Path)
    ap.add_argument("--out", type=Path)
    ap.add_argument("--rules", type=Path, default=HERE / "reasons.toml")
    ap.add_argument("--count", action="store_true")
    ap.add_argument("--ratchet", type=Path)
    ap.add_argument("--update-ratchet", action="store_true")
    ap.add_argument("--suite", type=Path, help="upstream tests/python folder (lists missing imports)")
    ap.add_argument("--meta", action="append", default=[], help="KEY=VALUE line for the doc header")
    args = ap.parse_args(argv)

    if args.count:
        print(parse_junit(args.junit or args.ours).count(PASSED))
        return 0
    if args.ratchet:
        return check_ratchet(args.ratchet, parse_junit(args.junit or args.ours), args.update_ratchet)
    if not (args.ours and args.out):
        ap.error("--ours and --out are needed to write the report")
    ours = parse_junit(args.ours)
    ref = parse_junit(args.reference) if args.reference and args.reference.is_file() else None
    meta = {}
    for kv in args.meta:
        k, _, v = kv.partition("=")
        meta[k] = v
    meta.setdefault("generated", datetime.date.today().isoformat())
    summary = write_markdown(ours, ref, load_rules(args.rules), args.out, meta, args.suite)
    print(f"[compat] wrote {args.out}: " + ", ".join(f"{REASON_TITLES[k]} {v}" for k, v in summary.items()))
    return 0


if __name__ == "__main__":
    sys.exit(main())
