"""JSON Schema (dict) → IR unions: keyword handling, $ref resolution, in-place applicators."""

from __future__ import annotations

import functools
import itertools
import json
import re
from decimal import Decimal
from urllib.parse import unquote, urljoin
from urllib.parse import urldefrag as _urldefrag

from . import deferred_negation
from . import formats as fmts
from . import ir
from . import one_of
from . import regex as rx
from .errors import InvalidSchemaError, UnsupportedSchemaError
from .ir import ANY, NEVER, Arr, Enum, Num, Obj, Ref, Str
from .policy import KEYWORD_POLICY, Policy
from .word_boundary import drop_word_boundary

DEFAULT_BASE = "https://xgrammar2.invalid/schema.json"

NUM_KW = frozenset(("minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum", "multipleOf"))
STR_KW = frozenset(("minLength", "maxLength", "pattern"))  # "format" is handled per type (_format)
ARR_KW = frozenset(("items", "prefixItems", "minItems", "maxItems", "contains", "uniqueItems"))
OBJ_KW = frozenset(("properties", "required", "additionalProperties", "patternProperties", "propertyNames",
                    "minProperties", "maxProperties"))
APPLICATOR_KW = frozenset(("allOf", "anyOf", "oneOf", "not", "if", "dependentRequired", "dependentSchemas",
                           "dependencies", "unevaluatedProperties", "unevaluatedItems", "enum", "const", "$ref",
                           "$dynamicRef"))
TYPE_NAMES = ("null", "boolean", "object", "array", "number", "string", "integer")
TYPE_ORDER = ("object", "array", "string", "integer", "number", "boolean", "null")
_SINGLE_TYPE = {t: [t] for t in TYPE_ORDER}

_SEMANTIC = NUM_KW | STR_KW | ARR_KW | OBJ_KW | APPLICATOR_KW | {"type", "format", "additionalItems",
                                                                 "minContains", "maxContains", "then", "else"}
_UNSUPPORTED = frozenset(k for k, (p, _) in KEYWORD_POLICY.items() if p is Policy.UNSUPPORTED)

#: the keywords _convert_full handles after the per-type nodes
_TAIL_KW = frozenset(("const", "enum", "$ref", "$dynamicRef", "allOf", "anyOf", "oneOf", "not", "if", "dependencies",
                      "dependentRequired", "dependentSchemas", "unevaluatedProperties", "unevaluatedItems"))

_IN_PROGRESS = ir.IN_PROGRESS


@functools.lru_cache(maxsize=4096)
def urldefrag(uri: str) -> tuple:
    """urllib's urldefrag as a plain (uri, fragment) pair, memoised: a schema's $refs
    repeat the same few bases and pointers."""
    r = _urldefrag(uri)
    return (r[0], r[1])


@functools.lru_cache(maxsize=4096)
def uri_join(base: str, ref: str) -> str:
    """urljoin that also handles bases without a hierarchical scheme (urn:, tag:)."""
    if ref.startswith("#"):
        return urldefrag(base)[0] + ref
    if ":" in ref.split("/")[0]:
        return ref
    return urljoin(base, ref)


def ptr_join(ptr: str, *parts) -> str:
    out = ptr
    for p in parts:
        if p.__class__ is not str:
            p = str(p)
        if "~" in p or "/" in p:
            p = p.replace("~", "~0").replace("/", "~1")
        out += "/" + p
    return out


def _is_num(x) -> bool:
    return isinstance(x, (int, float, Decimal)) and not isinstance(x, bool)


_NON_IDENT = re.compile(r"[^A-Za-z0-9_]")


@functools.lru_cache(maxsize=4096)
def _sanitize(s: str, limit: int = 40) -> str:
    out = _NON_IDENT.sub("_", s).strip("_") or "x"
    if out[0].isdigit():
        out = "n" + out
    return out[:limit]


#: keywords whose value is one schema, and those whose value maps names to schemas
_SCHEMA_VALUED = frozenset(("items", "additionalItems", "unevaluatedItems", "contains", "additionalProperties",
                            "unevaluatedProperties", "propertyNames", "not", "if", "then", "else"))
_SCHEMA_MAPS = frozenset(("properties", "patternProperties", "$defs", "definitions", "dependentSchemas",
                          "dependencies"))


#: Intersections of a definition with a schema that get a rule of their own, per conversion
#: (defined in ir.py, which deferred_negation.py reads too).
MAX_SYNTH_REFS = ir.MAX_SYNTH_REFS

class Converter:
    def __init__(self, root, *, strict_mode=True, lenient=False, ref_resolver=None, index=True):
        self.root = root
        self.strict = strict_mode
        self.lenient = lenient
        self.ref_resolver = ref_resolver
        self.warnings: list = []
        #: ir.subtract()'s remaining budget (a one-element list) while it runs, else None.
        self.meter = None
        #: True while one_of._exclusive() runs open: ir.negate_node() then negates objects with
        #: patternProperties/additionalProperties (existential "some member" conditions).
        self.open_negation = False
        #: True while a oneOf is retried with deferred negations (one_of.one_of): the
        #: negation of a definition still being converted, or nested deeper than ir.negate()
        #: goes, becomes a rule "context minus the definition" (defer_subtract).
        self.defer_negation = False
        #: True during one_of's relative attempt (and in the bodies of the rules it makes): the
        #: negation of a definition is a rule "any value minus the definition" (ir.negate_node).
        self.negation_rules = False
        #: Why parts of the schema admit no value ("<pointer>: minItems is greater than
        #: maxItems: 5 > 3"), named when the whole schema turns out unsatisfiable.
        self.unsat_notes: list = []
        self.memo: dict = {}
        #: structural numbers of IR nodes for ir.compact, kept for the whole conversion (its
        #: calls meet the same nodes again: Github_medium o683)
        self.numbers = ir._Numbers()
        #: whether one_of._exclusive ran: negations rebuild equal nodes, which the emitter
        #: then looks up by structure (Emitter.sub)
        self.made_exclusive = False
        #: whether equal copies of a schema with oneOf / not are converted once (convert);
        #: off where the emitter may warn about a node (it names the node's pointer, the first
        #: copy's): lenient mode and excludes (json_schema_to_ebnf sets it)
        self.share_copies = not lenient
        self.refs: dict = {}        # rule name -> (schema, base, ptr, scope) | ("and", union, node)
        #                             | ("not", context union, union, open_negation)
        self.ref_by_key: dict = {}  # (absolute ptr, scope) -> rule name
        self.ref_union_memo: dict = {}
        self.resources: dict = {}   # absolute URI (no fragment) -> (schema, ptr, base)
        self.anchors: dict = {}     # URI#name -> (schema, ptr, base)
        self.dyn_anchors: dict = {} # (resource URI, name) -> (schema, ptr, base)
        self.node_base: dict = {}   # id(schema with $id) -> its absolute base URI
        self.has_dynamic = False
        self.scope: tuple = ()      # dynamic scope (resource URIs, outermost first) while converting
        self._synth = 0
        self._not_failed: dict = {}  # deferred negation rule -> the NotExpressible it raised
        #: Rules synthesized since the first deferred negation (deferred_negation.MAX_RULES).
        self._deferred = 0
        self._keep: list = []
        #: id(union) -> (union, branches, context, overlap) for each union an exclusive oneOf
        #: built (one_of.one_of): ir.negate() negates it as "outside the context, in no branch,
        #: or in two overlapping branches" instead of negating its (product) alternatives.
        self.one_of_src: dict = {}
        #: (definition, open_negation, defer_negation) -> its negation (ir.negate_node)
        self.neg_memo: dict = {}
        #: id(negation) -> (negation, union it negates) (ir.negate: the negation of a negation)
        self.neg_src: dict = {}
        self._expanding: set = set()
        self._loc_memo: dict = {}  # ($ref, base) -> _locate's result
        self.root_base = DEFAULT_BASE
        if isinstance(root, dict):
            rid = root.get("$id")
            if isinstance(rid, str):
                self.root_base = urldefrag(uri_join(DEFAULT_BASE, rid))[0]
        #: Whether any schema object may carry an $id (or draft-04 "id"): without the index
        #: (json_schema_to_ebnf found none in the text), every base stays the one given.
        self._ids = bool(index)
        if index:
            self._index(root, DEFAULT_BASE, "#")
        self.resources.setdefault(DEFAULT_BASE, (root, "#", DEFAULT_BASE))

    # ------------------------------------------------------------ diagnostics

    def unsupported(self, keyword, ptr, msg):
        if self.lenient:
            self.warnings.append(f"{ptr}: dropped '{keyword}': {msg}")
            return
        raise UnsupportedSchemaError(f"unsupported keyword '{keyword}' at {ptr}: {msg} "
                                     f"(lenient=True drops it with a warning)", ptr, keyword)

    def invalid(self, keyword, ptr, msg):
        raise InvalidSchemaError(f"invalid schema at {ptr}: {keyword} {msg}", ptr, keyword)

    def unsat(self, ptr, msg):
        """Notes that the schema at ``ptr`` admits no value (returns None, the empty union)."""
        note = f"{ptr}: {msg}"
        if note not in self.unsat_notes:
            self.unsat_notes.append(note)
        return None

    def warn(self, msg):
        """Records a conversion warning once (a schema may be converted under several
        dynamic scopes)."""
        if msg not in self.warnings:
            self.warnings.append(msg)

    # ------------------------------------------------------------ $id / $anchor index

    @staticmethod
    def _own_id(s):
        sid = s.get("$id")
        if isinstance(sid, str):
            return sid
        # draft-04 "id" (ignored next to $ref, where draft-04 ignores siblings)
        sid = s.get("id")
        if isinstance(sid, str) and "$ref" not in s:
            return sid
        return None

    def _index(self, s, base, ptr):
        if not isinstance(s, dict):
            return
        sid = self._own_id(s)
        if sid is not None:
            path, frag = urldefrag(sid)
            if path:
                base = urldefrag(uri_join(base, sid))[0]
                self.resources.setdefault(base, (s, ptr, base))
                self.node_base[id(s)] = base
            # A fragment-only id names no resource of its own: "#foo" is a plain-name fragment
            # (draft-04 to draft-07's location-independent identifier, an anchor); "#/..."
            # names nothing. (It used to be registered as the document's resource before the
            # root was, so "#/definitions/..." pointers resolved inside that sub-schema:
            # JsonSchemaStore---ize-spec, Github_medium---o10310, ...)
            if frag and not frag.startswith("/"):
                self.anchors.setdefault(base + "#" + frag, (s, ptr, base))
        anc = s.get("$anchor")
        if isinstance(anc, str):
            self.anchors.setdefault(base + "#" + anc, (s, ptr, base))
        danc = s.get("$dynamicAnchor")
        if isinstance(danc, str):
            self.anchors.setdefault(base + "#" + danc, (s, ptr, base))
            self.dyn_anchors.setdefault((base, danc), (s, ptr, base))
        if "$dynamicRef" in s:
            self.has_dynamic = True
        for k, v in s.items():
            if k in ("properties", "patternProperties", "$defs", "definitions", "dependentSchemas", "dependencies"):
                if isinstance(v, dict):
                    for kk, vv in v.items():
                        self._index(vv, base, ptr_join(ptr, k, kk))
            elif k in ("allOf", "anyOf", "oneOf", "prefixItems") or (k == "items" and isinstance(v, list)):
                if isinstance(v, list):
                    for i, vv in enumerate(v):
                        self._index(vv, base, ptr_join(ptr, k, i))
            elif k in ("additionalProperties", "unevaluatedProperties", "items", "additionalItems",
                       "unevaluatedItems", "contains", "propertyNames", "not", "if", "then", "else"):
                self._index(v, base, ptr_join(ptr, k))

    def _base_of(self, s, base):
        b = self.node_base.get(id(s))
        if b is not None:
            return b
        sid = self._own_id(s)
        if sid is not None:
            return urldefrag(uri_join(base, sid))[0]
        return base

    def _load_remote(self, doc, ptr):
        if self.ref_resolver is None:
            return None
        try:
            loaded = self.ref_resolver(doc)
        except Exception as e:  # noqa: BLE001 - a resolver failure is reported as unsupported
            self.unsupported("$ref", ptr, f"resolving '{doc}' failed: {e}")
            return None
        if loaded is None:
            return None
        if not isinstance(loaded, (dict, bool)):
            self.invalid("$ref", ptr, f"resolver returned a non-schema for '{doc}'")
        self._keep.append(loaded)
        self._ids = True
        rptr = doc + "#"
        self.resources[doc] = (loaded, rptr, doc)
        self._index(loaded, doc, rptr)
        return self.resources[doc]

    def _locate(self, ref, base, ptr):
        """$ref URI → (schema, absolute ptr, base) or None (unsupported, lenient)."""
        key = (ref, base)
        hit = self._loc_memo.get(key)
        if hit is None:
            hit = self._locate_uncached(ref, base, ptr)
            if hit is not None:  # (a failure is reported again, at its own pointer)
                self._loc_memo[key] = hit
        return hit

    def _locate_uncached(self, ref, base, ptr):
        uri = uri_join(base, ref)
        doc, frag = urldefrag(uri)
        res = self.resources.get(doc)
        if res is None:
            res = self._load_remote(doc, ptr)
        if res is None:
            self.unsupported("$ref", ptr, f"remote reference '{ref}' (only references into this document, or "
                                          "documents returned by ref_resolver, are resolved)")
            return None
        node, nptr, nbase = res
        if frag and not frag.startswith("/"):
            a = self.anchors.get(doc + "#" + frag)
            if a is None:
                self.invalid("$ref", ptr, f"points to unknown anchor '{ref}'")
            return a
        if frag:
            hit = self._walk_pointer(node, nptr, nbase, frag)
            if hit is None and nptr != "#":
                # Many real-world schemas give sub-schemas relative "$id"s yet keep writing
                # "#/definitions/..." pointers meant for the document root; the spec makes such
                # a reference dangling (an invalid schema). Resolve it against the root instead.
                root = self.resources[DEFAULT_BASE]
                hit = self._walk_pointer(root[0], root[1], self.root_base, frag)
            if hit is None:
                self.invalid("$ref", ptr, f"target '{ref}' does not exist")
            node, nptr, nbase = hit
        if not isinstance(node, (dict, bool)):
            self.invalid("$ref", ptr, f"target '{ref}' is not a schema")
        return node, nptr, nbase

    def _walk_pointer(self, node, nptr, nbase, frag):
        for raw in frag[1:].split("/"):
            part = unquote(raw).replace("~1", "/").replace("~0", "~")
            if isinstance(node, dict) and part in node:
                node = node[part]
            elif isinstance(node, list) and part.isdigit() and int(part) < len(node):
                node = node[int(part)]
            else:
                return None
            nptr = ptr_join(nptr, part)
            if self._ids and isinstance(node, dict):
                nbase = self._base_of(node, nbase)
        return node, nptr, nbase

    def resolve(self, ref, base, ptr, dynamic=False):
        """Returns the rule name of a $ref / $dynamicRef target (registering it)."""
        loc = self._locate(ref, base, ptr)
        if loc is None:
            return None
        node, nptr, nbase = loc
        if dynamic:
            frag = urldefrag(uri_join(base, ref))[1]
            if frag and not frag.startswith("/") and isinstance(node, dict) and node.get("$dynamicAnchor") == frag:
                for res in self.scope:
                    hit = self.dyn_anchors.get((res, frag))
                    if hit is not None:
                        node, nptr, nbase = hit
                        break
        scope = self.scope
        key = (nptr, scope)
        name = self.ref_by_key.get(key)
        if name is None:
            if nptr == "#" and scope == (self.root_base,):
                name = "root"
            else:
                if nptr.startswith("#"):
                    parts = nptr[2:].split("/") if len(nptr) > 1 else ["root"]
                    prefix = "ref_"
                else:
                    parts = [p for p in nptr.replace("#", "/").split("/") if p]
                    prefix = "remote_"
                if len(parts) >= 2 and parts[-2] in ("$defs", "definitions"):
                    name = "defs_" + _sanitize(parts[-1].replace("~1", "/").replace("~0", "~"))
                else:
                    name = prefix + _sanitize("_".join(parts[-4:]), 60)
                k = 2
                base_name = name
                while name in self.refs or name == "root":
                    name = f"{base_name}_{k}"
                    k += 1
            self.ref_by_key[key] = name
            self.refs[name] = (node, nbase, nptr, scope)
        return name

    def ref_union(self, name):
        u = self.ref_union_memo.get(name)
        if u is _IN_PROGRESS:
            raise ir.NotExpressible("a recursive $ref is intersected with itself")
        if u is not None:
            return u
        self.ref_union_memo[name] = _IN_PROGRESS
        saved = self.scope
        try:
            entry = self.refs[name]
            if entry[0] == "not":
                # (a failure is kept: emptiness tests would otherwise recompute it each time)
                u = self._not_failed.get(name)
                if u is not None:
                    raise u
                try:
                    u = deferred_negation.body(self, name, entry)
                except ir.NotExpressible as e:
                    if not ir.deferrable(self, e):
                        self._not_failed[name] = e
                    raise
            elif entry[0] == "and":
                other = entry[2]
                inner = self.refs.get(entry[1][0].name)
                if other.kind != "ref" and inner is not None and inner[0] == "not":
                    u = deferred_negation.body(self, name, inner, (other,))
                elif other.kind == "ref":
                    u = ir.intersect(self, self.ref_union(entry[1][0].name), self.ref_union(other.name))
                else:
                    # (the reference's union, not the reference: ref ∩ node would find this
                    # very rule under its key and define the rule as itself, i.e. empty)
                    u = ir.intersect(self, self.ref_union(entry[1][0].name), (other,))
            else:
                node, base, ptr, scope = entry
                self.scope = scope
                u = self.convert(node, ptr, base)
        except BaseException:
            del self.ref_union_memo[name]
            raise
        finally:
            self.scope = saved
        self.ref_union_memo[name] = u
        return u

    def defer_subtract(self, ctx, u):
        """A rule for ``ctx`` minus the union ``u`` (deferred_negation.py)."""
        return deferred_negation.defer_subtract(self, ctx, u)

    def try_ref_union(self, name):
        """The union of a reference, or None while it is being converted (or not
        expressible)."""
        if self.ref_union_memo.get(name) is _IN_PROGRESS:
            return None
        try:
            return self.ref_union(name)
        except ir.NotExpressible:
            return None

    def ref_ptr(self, name):
        entry = self.refs.get(name)
        if entry is None or entry[0] in ("and", "not"):
            return "#"
        return entry[2]

    def intersect_ref(self, x, y):
        if x.kind == "ref" and y.kind == "ref":
            if x.name == y.name:
                return x
            # (a rule for an intersection of definitions that already includes the other's
            # definitions is the intersection: A∩B∩B = A∩B, without a product of their bodies)
            cx_, cy = self._conjuncts(x.name), self._conjuncts(y.name)
            if cy <= cx_:
                return x
            if cx_ <= cy:
                return y
            # Two references: a deferred rule for the pair, so that intersecting two recursive
            # definitions terminates (their children pair up again into the same rule).
            a, b = sorted((x.name, y.name))
            key = ("and2", a, b)
            name = self.ref_by_key.get(key)
            if name is None:
                self._synth += 1
                if self._synth > MAX_SYNTH_REFS:
                    raise ir.NotExpressible(f"more than {MAX_SYNTH_REFS} intersections of definitions")
                name = f"{a}_and{self._synth}"
                self.ref_by_key[key] = name
                self.refs[name] = ("and", (Ref(a),), Ref(b))
            return Ref(name)
        r, o = (x, y) if x.kind == "ref" else (y, x)
        key = ("and", r.name, id(o))
        name = self.ref_by_key.get(key)
        if name is None and (self.ref_union_memo.get(r.name) is _IN_PROGRESS or key in self._expanding):
            # Defer: a rule for "ref ∩ node", computed once the reference is complete; also
            # used when the expansion of ref ∩ node meets ref ∩ node again (a definition that
            # contains itself in place), which makes the recursion a rule.
            return self._defer_and(r, o, key)
        if name is not None:
            return Ref(name)
        entry = self.refs.get(r.name)
        if entry is not None and entry[0] == "not":
            # (a rule as well: the difference is computed, within the node only, when needed)
            return self._defer_and(r, o, key)
        try:
            ru = self.ref_union(r.name)
        except ir.NotExpressible as e:
            # (a deferred negation whose definition is still being converted)
            if not ir.deferrable(self, e):
                raise
            return self._defer_and(r, o, key)
        self._expanding.add(key)
        try:
            return ir.intersect(self, ru, (o,)) if r is x else ir.intersect(self, (o,), ru)
        finally:
            self._expanding.discard(key)

    def _conjuncts(self, name):
        """The rules whose intersection rule ``name`` is: itself, or, for a rule made for the
        intersection of two references (intersect_ref), the conjuncts of both."""
        entry = self.refs.get(name)
        if entry is None or entry[0] != "and" or entry[2].kind != "ref":
            return frozenset((name,))
        return self._conjuncts(entry[1][0].name) | self._conjuncts(entry[2].name)

    def _defer_and(self, r, o, key):
        if self._deferred:
            deferred_negation.count_rule(self)
        self._synth += 1
        if self._synth > MAX_SYNTH_REFS:
            # (ref ∩ node is keyed by the node's identity: intersections that keep making
            # new nodes, e.g. JsonSchemaStore---web-types, would otherwise never end)
            raise ir.NotExpressible(f"more than {MAX_SYNTH_REFS} intersections of definitions")
        name = f"{r.name}_and{self._synth}"
        self.ref_by_key[key] = name
        self.refs[name] = ("and", (Ref(r.name),), o)
        self._keep.append(o)
        return Ref(name)

    # ------------------------------------------------------------ schema → union

    def convert(self, s, ptr="#", base=None):
        if base is None:
            base = DEFAULT_BASE
        if s is True:
            return ANY
        if s is False:
            return NEVER
        if not isinstance(s, dict):
            parts = ptr.split("/")
            # the keyword whose value this is (upstream names it: "propertyNames must be an
            # object"), unless it is a member of a map of schemas (properties/x) or of an array
            kw = parts[-1] if (len(parts) > 1 and parts[-1] in _SCHEMA_VALUED
                               and (len(parts) < 3 or parts[-2] not in _SCHEMA_MAPS)) else "schema"
            self.invalid(kw, ptr, f"must be an object or a boolean (a schema), got {type(s).__name__}")
        if self._ids:
            base = self._base_of(s, base)
        saved = self.scope
        if base not in self.scope:
            self.scope = self.scope + (base,)
        key = (id(s), base, self.scope)
        u = self.memo.get(key)
        ckey = None
        if u is None and ("oneOf" in s or "not" in s) and self.share_copies and s is not self.root:
            # An equal copy of this schema converted before (bundled schemas inline one
            # definition at many places: JsonSchemaStore cityjson's 340 oneOfs are 12 distinct)
            # gives its union; its warnings are said again at this pointer. (The root has no
            # copy inside itself: not written out.)
            text = self._content_key(s)
            ckey = None if text is None else ("content", text, base, self.scope)
            hit = self.memo.get(ckey) if ckey is not None else None
            if hit is not None:
                u, first_ptr, said, notes = hit
                self.scope = saved
                if said or notes:
                    self._say_again(first_ptr, ptr, said, notes)
                self.memo[key] = u
                return u
        if u is None:
            if ckey is not None:
                w0, n0 = len(self.warnings), len(self.unsat_notes)
            meter, self.meter = self.meter, None  # (a subtract()'s budget does not reach in here)
            opn, self.open_negation = self.open_negation, False  # (nor one_of._exclusive()'s open mode)
            dfr, self.defer_negation = self.defer_negation, False  # (nor deferred negation)
            nrl, self.negation_rules = self.negation_rules, False
            try:
                u = self._convert(s, ptr, base)
            except RecursionError as e:
                e.__dict__.setdefault("pointers", []).append(ptr)  # (where, for the message)
                raise
            finally:
                self.scope = saved
                self.meter = meter
                self.open_negation = opn
                self.defer_negation = dfr
                self.negation_rules = nrl
            self.memo[key] = u
            if ckey is not None:
                self.memo[ckey] = (u, ptr, self.warnings[w0:], self.unsat_notes[n0:])
        else:
            self.scope = saved
        return u

    def _content_key(self, x):
        """The JSON text of schema object ``x`` as it is (member order is property order; 1, 1.0
        and true apart), naming it by content; None when it is not plain JSON (a Python value
        json cannot write). One C-speed pass over the subtree: the walk in Python over every
        member cost more than the copies it found (JsonSchemaStore service-schema)."""
        try:
            return json.dumps(x, ensure_ascii=False, check_circular=False)
        except (TypeError, ValueError, RecursionError):
            return None

    def _say_again(self, first_ptr, ptr, said, notes):
        """The warnings and unsatisfiability notes of a schema converted first at
        ``first_ptr``, said of its equal copy at ``ptr``."""
        def moved(msg):
            if msg.startswith(first_ptr) and msg[len(first_ptr):len(first_ptr) + 1] in ("/", ":", " "):
                return ptr + msg[len(first_ptr):]
            return msg

        for w in said:
            self.warn(moved(w))
        for n in notes:
            n = moved(n)
            if n not in self.unsat_notes:
                self.unsat_notes.append(n)

    def _convert(self, s, ptr, base):
        semantic = []
        for k in s:
            if k in _SEMANTIC:
                semantic.append(k)
            elif k in _UNSUPPORTED:
                self.unsupported(k, ptr, KEYWORD_POLICY[k][1])
        if not semantic:
            return ANY
        if len(semantic) == 1 and semantic[0] in ("$ref", "$dynamicRef"):
            kw = semantic[0]
            ref = s[kw]
            if not isinstance(ref, str):
                self.invalid(kw, ptr, "must be a string")
            name = self.resolve(ref, base, ptr, dynamic=kw == "$dynamicRef")
            return ANY if name is None else (Ref(name),)
        try:
            return self._convert_full(s, ptr, base)
        except ir.NotExpressible as e:
            self.unsupported(self._culprit(s), ptr, str(e))
            return ANY

    @staticmethod
    def _culprit(s):
        for k in ("not", "oneOf", "if", "contains", "allOf", "$ref", "uniqueItems", "unevaluatedItems",
                  "unevaluatedProperties", "dependentSchemas", "dependentRequired", "anyOf"):
            if k in s:
                return k
        return "schema"

    def _types(self, s, ptr):
        t = s.get("type")
        if t is None:
            return None
        if isinstance(t, str):
            r = _SINGLE_TYPE.get(t)
            if r is not None:
                return r
            ts = [t]
        elif isinstance(t, list) and all(isinstance(x, str) for x in t):
            ts = t
            if len(set(ts)) != len(ts):
                self.invalid("type", ptr, "has duplicate entries")
        else:
            self.invalid("type", ptr, "must be a string or an array of strings")
        for x in ts:
            if x not in TYPE_NAMES:
                self.invalid("type", ptr, f"has unknown type name '{x}'")
        st = set(ts)
        if "number" in st:
            st.discard("integer")
        return [x for x in TYPE_ORDER if x in st]

    def _format(self, s, ptr, types):
        """What ``format`` asks of this schema object (``types``: its type list, None when
        untyped): (string regex AST or None, integer range (lo, hi) or None). JSON Schema
        2020-12 makes ``format`` an annotation unless a format-assertion vocabulary is used;
        the known formats are asserted (a format applies only to the instance types it
        describes), any other value is not enforced and reported as a warning naming the
        pointer and the format."""
        if "format" not in s:
            return None, None
        f = s["format"]
        if not isinstance(f, str):
            self.invalid("format", ptr, "must be a string")
        ast = fmts.format_ast(f)
        if ast is not None:
            return ast, None
        rng = fmts.INTEGER_FORMAT_RANGES.get(f)
        if rng is not None:
            return None, rng
        # (a refused string format on a schema without strings: nothing to enforce, no warning)
        msg = fmts.annotation_warning(ptr, f, types)
        if msg is not None:
            self.warn(msg)
        return None, None

    def _convert_full(self, s, ptr, base):
        types = self._types(s, ptr)
        keys = s.keys()
        fmt_ast, fmt_range = self._format(s, ptr, types)
        nodes = []
        all_plain = True
        for t in (types if types is not None else TYPE_ORDER[:3] + ("number", "boolean", "null")):
            if t in ("integer", "number"):
                if keys & NUM_KW or fmt_range is not None:
                    n = self._num(s, ptr, t == "integer", fmt_range)
                    all_plain = False
                    if n is None:
                        continue
                    nodes.append(n)
                    all_plain = False
                else:
                    nodes.append(ir.TYPE_NODES[t])
                    if t == "integer":
                        all_plain = False
            elif t == "string":
                if keys & STR_KW or fmt_ast is not None:
                    n = self._str(s, ptr, fmt_ast)
                    all_plain = False
                    if n is None:
                        continue
                    nodes.append(n)
                    all_plain = False
                else:
                    nodes.append(ir.STRING)
            elif t == "array":
                if keys & ARR_KW:
                    n = self._arr(s, ptr, base)
                    all_plain = False
                    if n is None:
                        continue
                    nodes.append(n)
                    all_plain = False
                else:
                    nodes.append(ir.ARRAY)
            elif t == "object":
                if keys & OBJ_KW:
                    n = self._obj(s, ptr, base)
                    all_plain = False
                    if n is None:
                        continue
                    nodes.append(n)
                    all_plain = False
                else:
                    nodes.append(ir.OBJECT)
            elif t == "boolean":
                nodes.append(ir.BOOL)
            else:
                nodes.append(ir.NULL)
        if types is None and all_plain:
            u = ANY
        else:
            u = tuple(nodes)
            if types is not None:
                all_plain = False
        if keys.isdisjoint(_TAIL_KW):  # (most schema objects: none of the keywords below)
            return u

        if "const" in s:
            u = ir.intersect(self, u, (Enum([self._json_value(s["const"], ptr_join(ptr, "const"))]),))
        if "enum" in s:
            ev = s["enum"]
            if not isinstance(ev, list):
                self.invalid("enum", ptr, "must be an array")
            vals, seen = [], set()
            for i, v in enumerate(ev):
                v = self._json_value(v, ptr_join(ptr, "enum", i))
                k = ir.jkey(v)
                if k not in seen:
                    seen.add(k)
                    vals.append(v)
            u = ir.intersect(self, u, (Enum(vals),))
        for kw in ("$ref", "$dynamicRef"):
            if kw in s:
                ref = s[kw]
                if not isinstance(ref, str):
                    self.invalid(kw, ptr, "must be a string")
                name = self.resolve(ref, base, ptr, dynamic=kw == "$dynamicRef")
                if name is not None:
                    u = ir.intersect(self, u, (Ref(name),))
        if "allOf" in s:
            for i, sub in enumerate(self._schema_list(s, "allOf", ptr)):
                sptr = ptr_join(ptr, "allOf", i)
                r = self._one_of_in_context(sub, sptr, base, u)
                u = ir.intersect(self, u, self.convert(sub, sptr, base) if r is None else r)
        uneval = "unevaluatedProperties" in s or "unevaluatedItems" in s
        if "anyOf" in s:
            subs = self._schema_list(s, "anyOf", ptr)
            bs = [self.convert(sub, ptr_join(ptr, "anyOf", i), base) for i, sub in enumerate(subs)]
            alts = ir.union(*bs)
            if uneval and 1 < len(bs) <= 4:
                # Annotations of every matching branch count: add the intersections of
                # branch subsets so their combined evaluated sets are represented.
                try:
                    extra = []
                    for r in range(2, len(bs) + 1):
                        for combo in itertools.combinations(bs, r):
                            x = combo[0]
                            for y in combo[1:]:
                                x = ir.intersect(self, x, y)
                            extra.append(x)
                    alts = ir.union(*extra[::-1], alts)
                except ir.NotExpressible:
                    pass
            u = ir.intersect(self, u, alts)
        if "oneOf" in s:
            subs = self._schema_list(s, "oneOf", ptr)
            branches = [self.convert(sub, ptr_join(ptr, "oneOf", i), base) for i, sub in enumerate(subs)]
            u = ir.intersect(self, u, one_of.one_of(self, branches, ptr, u))
        if "not" in s:
            nu = self.convert(s["not"], ptr_join(ptr, "not"), base)
            try:
                u = ir.subtract(self, u, nu)
            except ir.NotExpressible as e:
                self.unsupported("not", ptr, str(e))
        if "if" in s and "then" not in s and "else" not in s and uneval:
            # No constraint, but the annotations of a successful 'if' count.
            iu = self.convert(s["if"], ptr_join(ptr, "if"), base)
            try:
                u = ir.intersect(self, u, ir.union(iu, ir.negate(self, iu)))
            except ir.NotExpressible:
                pass
        if "if" in s and ("then" in s or "else" in s):
            iu = self.convert(s["if"], ptr_join(ptr, "if"), base)
            tu = self.convert(s["then"], ptr_join(ptr, "then"), base) if "then" in s else ANY
            eu = self.convert(s["else"], ptr_join(ptr, "else"), base) if "else" in s else ANY
            try:
                try:
                    niu = ir.negate(self, iu)
                except ir.NotExpressible:
                    niu = None
                if niu is not None:
                    u = ir.intersect(self, u, ir.union(ir.intersect(self, iu, tu), ir.intersect(self, niu, eu)))
                else:  # ¬if relative to u ∧ else (ir.subtract), still exact
                    u = ir.union(ir.intersect(self, u, ir.intersect(self, iu, tu)),
                                 ir.subtract(self, ir.intersect(self, u, eu), iu))
            except ir.NotExpressible as e:
                self.unsupported("if", ptr, f"the 'if' schema cannot be negated: {e}")
        deps_req = {}
        deps_sch = {}
        if "dependencies" in s:
            d = s["dependencies"]
            if not isinstance(d, dict):
                self.invalid("dependencies", ptr, "must be an object")
            for k, v in d.items():
                if isinstance(v, list):
                    deps_req[k] = v
                else:
                    deps_sch[k] = (v, ptr_join(ptr, "dependencies", k))
        if "dependentRequired" in s:
            d = s["dependentRequired"]
            if not isinstance(d, dict) or not all(isinstance(v, list) for v in d.values()):
                self.invalid("dependentRequired", ptr, "must be an object of string arrays")
            deps_req.update(d)
        if "dependentSchemas" in s:
            d = s["dependentSchemas"]
            if not isinstance(d, dict):
                self.invalid("dependentSchemas", ptr, "must be an object")
            for k, v in d.items():
                deps_sch[k] = (v, ptr_join(ptr, "dependentSchemas", k))
        for k, req in deps_req.items():
            if not all(isinstance(x, str) for x in req):
                self.invalid("dependentRequired", ptr, "must be an object of string arrays")
            req = [x for x in req if x != k]
            if not req:
                continue
            alt = ir.union((Obj(props=((k, NEVER),)),),
                           (Obj(required=tuple(r for r in req if r != k) + (k,)),),
                           ir._others("object"))
            u = ir.intersect(self, u, alt)
        for k, (sub, sptr) in deps_sch.items():
            try:
                kctx = ir.intersect(self, u, (Obj(required=(k,)),))
            except ir.NotExpressible:
                kctx = ANY
            su = self._one_of_in_context(sub, sptr, base, kctx)
            if su is None:
                su = self.convert(sub, sptr, base)
            if ir.is_any(su):
                continue
            alt = ir.union((Obj(props=((k, NEVER),)),), ir._others("object"),
                           ir.intersect(self, (Obj(required=(k,)),), su))
            u = ir.intersect(self, u, alt)
        if "unevaluatedProperties" in s:
            uu = self.convert(s["unevaluatedProperties"], ptr_join(ptr, "unevaluatedProperties"), base)
            u = self._apply_unevaluated_props(u, uu, ptr)
        if "unevaluatedItems" in s:
            if not isinstance(s["unevaluatedItems"], (dict, bool)):
                self.invalid("unevaluatedItems", ptr, "must be a boolean or an object (a schema), got "
                             + type(s["unevaluatedItems"]).__name__)
            uu = self.convert(s["unevaluatedItems"], ptr_join(ptr, "unevaluatedItems"), base)
            u = self._apply_unevaluated_items(u, uu, ptr)
        return u

    def _json_value(self, v, ptr):
        if v is None or isinstance(v, (bool, str)):
            return v
        if isinstance(v, (int, float, Decimal)):
            if isinstance(v, float) and (v != v or v in (float("inf"), float("-inf"))):
                self.invalid("const/enum", ptr, "contains a non-finite number")
            return v
        if isinstance(v, list):
            return [self._json_value(x, ptr) for x in v]
        if isinstance(v, dict):
            for k in v:
                if not isinstance(k, str):
                    self.invalid("const/enum", ptr, "has a non-string object key")
            return {k: self._json_value(x, ptr) for k, x in v.items()}
        self.invalid("const/enum", ptr, f"contains a non-JSON value of type {type(v).__name__}")

    def _schema_list(self, s, k, ptr):
        v = s[k]
        if not isinstance(v, list) or not v:
            self.invalid(k, ptr, "must be a non-empty array of schemas")
        return v

    # ------------------------------------------------------------ oneOf (one_of.py)

    def _one_of_in_context(self, sub, ptr, base, context):
        """An allOf member (or a dependentSchemas/dependencies entry) that is only a ``oneOf``
        whose branches are disjoint within what the schema object requires before it
        (``context``, e.g. a required discriminator key next to the allOf, or the key the
        dependency is on): the union of the branches, exact since the member is intersected
        with the context. None otherwise (the member is converted on its own, as before)."""
        if not isinstance(sub, dict) or "oneOf" not in sub or "$id" in sub or "id" in sub:
            return None
        if any(k in _SEMANTIC and k != "oneOf" or k in _UNSUPPORTED for k in sub):
            return None
        subs = self._schema_list(sub, "oneOf", ptr)
        if len(subs) < 2 or ir.is_any(context):
            return None
        branches = [self.convert(b, ptr_join(ptr, "oneOf", i), base) for i, b in enumerate(subs)]
        return one_of.union_if_disjoint(self, branches, context)

    # ------------------------------------------------------------ unevaluated*

    def _expand_all(self, u, ptr, kw):
        try:
            return self._expand_strict(u)
        except ir.NotExpressible as e:
            self.unsupported(kw, ptr, str(e))
            return None

    def _expand_strict(self, u):
        out = []
        for n in u:
            if n.kind == "ref":
                out.extend(self._expand_strict(self.ref_union(n.name)))
            else:
                out.append(n)
        return tuple(out)

    def _apply_unevaluated_props(self, u, uu, ptr):
        if ir.is_any(uu):
            # No constraint, but every property now counts as evaluated (for enclosing
            # unevaluatedProperties).
            if not any(n.kind in ("object", "ref") for n in u):
                return u
            try:
                eu = self._expand_strict(u)
            except ir.NotExpressible:
                return u
            return tuple(n.copy(ev_all=True) if n.kind == "object" and not n.ev_all else n for n in eu)
        eu = self._expand_all(u, ptr, "unevaluatedProperties")
        if eu is None:
            return u
        out = []
        for n in eu:
            if n.kind == "object":
                if not n.ev_all:
                    n = n.copy(addl=n.addl + ((uu, n.ev_keys, n.ev_pats),), ev_all=True)
                out.append(n)
            elif n.kind == "enum":
                keep = [v for v in n.values if not isinstance(v, dict)
                        or all(ir.validate(self, uu, x) for x in v.values())]
                if keep:
                    out.append(Enum(keep))
            else:
                out.append(n)
        return tuple(out)

    def _apply_unevaluated_items(self, u, uu, ptr):
        if ir.is_any(uu):
            if not any(n.kind in ("array", "ref") for n in u):
                return u
            try:
                eu = self._expand_strict(u)
            except ir.NotExpressible:
                return u
            return tuple(n.copy(ev_all=True) if n.kind == "array" and not n.ev_all else n for n in eu)
        eu = self._expand_all(u, ptr, "unevaluatedItems")
        if eu is None:
            return u
        out = []
        for n in eu:
            if n.kind == "array":
                if not n.ev_all:
                    if n.contains:
                        self.unsupported("unevaluatedItems", ptr, "next to 'contains' (items evaluated by "
                                                                  "contains depend on the instance)")
                        out.append(n)
                        continue
                    prefix = list(n.prefix)
                    for i in range(n.ev_n, len(prefix)):
                        prefix[i] = ir.intersect(self, prefix[i], uu)
                    items = uu if n.items is None else ir.intersect(self, n.items, uu)
                    n = n.copy(prefix=tuple(prefix), items=items, ev_all=True)
                out.append(n)
            elif n.kind == "enum":
                keep = [v for v in n.values if not isinstance(v, list)
                        or all(ir.validate(self, uu, x) for x in v)]
                if keep:
                    out.append(Enum(keep))
            else:
                out.append(n)
        return tuple(out)

    # ------------------------------------------------------------ typed builders

    def _get_num(self, s, k, ptr):
        v = s.get(k)
        if v is None:
            return None
        if not _is_num(v):
            self.invalid(k, ptr, f"must be a number (Value must be a number), got {type(v).__name__}")
        return ir.to_dec(v)

    def _get_count(self, s, k, ptr):
        v = s.get(k)
        if v is None:
            return None
        if not _is_num(v) or ir.to_dec(v) != ir.to_dec(v).to_integral_value():
            self.invalid(k, ptr, f"must be an integer (a non-negative one), got {v!r}")
        if v < 0:
            self.invalid(k, ptr, f"must be a non-negative integer, got {v!r}")
        return int(v)

    def _num(self, s, ptr, integer, fmt_range=None):
        """The number node of a schema object; ``fmt_range``: the inclusive (lo, hi) of an
        int32 / int64 ``format``, intersected with the schema's own bounds."""
        lo = self._get_num(s, "minimum", ptr)
        hi = self._get_num(s, "maximum", ptr)
        lo_x = hi_x = False
        xmin, xmax = s.get("exclusiveMinimum"), s.get("exclusiveMaximum")
        if isinstance(xmin, bool):
            lo_x = xmin and lo is not None
        elif xmin is not None:
            x = self._get_num(s, "exclusiveMinimum", ptr)
            if lo is None or x >= lo:
                lo, lo_x = x, True
        if isinstance(xmax, bool):
            hi_x = xmax and hi is not None
        elif xmax is not None:
            x = self._get_num(s, "exclusiveMaximum", ptr)
            if hi is None or x <= hi:
                hi, hi_x = x, True
        if fmt_range is not None:
            flo, fhi = Decimal(fmt_range[0]), Decimal(fmt_range[1])
            if lo is None or flo > lo:
                lo, lo_x = flo, False
            if hi is None or fhi < hi:
                hi, hi_x = fhi, False
        mults = ()
        if "multipleOf" in s:
            m = self._get_num(s, "multipleOf", ptr)
            if m <= 0:
                self.invalid("multipleOf", ptr, "must be greater than 0")
            if not (integer and m == m.to_integral_value() and m == 1):
                mults = (m.normalize(),)
        n = Num(integer, lo, lo_x, hi, hi_x, mults, src=ptr)
        if n.trivially_empty():
            if mults and not Num(integer, lo, lo_x, hi, hi_x, (), src=ptr).trivially_empty():
                return self.unsat(ptr, f"the range contains no multipleOf value (multipleOf {mults[0]})")
            return self.unsat(ptr, "the range of numbers is empty (minimum / maximum)")
        return n

    def _pattern_ast(self, p, kw, ptr):
        if not isinstance(p, str):
            self.invalid(kw, ptr, "must be a string")
        try:
            raw = rx.parse(p)
        except rx.RegexSyntaxError as e:
            self.invalid(kw, ptr, f"is not a valid ECMA-262 regex: {e}")
        except rx.RegexUnsupported as e:
            self.unsupported(kw, ptr, str(e))
            return None
        full = rx.to_full_match(raw)
        if full is None:
            dropped = drop_word_boundary(raw)  # (\b between two parts: no automaton needed)
            if dropped is not None:
                full = rx.to_full_match(dropped)
        if full is None:
            full = rx.cat(rx.ANY_STAR, raw, rx.ANY_STAR)
        return full

    def _str(self, s, ptr, fmt_ast=None):
        """The string node of a schema object; ``fmt_ast``: the full-match regex of its
        ``format`` when that format constrains strings (see _format)."""
        minl = self._get_count(s, "minLength", ptr) or 0
        maxl = self._get_count(s, "maxLength", ptr)
        if maxl is not None and minl > maxl:
            return None
        pos = []
        if "pattern" in s:
            full = self._pattern_ast(s["pattern"], "pattern", ptr)
            if full is not None and full != rx.ANY_STAR:
                pos.append((full, ptr))
        if fmt_ast is not None:
            pos.append((fmt_ast, ptr))
        return Str(minl, maxl, tuple(pos), (), src=ptr)

    def _arr(self, s, ptr, base):
        prefix = []
        items = None
        ev_all = False
        if "prefixItems" in s:
            pi = s["prefixItems"]
            if not isinstance(pi, list):
                self.invalid("prefixItems", ptr, "must be an array of schemas")
            for i, x in enumerate(pi):
                if not isinstance(x, (dict, bool)):
                    self.invalid("prefixItems", ptr, f"must be an array of objects or booleans (schemas); "
                                 f"item {i} is a {type(x).__name__}")
            prefix = [self.convert(x, ptr_join(ptr, "prefixItems", i), base) for i, x in enumerate(pi)]
        if "items" in s:
            it = s["items"]
            if isinstance(it, list) and "prefixItems" not in s:
                prefix = [self.convert(x, ptr_join(ptr, "items", i), base) for i, x in enumerate(it)]
                if "additionalItems" in s:
                    items = self.convert(s["additionalItems"], ptr_join(ptr, "additionalItems"), base)
                    ev_all = True
            elif isinstance(it, (dict, bool)):
                items = self.convert(it, ptr_join(ptr, "items"), base)
                ev_all = True
            else:
                self.invalid("items", ptr, f"must be a boolean or an object (a schema, or before draft "
                             f"2020-12 an array of schemas), got {type(it).__name__}")
        minn = self._get_count(s, "minItems", ptr) or 0
        maxn = self._get_count(s, "maxItems", ptr)
        if maxn is not None and minn > maxn:
            return self.unsat(ptr, f"minItems is greater than maxItems: {minn} > {maxn}")
        if (len(prefix) < minn and (s.get("items") is False if "prefixItems" in s
                                    else isinstance(s.get("items"), list) and s.get("additionalItems") is False)):
            return self.unsat(ptr, "minItems is greater than the number of prefixItems, but additional "
                                   f"items are not allowed: {minn} > {len(prefix)}")
        contains = ()
        if "contains" in s:
            cu = self.convert(s["contains"], ptr_join(ptr, "contains"), base)
            cmin = self._get_count(s, "minContains", ptr)
            cmax = self._get_count(s, "maxContains", ptr)
            cmin = 1 if cmin is None else cmin
            if cmax is not None and cmin > cmax:
                return self.unsat(ptr, f"minContains is greater than maxContains: {cmin} > {cmax}")
            if cmin > 0 or cmax is not None:
                contains = ((cu, cmin, cmax, ptr),)
        unique = None
        if "uniqueItems" in s:
            uv = s["uniqueItems"]
            if not isinstance(uv, bool):
                self.invalid("uniqueItems", ptr, "must be a boolean")
            if uv:
                unique = ptr
        for i in range(min(minn, len(prefix))):
            if not prefix[i]:
                return None
        return Arr(tuple(prefix), items, minn, maxn, contains, unique, len(prefix), ev_all, src=ptr)

    def _obj(self, s, ptr, base):
        props = []
        if "properties" in s:
            p = s["properties"]
            if not isinstance(p, dict):
                self.invalid("properties", ptr, "must be an object")
            for k, v in p.items():
                props.append((k, self.convert(v, ptr_join(ptr, "properties", k), base)))
        patterns = []
        if "patternProperties" in s:
            pp = s["patternProperties"]
            if not isinstance(pp, dict):
                self.invalid("patternProperties", ptr, "must be an object")
            for k, v in pp.items():
                ast = self._pattern_ast(k, "patternProperties", ptr_join(ptr, "patternProperties", k))
                if ast is None:
                    continue
                patterns.append((ast, self.convert(v, ptr_join(ptr, "patternProperties", k), base)))
        required = ()
        if "required" in s:
            r = s["required"]
            if not isinstance(r, list) or not all(isinstance(x, str) for x in r):
                self.invalid("required", ptr, "must be an array of strings")
            required = tuple(dict.fromkeys(r))  # (duplicates dropped, first order kept)
        addl = ()
        ev_all = False
        if "additionalProperties" in s:
            au = self.convert(s["additionalProperties"], ptr_join(ptr, "additionalProperties"), base)
            ev_all = True
            if not ir.is_any(au):
                addl = ((au, frozenset(k for k, _ in props), tuple(a for a, _ in patterns)),)
        names = ()
        if "propertyNames" in s:
            nu = self.convert(s["propertyNames"], ptr_join(ptr, "propertyNames"), base)
            if not ir.is_any(nu):
                names = (nu,)
        minp = self._get_count(s, "minProperties", ptr) or 0
        maxp = self._get_count(s, "maxProperties", ptr)
        if maxp is not None and (minp > maxp or len(required) > maxp):
            return None
        pd = dict(props)
        for r in required:
            if r in pd and not pd[r]:
                return None
        return Obj(tuple(props), required, tuple(patterns), addl, names, minp, maxp,
                   frozenset(k for k, _ in props), tuple(a for a, _ in patterns), ev_all, src=ptr)
