"""BFCL (Berkeley Function Calling Leaderboard) helpers for the end-to-end evaluation: loading
the test files, turning BFCL function definitions into OpenAI tools, parsing hermes-format tool
calls, and an AST checker that follows BFCL's published rules for the Python categories
``simple``, ``multiple`` and ``parallel`` (written from those rules, not copied).

No vLLM or network needed; used by ``e2e/bfcl_eval.py`` and unit-tested by
``tests/python/test_bfcl_ast.py``.

Ground-truth format (``possible_answer/BFCL_v4_<category>.json``, one JSON object per line)::

    {"id": "simple_python_0", "ground_truth": [{"calculate_triangle_area":
        {"base": [10], "height": [5], "unit": ["units", ""]}}]}

One dict per expected call (``parallel`` has several, in any order); each argument lists its
allowed values, ``""`` in the list meaning "may be omitted".

BFCL's AST rules, as implemented here (``check``):

* the number of calls must equal the number of expected calls (``simple`` / ``multiple``:
  exactly one); ``parallel`` matches calls to expected calls order-free (a one-to-one
  assignment; BFCL assigns greedily in ground-truth order, which can miss one);
* the function name must match (BFCL compares after replacing ``.`` by ``_`` for OpenAI-style
  models; tools are sent with that name here, so both sides are compared in that form);
* every ``required`` parameter must be present; every given parameter must be declared by the
  function and appear in the ground truth; a ground-truth parameter may be left out only when
  its allowed values contain ``""``;
* types follow the declared BFCL type (``string``, ``integer``, ``float``, ``boolean``,
  ``array``, ``tuple``, ``dict``, ``any`` -> str): an integer is accepted for a ``float``
  parameter, ``bool`` is never an integer, array/tuple items are type-checked one level deep;
  a value whose type is that of the ground truth instead (a "variable") is accepted and compared
  as is;
* values must be among the allowed values; strings are compared after BFCL's normalisation
  (spaces and ``,./-_*^`` removed, lower case, ``'`` -> ``"``), also inside lists and dicts;
  dicts are checked key by key against each allowed dict; lists of dicts element-wise.
"""

from __future__ import annotations

import json
import os
import re
from pathlib import Path
from typing import Any, Dict, List, Optional, Sequence, Tuple

REPO = Path(__file__).resolve().parent.parent
SHARED = Path(os.environ.get("XGR2_SHARED", REPO.parent / "shared"))
BFCL_DIR = SHARED / "data" / "bfcl"

# Evaluation category -> BFCL v4 file stem.
CATEGORY_FILES = {
    "simple": "BFCL_v4_simple_python",
    "multiple": "BFCL_v4_multiple",
    "parallel": "BFCL_v4_parallel",
}

# ---------------------------------------------------------------------------------------------
# Data and tools
# ---------------------------------------------------------------------------------------------


def _read_jsonl(path: Path) -> List[dict]:
    with open(path, encoding="utf-8") as f:
        return [json.loads(line) for line in f if line.strip()]


def load_category(category: str, data_dir: Path = BFCL_DIR) -> List[dict]:
    """Test cases of one category, each ``{id, category, messages, functions, ground_truth}``."""
    stem = CATEGORY_FILES[category]
    tests = _read_jsonl(Path(data_dir) / f"{stem}.json")
    answers = {a["id"]: a["ground_truth"] for a in _read_jsonl(Path(data_dir) / "possible_answer" / f"{stem}.json")}
    out = []
    for t in tests:
        if t["id"] not in answers:
            continue
        out.append({
            "id": t["id"], "category": category,
            "messages": t["question"][0],  # single-turn categories: one turn
            "functions": t["function"], "ground_truth": answers[t["id"]],
        })
    return out


def sample(cases: Sequence[dict], limit: Optional[int]) -> List[dict]:
    """``limit`` cases spread evenly over the file (deterministic), all when ``limit`` is None."""
    n = len(cases)
    if limit is None or limit >= n:
        return list(cases)
    return [cases[(i * n) // limit] for i in range(limit)]


# BFCL writes Python type names; JSON Schema equivalents (None: no type, any value). Same map
# as BFCL's OpenAI handler, except `any`, which BFCL sends as "string".
BFCL_TO_JSON_TYPE = {"dict": "object", "float": "number", "tuple": "array", "any": None}


def to_json_schema(s: Any) -> Any:
    """A BFCL parameter schema as standard JSON Schema (the non-standard ``optional`` dropped)."""
    if not isinstance(s, dict):
        return s
    out = {}
    for k, v in s.items():
        if k == "optional":
            continue
        if k == "type":
            if isinstance(v, str):
                v = BFCL_TO_JSON_TYPE.get(v, v)
                if v is None:
                    continue
        elif k == "properties" and isinstance(v, dict):
            v = {name: to_json_schema(sub) for name, sub in v.items()}
        elif k in ("items", "additionalProperties") and isinstance(v, dict):
            v = to_json_schema(v)
        elif k in ("anyOf", "oneOf", "allOf") and isinstance(v, list):
            v = [to_json_schema(sub) for sub in v]
        out[k] = v
    return out


def oai_name(name: str) -> str:
    """The name a function is sent under (OpenAI names: ``^[a-zA-Z0-9_-]{1,64}$``; BFCL's
    OpenAI handler replaces ``.`` by ``_``)."""
    return re.sub(r"\.", "_", name)


def to_tools(functions: Sequence[dict]) -> List[dict]:
    """OpenAI ``tools`` for a test's BFCL functions (no ``strict`` key: the servers pin argument
    schemas with ``--tool-strict-level parameter``, and the prompt stays identical across
    configurations)."""
    return [
        {"type": "function", "function": {
            "name": oai_name(fn["name"]), "description": fn.get("description", ""),
            "parameters": to_json_schema(fn["parameters"])}}
        for fn in functions
    ]


def named_function(ground_truth: Sequence[dict]) -> Optional[str]:
    """The one function every expected call names (for ``tool_choice`` = that function), or None."""
    names = {next(iter(call)) for call in ground_truth}
    return next(iter(names)) if len(names) == 1 else None


# ---------------------------------------------------------------------------------------------
# Hermes tool-call text (the format the Qwen2.5 chat template asks for; vLLM's `hermes` parser)
# ---------------------------------------------------------------------------------------------

_TOOL_CALL_RE = re.compile(r"<tool_call>(.*?)</tool_call>|<tool_call>(.*)", re.DOTALL)


def parse_hermes(text: str) -> List[Tuple[str, str]]:
    """``[(name, arguments_json)]`` from hermes-format text, as vLLM's hermes parser extracts
    them: every ``<tool_call>{"name": ..., "arguments": ...}</tool_call>`` (the last one may be
    unclosed); if any block is not such a JSON object, no call at all (the text is content)."""
    calls = []
    for closed, unclosed in _TOOL_CALL_RE.findall(text or ""):
        body = (closed or unclosed).strip()
        try:
            obj = json.loads(body)
            name = obj["name"]
            args = obj.get("arguments", {})
        except (ValueError, KeyError, TypeError, AttributeError):
            return []
        if not isinstance(name, str):
            return []
        calls.append((name, json.dumps(args, ensure_ascii=False)))
    return calls


# ---------------------------------------------------------------------------------------------
# Schema validity
# ---------------------------------------------------------------------------------------------


def schema_valid(calls: Sequence[Tuple[str, str]], tools: Sequence[dict],
                 only: Optional[str] = None) -> Tuple[bool, str]:
    """(ok, reason): at least one call, each naming an offered tool (``only``: that tool) whose
    arguments are a JSON object valid against the tool's parameters schema (``jsonschema``)."""
    import jsonschema

    if not calls:
        return False, "no tool call"
    by_name = {t["function"]["name"]: t["function"]["parameters"] for t in tools}
    for name, args in calls:
        if name not in by_name or (only is not None and name != only):
            return False, f"unexpected function {name!r}"
        try:
            obj = json.loads(args)
        except ValueError as e:
            return False, f"arguments of {name} are not JSON: {e}"
        if not isinstance(obj, dict):
            return False, f"arguments of {name} are not an object"
        try:
            jsonschema.validate(obj, by_name[name])
        except jsonschema.ValidationError as e:
            return False, f"arguments of {name}: {e.message}"
    return True, ""


# ---------------------------------------------------------------------------------------------
# AST checker
# ---------------------------------------------------------------------------------------------

PY_TYPES = {
    "string": str, "integer": int, "float": float, "boolean": bool,
    "array": list, "tuple": list, "dict": dict, "any": str,
}
NESTED_TYPES = ("array", "tuple")


class Fail(Exception):
    """A failed check; ``kind`` is a short error class (BFCL's error_type style)."""

    def __init__(self, kind: str, msg: str) -> None:
        super().__init__(msg)
        self.kind = kind


def normalize(s: str) -> str:
    """BFCL's string standardisation."""
    return re.sub(r"[ ,./\-_*^]", "", s).lower().replace("'", '"')


def _norm(v: Any) -> Any:
    return normalize(v) if isinstance(v, str) else v


def _answer_type(allowed: Sequence[Any]) -> Optional[type]:
    """Type of the first allowed value that is not the 'omitted' marker ``""``."""
    for a in allowed:
        if a != "":
            return type(a)
    return None


def _check_type(param: str, value: Any, allowed: Sequence[Any], declared: str,
                expected: type, nested: Optional[type]) -> bool:
    """Raises Fail on a type error; returns True when the value is taken as a variable (its type
    is the ground truth's, not the declared one)."""
    gt_type = _answer_type(allowed)
    is_variable = gt_type is not None and gt_type is not expected
    if type(value) is expected:
        if nested is None:
            return is_variable
        for option in allowed:
            if not isinstance(option, list):
                return is_variable  # "" or a variable name: nothing to check the items against
            try:
                for item in value:
                    _check_type(param, item, option, nested.__name__, nested, None)
            except Fail:
                continue
            return is_variable
        raise Fail("type_error:nested",
                   f"items of {param!r} are not all {nested.__name__}: {value!r}")
    if gt_type is not None and type(value) is gt_type:
        return True
    raise Fail("type_error:simple",
               f"{param!r} should be {declared}, got {type(value).__name__}: {value!r}")


def _check_dict(param: str, value: dict, allowed: Sequence[Any]) -> None:
    last = Fail("value_error:dict", f"{param!r}: no allowed dict")
    for option in allowed:
        if option == "" or not isinstance(option, dict):
            continue
        try:
            for k, v in value.items():
                if k not in option:
                    raise Fail("value_error:dict_key", f"{param!r}: unexpected key {k!r}")
                if _norm(v) not in [_norm(a) for a in option[k]]:
                    raise Fail("value_error:dict_value", f"{param!r}[{k!r}] = {v!r} not in {option[k]!r}")
            for k, vals in option.items():
                if k not in value and "" not in vals:
                    raise Fail("value_error:dict_key", f"{param!r}: missing key {k!r}")
        except Fail as e:
            last = e
            continue
        return
    raise last


def _check_list_of_dicts(param: str, value: list, allowed: Sequence[Any]) -> None:
    last = Fail("value_error:list_dict", f"{param!r}: no allowed list of dicts")
    for option in allowed:
        if not isinstance(option, list):
            continue
        if len(option) != len(value):
            last = Fail("value_error:list_dict_count", f"{param!r}: wrong number of dicts")
            continue
        try:
            for item, want in zip(value, option):
                if not isinstance(item, dict):
                    raise Fail("type_error:nested", f"{param!r}: {item!r} is not a dict")
                _check_dict(param, item, [want])
        except Fail as e:
            last = e
            continue
        return
    raise last


def check_call(func: dict, name: str, args: dict, expected: dict) -> None:
    """Checks one call ``name(**args)`` against one expected call ``{func_name: {param: allowed}}``
    for the BFCL function definition ``func``; raises Fail."""
    want_name, allowed_by_param = next(iter(expected.items()))
    if oai_name(name) != oai_name(want_name):
        raise Fail("wrong_func_name", f"called {name!r}, expected {want_name!r}")
    if not isinstance(args, dict):
        raise Fail("type_error:arguments", f"arguments are not an object: {args!r}")
    declared = func["parameters"].get("properties", {})
    for p in func["parameters"].get("required", []):
        if p not in args:
            raise Fail("missing_required", f"missing required parameter {p!r}")
    for p, value in args.items():
        if p not in declared or p not in allowed_by_param:
            raise Fail("unexpected_param", f"unexpected parameter {p!r}")
        allowed = allowed_by_param[p]
        decl = declared[p].get("type", "any")
        expected_type = PY_TYPES.get(decl, str)
        nested = None
        if decl in NESTED_TYPES:
            nested = PY_TYPES.get(declared[p].get("items", {}).get("type", "any"), str)
        if decl == "float" and type(value) is int:
            value = float(value)  # Python's int -> float conversion
        is_variable = _check_type(p, value, allowed, decl, expected_type, nested)
        if not is_variable:
            if expected_type is dict:
                _check_dict(p, value, allowed)
                continue
            if expected_type is list and nested is dict:
                _check_list_of_dicts(p, value, allowed)
                continue
            if expected_type is str:
                if normalize(value) not in [normalize(a) for a in allowed if isinstance(a, str)]:
                    raise Fail("value_error:string", f"{p!r} = {value!r} not in {allowed!r}")
                continue
            if expected_type is list:
                got = [_norm(v) for v in value]
                # "" (may be omitted) stands for the empty list, as in BFCL's list check.
                options = [[_norm(v) for v in a] if isinstance(a, list) else [] for a in allowed
                           if isinstance(a, list) or a == ""]
                if got not in options:
                    raise Fail("value_error:list", f"{p!r} = {value!r} not in {allowed!r}")
                continue
        if value not in allowed:
            raise Fail("value_error:others", f"{p!r} = {value!r} not in {allowed!r}")
    for p, allowed in allowed_by_param.items():
        if p not in args and "" not in allowed:
            raise Fail("missing_optional", f"parameter {p!r} omitted but not optional")


def _find_function(functions: Sequence[dict], name: str) -> dict:
    for f in functions:
        if oai_name(f["name"]) == oai_name(name):
            return f
    raise Fail("no_description", f"no function definition for {name!r}")


def _match_all(functions: Sequence[dict], calls: Sequence[Tuple[str, Any]],
               ground_truth: Sequence[dict]) -> None:
    """Order-free: a one-to-one assignment of calls to expected calls where every pair passes
    ``check_call`` (augmenting paths; BFCL assigns greedily in ground-truth order, which misses
    the assignment when an earlier expected call allows several values, e.g. parallel_178)."""
    ok = []
    last: Dict[int, Fail] = {}
    for j, expected in enumerate(ground_truth):
        func = _find_function(functions, next(iter(expected)))
        row = []
        for name, args in calls:
            try:
                check_call(func, name, args, expected)
                row.append(True)
            except Fail as e:
                row.append(False)
                last[j] = e
        ok.append(row)
    owner: Dict[int, int] = {}  # call index -> expected index

    def augment(j: int, seen: set) -> bool:
        for i, good in enumerate(ok[j]):
            if good and i not in seen:
                seen.add(i)
                if i not in owner or augment(owner[i], seen):
                    owner[i] = j
                    return True
        return False

    for j, expected in enumerate(ground_truth):
        if not augment(j, set()):
            why = f" (e.g. {last[j]})" if j in last else ""
            raise Fail("no_match", f"no call matches expected call {j}: {expected!r}{why}")


def check(category: str, functions: Sequence[dict], calls: Sequence[Tuple[str, Any]],
          ground_truth: Sequence[dict]) -> Tuple[bool, str]:
    """(correct, reason) for a test's model calls ``[(name, arguments)]`` (arguments: a JSON
    string or an already parsed object) under BFCL's AST rules for ``category``."""
    parsed = []
    for name, args in calls:
        if isinstance(args, str):
            try:
                args = json.loads(args)
            except ValueError:
                return False, f"arguments of {name!r} are not JSON"
        parsed.append((name, args))
    try:
        if len(parsed) != len(ground_truth):
            raise Fail("wrong_count", f"{len(parsed)} calls, expected {len(ground_truth)}")
        if category == "parallel":
            _match_all(functions, parsed, ground_truth)
        else:
            expected = ground_truth[0]
            func = functions[0] if category == "simple" else _find_function(functions, next(iter(expected)))
            check_call(func, parsed[0][0], parsed[0][1], expected)
    except Fail as e:
        return False, f"{e.kind}: {e}"
    return True, ""
