"""Runs the official JSON-Schema-Test-Suite (draft 2020-12) and JSONSchemaBench through a
schema→matcher pipeline and counts verdicts. Used by the ratchet tests and, as a script,
to compare pipelines:

    python tests/json_schema/suite_runner.py [--engines ours,upstream,llguidance] [--bench]

Verdict rules: a test instance is "accepted" when every text variant (js_engine.text_variants)
is accepted; a *wrong-valid* verdict is any variant accepted for an invalid instance.
A schema that raises UnsupportedSchemaError/InvalidSchemaError is "not compiled"; an
UnsatisfiableSchemaError counts as compiled with every instance rejected. Where the instances
assume format assertion (the suite's optional/format files, and JSONSchemaBench, whose invalid
instances include format violations), a schema our converter compiles with a specification
format it does not assert (regex, idn-*, iri*: a conversion warning) is "not compiled" too;
the benchmark counts those schemas apart (``format_not_asserted``).
"""

from __future__ import annotations

import argparse
import glob
import gzip
import json
import os
import random
import re
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from js_engine import DATA, ENGINE, text_variants  # noqa: E402

SUITE_DIR = os.path.join(DATA, "json-schema-test-suite", "draft2020-12")
BENCH_DIR = os.path.join(DATA, "jsonschemabench")
BENCH_SAMPLE = 100


def suite_files():
    return sorted(os.path.relpath(p, SUITE_DIR) for p in glob.glob(os.path.join(SUITE_DIR, "**", "*.json"),
                                                                   recursive=True))


_NOT_ENFORCED = re.compile(r"format '([^']*)' is not enforced")


class OursPipeline:
    name = "xgrammar2-converter"

    def __init__(self, strict_mode=False, any_whitespace=True, indent=None, separators=None):
        from xgrammar2.json_schema import json_schema_to_ebnf

        self.conv = json_schema_to_ebnf
        self.strict_mode = strict_mode
        self.any_whitespace = any_whitespace
        self.indent = indent
        self.separators = separators
        self.engine = ENGINE

    def variants(self, value):
        return text_variants(value, self.any_whitespace, self.indent, self.separators)

    def compile(self, schema, resolver=None, format_assertion=False):
        """Returns (compiled or None, status) with status in compiled/unsupported/invalid/unsat.
        ``format_assertion``: the tests assume the formats the specification defines are
        asserted (the suite's optional/format files; JSONSchemaBench's labels), so a schema
        where the converter leaves such a format (regex, idn-*, iri*) as an annotation counts
        as unsupported. Unknown formats are annotations even under assertion (the suite's
        optional/format/unknown.json)."""
        from xgrammar2.json_schema import (InvalidSchemaError, UnsatisfiableSchemaError,
                                           UnsupportedSchemaError)
        try:
            r = self.conv(schema, strict_mode=self.strict_mode, any_whitespace=self.any_whitespace,
                          indent=self.indent, separators=self.separators, ref_resolver=resolver)
        except UnsatisfiableSchemaError:
            return None, "unsat"
        except UnsupportedSchemaError as e:
            return None, "unsupported: " + str(e)
        except InvalidSchemaError as e:
            return None, "invalid: " + str(e)
        if format_assertion:
            from xgrammar2.json_schema.formats import REFUSED_FORMATS

            for w in r.warnings:
                m = _NOT_ENFORCED.search(w)
                if m and m.group(1) in REFUSED_FORMATS:
                    return None, "unsupported (format not asserted): " + w
        try:
            return self.engine.compile(r.ebnf), "compiled"
        except Exception as e:  # noqa: BLE001 - an engine rejecting our EBNF is a bug to report
            return None, f"engine-error: {type(e).__name__}: {str(e)[:300]}"

    def accepts(self, compiled, text):
        return self.engine.accepts(compiled, text)


class UpstreamPipeline:
    name = "upstream-xgrammar"

    def __init__(self, strict_mode=False):
        import xgrammar as xgr

        self.xgr = xgr
        self.comp = xgr.GrammarCompiler(xgr.TokenizerInfo(["a"]), cache_enabled=False)
        self.strict_mode = strict_mode

    def compile(self, schema):
        try:
            return self.comp.compile_json_schema(json.dumps(schema), strict_mode=self.strict_mode), "compiled"
        except Exception as e:  # noqa: BLE001
            msg = str(e)
            if "cannot accept any value" in msg:
                return None, "unsat"
            return None, "unsupported: " + msg.splitlines()[0][:200]

    def accepts(self, compiled, text):
        m = self.xgr.GrammarMatcher(compiled, terminate_without_stop_token=True)
        try:
            return m.accept_string(text) and m.is_terminated()
        except Exception:  # noqa: BLE001
            return False


class LLGuidancePipeline:
    name = "llguidance"

    def __init__(self):
        import llguidance

        self.llg = llguidance
        self.tok = llguidance.LLTokenizer(llguidance.TokenizerWrapper(_ByteTokWrap()))

    def compile(self, schema):
        try:
            grm = self.llg.LLMatcher.grammar_from_json_schema(schema, defaults={"whitespace_flexible": True})
            err = self.llg.LLMatcher.validate_grammar(grm, self.tok)
            if err:
                return None, "unsupported: " + str(err)[:200]
            return grm, "compiled"
        except Exception as e:  # noqa: BLE001
            return None, "unsupported: " + str(e)[:200]

    def accepts(self, grm, text):
        m = self.llg.LLMatcher(self.tok, grm, log_level=0)
        if m.is_error():
            return False
        return bool(m.consume_tokens(list(text.encode("utf-8")))) and m.is_accepting()


class _ByteTokWrap:
    """A raw byte vocabulary: token i is byte i, token 256 is EOS."""

    def __init__(self):
        self.tokens = [bytes([i]) for i in range(256)] + [b"<eos>"]
        self.eos_token_id = 256
        self.bos_token_id = None
        self.special_token_ids = [256]

    def __call__(self, s):
        return list(s.encode("utf-8")) if isinstance(s, str) else list(s)


REMOTES_DIR = os.path.join(DATA, "json-schema-test-suite", "remotes")
REMOTE_PREFIX = "http://localhost:1234/"


def suite_resolver(uri):
    """The suite's remote documents: http://localhost:1234/<path> → remotes/<path>."""
    if not uri.startswith(REMOTE_PREFIX):
        return None
    path = os.path.normpath(os.path.join(REMOTES_DIR, uri[len(REMOTE_PREFIX):]))
    if not path.startswith(REMOTES_DIR) or not os.path.isfile(path):
        return None
    with open(path) as f:
        return json.load(f)


def run_suite(pipe, files=None, verbose=False, verdicts=None):
    """Returns {file: {groups, compiled, tests, right, wrong_valid, wrong_invalid}} and a list of
    wrong-valid details; ``verdicts`` (a dict) receives (file, group, test) -> accepted."""
    out = {}
    bad = []
    for rel in files or suite_files():
        with open(os.path.join(SUITE_DIR, rel)) as f:
            groups = json.load(f)
        st = dict(groups=len(groups), compiled=0, tests=0, right=0, wrong_valid=0, wrong_invalid=0)
        for g in groups:
            if isinstance(pipe, OursPipeline):
                compiled, status = pipe.compile(g["schema"], suite_resolver,
                                                format_assertion=rel.startswith("optional/format/"))
            else:
                compiled, status = pipe.compile(g["schema"])
            if status == "compiled" or status == "unsat":
                st["compiled"] += 1
            else:
                if verbose:
                    print(f"  [{rel}] {g['description']}: {status[:160]}")
                continue
            for t in g["tests"]:
                st["tests"] += 1
                if compiled is None:
                    acc = [False]
                else:
                    variants = pipe.variants(t["data"]) if hasattr(pipe, "variants") else text_variants(t["data"])
                    acc = [pipe.accepts(compiled, x) for x in variants]
                if verdicts is not None:
                    verdicts[(rel, g["description"], t["description"])] = all(acc)
                if t["valid"]:
                    ok = all(acc)
                    if not ok:
                        st["wrong_invalid"] += 1
                        if verbose:
                            print(f"  [{rel}] wrong-invalid: {g['description']} / {t['description']}")
                else:
                    ok = not any(acc)
                    if not ok:
                        st["wrong_valid"] += 1
                        bad.append((rel, g["description"], t["description"], json.dumps(g["schema"]),
                                    json.dumps(t["data"])))
                        if verbose:
                            print(f"  [{rel}] WRONG-VALID: {g['description']} / {t['description']}")
                st["right"] += ok
        out[rel] = st
    return out, bad


def totals(res):
    tot = dict(groups=0, compiled=0, tests=0, right=0, wrong_valid=0, wrong_invalid=0)
    for st in res.values():
        for k in tot:
            tot[k] += st[k]
    return tot


def bench_subsets():
    return sorted(os.path.basename(p)[:-len(".jsonl.gz")] for p in glob.glob(os.path.join(BENCH_DIR, "*.jsonl.gz")))


def load_bench(subset, sample=BENCH_SAMPLE):
    with gzip.open(os.path.join(BENCH_DIR, subset + ".jsonl.gz"), "rt") as f:
        rows = [json.loads(line) for line in f]
    if sample is not None and len(rows) > sample:
        rng = random.Random(f"xgrammar2-{subset}")
        idx = sorted(rng.sample(range(len(rows)), sample))
        rows = [rows[i] for i in idx]
    return rows


def run_bench(pipe, subsets=None, sample=BENCH_SAMPLE, verbose=False, time_it=False):
    out = {}
    bad = []
    times = []
    for sub in subsets or bench_subsets():
        rows = load_bench(sub, sample)
        st = dict(schemas=len(rows), compiled=0, valid=0, valid_accepted=0, invalid=0, invalid_rejected=0)
        if isinstance(pipe, OursPipeline):
            # Schemas that compile with a specification format left as an annotation (regex,
            # idn-*, iri*): the benchmark's invalid instances assume those formats are
            # asserted, so these schemas are counted apart, not run.
            st["format_not_asserted"] = 0
        for r in rows:
            t0 = time.perf_counter()
            if isinstance(pipe, OursPipeline):
                compiled, status = pipe.compile(r["schema"], format_assertion=True)
            else:
                compiled, status = pipe.compile(r["schema"])
            times.append(time.perf_counter() - t0)
            if status.startswith("unsupported (format not asserted)"):
                st["format_not_asserted"] += 1
            if status not in ("compiled", "unsat"):
                if verbose:
                    print(f"  [{sub}] {r['id']}: {status[:160]}")
                continue
            st["compiled"] += 1
            for t in r["tests"]:
                try:
                    variants = text_variants(t["data"])
                except (TypeError, ValueError):
                    continue
                acc = [False] if compiled is None else [pipe.accepts(compiled, x) for x in variants]
                if t["valid"]:
                    st["valid"] += 1
                    st["valid_accepted"] += all(acc)
                else:
                    st["invalid"] += 1
                    st["invalid_rejected"] += not any(acc)
                    if any(acc):
                        bad.append((sub, r["id"], json.dumps(t["data"])[:200]))
        out[sub] = st
    if time_it:
        return out, bad, times
    return out, bad


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--engines", default="ours,upstream,llguidance")
    ap.add_argument("--bench", action="store_true")
    ap.add_argument("--full", action="store_true", help="all JSONSchemaBench schemas (slow)")
    ap.add_argument("-v", action="store_true")
    a = ap.parse_args()
    pipes = []
    for e in a.engines.split(","):
        if e == "ours":
            pipes.append(OursPipeline())
        elif e == "upstream":
            pipes.append(UpstreamPipeline())
        elif e == "llguidance":
            try:
                pipes.append(LLGuidancePipeline())
            except Exception as ex:  # noqa: BLE001
                print("llguidance unavailable:", ex)
    print(f"matching engine for our converter: {ENGINE.name}"
          + (f" (fallback: {ENGINE.fallback_reason})" if ENGINE.fallback_reason else ""))
    for p in pipes:
        t0 = time.time()
        res, bad = run_suite(p, verbose=a.v)
        tot = totals(res)
        print(f"{p.name:22s} suite: groups compiled {tot['compiled']}/{tot['groups']} "
              f"({100 * tot['compiled'] / tot['groups']:.1f}%), tests run {tot['tests']}, right {tot['right']}, "
              f"wrong-valid {tot['wrong_valid']}, wrong-invalid {tot['wrong_invalid']}  [{time.time() - t0:.1f}s]")
        if a.bench:
            t0 = time.time()
            bres, bbad = run_bench(p, sample=None if a.full else BENCH_SAMPLE, verbose=a.v)
            c = sum(s["compiled"] for s in bres.values())
            n = sum(s["schemas"] for s in bres.values())
            va = sum(s["valid_accepted"] for s in bres.values())
            v = sum(s["valid"] for s in bres.values())
            ir_ = sum(s["invalid_rejected"] for s in bres.values())
            iv = sum(s["invalid"] for s in bres.values())
            fna = sum(s.get("format_not_asserted", 0) for s in bres.values())
            print(f"{p.name:22s} bench: compiled {c}/{n} ({100 * c / max(n, 1):.1f}%), valid accepted {va}/{v}, "
                  f"invalid rejected {ir_}/{iv}" + (f", format not asserted {fna}" if fna else "")
                  + f"  [{time.time() - t0:.1f}s]")


if __name__ == "__main__":
    main()
