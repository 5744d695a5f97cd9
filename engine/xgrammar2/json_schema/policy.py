"""The keyword policy table: every JSON Schema (draft 2020-12, plus the older spellings
that still appear in the wild) keyword is ENFORCED by the grammar, ignored because it is an
ANNOTATION, or UNSUPPORTED (raises UnsupportedSchemaError; with lenient=True it is dropped
and reported). docs/json-schema.md mirrors this table; tests/json_schema/test_policy.py
has one test per row.

"Enforced" keywords may still be refused for particular values, with a precise message:
those cases are listed in ``reason``.
"""

from __future__ import annotations

from enum import Enum


class Policy(str, Enum):
    ENFORCED = "enforced"
    ANNOTATION = "annotation"
    UNSUPPORTED = "unsupported"


E, A, U = Policy.ENFORCED, Policy.ANNOTATION, Policy.UNSUPPORTED

KEYWORD_POLICY: dict = {
    # --- core / structure
    "$schema": (A, "dialect identifier; draft 2020-12 semantics are always used"),
    "$id": (E, "sets the base URI used to resolve $ref within the document; a fragment-only value names no resource "
               "of its own (`\"#foo\"`, the draft-04 to draft-07 location-independent identifier, is an anchor; "
               "`\"#/...\"` names nothing)"),
    "id": (E, "draft-04 spelling of $id (only when its value is a string)"),
    "$anchor": (E, "plain-name fragment target for $ref"),
    "$ref": (E, "local references (JSON pointer, $anchor, embedded $id), recursion allowed; "
                "sibling keywords are intersected. Other documents only through ref_resolver, "
                "else refused"),
    "$defs": (E, "definitions container for $ref"),
    "definitions": (E, "draft-07 definitions container for $ref"),
    "$comment": (A, "comment"),
    "$vocabulary": (A, "meta-schema only"),
    "$dynamicRef": (E, "resolved statically per dynamic scope: rules are specialized by the chain of "
                       "schema resources entered"),
    "$dynamicAnchor": (E, "target of $dynamicRef (also a plain-name anchor)"),
    "$recursiveRef": (U, "draft 2019-09 dynamic scope is not supported"),
    "$recursiveAnchor": (U, "draft 2019-09 dynamic scope is not supported"),
    # --- applicators
    "allOf": (E, "exact intersection of the subschemas"),
    "anyOf": (E, "union"),
    "oneOf": (E, "union when the branches are provably disjoint, else exact 'exactly one' via "
                 "negation (relative to the other branch where a branch cannot be negated alone); "
                 "refused when that is not expressible"),
    "not": (E, "exact complement where expressible (types, const/enum values, bounds, "
               "lengths, patterns, required, simple properties; closed objects within a finite key "
               "set); refused otherwise"),
    "if": (E, "exact (if∧then)∨(¬if∧else); refused when 'if' cannot be negated there"),
    "then": (E, "see 'if'; ignored without 'if'"),
    "else": (E, "see 'if'; ignored without 'if'"),
    "dependentRequired": (E, "expanded to alternatives"),
    "dependentSchemas": (E, "expanded to alternatives"),
    "dependencies": (E, "draft-07 form of dependentRequired/dependentSchemas"),
    # --- type and values
    "type": (E, "string or array of type names"),
    "enum": (E, "JSON equality; objects with ≤ 4 keys in any key order, larger ones in the "
                "order written in the schema"),
    "const": (E, "as enum with one value"),
    # --- numbers
    "minimum": (E, "exact, any decimal"),
    "maximum": (E, "exact, any decimal"),
    "exclusiveMinimum": (E, "exact, any decimal (draft-04 boolean form accepted)"),
    "exclusiveMaximum": (E, "exact, any decimal (draft-04 boolean form accepted)"),
    "multipleOf": (E, "exact remainder automaton for any decimal step; refused when the "
                      "automaton would exceed 5000 states"),
    # --- strings
    "minLength": (E, "code points; an escape counts as one character"),
    "maxLength": (E, "code points; large bounds are emitted as {m,n} repetitions"),
    "pattern": (E, "ECMA-262 (u-mode), unanchored search semantics; intersected exactly with "
                   "lengths/other patterns/formats via automata; lookahead and \\b \\B are "
                   "exact (automata); lookbehind and back-references are refused, as are "
                   "automata exceeding the state limit"),
    "format": (E, "date, time, date-time, duration, email, hostname, ipv4, ipv6, uuid, uri, "
                  "uri-reference, uri-template, json-pointer, relative-json-pointer (see "
                  "formats.py for documented subsets), OpenAPI byte (base64) and int32/int64 "
                  "(integer range); float, double, binary, password add nothing; a format "
                  "applies only to the types it describes; other values (regex, idn-*, iri*, "
                  "unknown) are annotations: not enforced, with a warning"),
    "contentEncoding": (A, "annotation in draft 2020-12"),
    "contentMediaType": (A, "annotation in draft 2020-12"),
    "contentSchema": (A, "annotation in draft 2020-12"),
    # --- arrays
    "items": (E, "schema for items after prefixItems (draft-07 array form = prefixItems)"),
    "prefixItems": (E, "positional schemas"),
    "additionalItems": (E, "draft-07: only meaningful next to an array-valued 'items'"),
    "minItems": (E, "exact"),
    "maxItems": (E, "exact; large bounds are emitted as {m,n} repetitions"),
    "contains": (E, "exact counting when the contains schema can be negated; refused otherwise"),
    "minContains": (E, "see contains"),
    "maxContains": (E, "see contains"),
    "uniqueItems": (E, "exact: item values from a small finite set (≤ 12 values) in the grammar; "
                       "strings without maxLength or pattern and integers without an upper bound checked "
                       "by the parser as each item completes; other items (objects, bounded strings, "
                       "numbers, unions) also by the matcher, which refuses a token after which every "
                       "completion of the item is a duplicate (a search); refused with minItems >= 2 "
                       "over such items"),
    "unevaluatedItems": (E, "items not evaluated by prefixItems/items of the same schema object "
                            "(after merging in-place applicators); refused next to contains"),
    # --- objects
    "properties": (E, "emitted in schema order; optional ones may be skipped"),
    "required": (E, "exact"),
    "additionalProperties": (E, "bool or schema; extra keys come after the listed ones and never spell "
                                "a listed name; keys matching patternProperties get those schemas"),
    "patternProperties": (E, "exact key regions (pattern combinations × listed names)"),
    "propertyNames": (E, "string constraints on every key"),
    "minProperties": (E, "exact counting (see \"duplicate keys\" below)"),
    "maxProperties": (E, "exact counting"),
    "unevaluatedProperties": (E, "keys not evaluated by properties/patternProperties/"
                                 "additionalProperties of the same schema object (after "
                                 "merging in-place applicators)"),
    # --- annotations
    "title": (A, "annotation"),
    "description": (A, "annotation"),
    "default": (A, "annotation"),
    "examples": (A, "annotation"),
    "deprecated": (A, "annotation"),
    "readOnly": (A, "annotation"),
    "writeOnly": (A, "annotation"),
}

UNKNOWN_KEYWORD_POLICY = (A, "unknown keywords are annotations (JSON Schema 2020-12 §4.3.1)")


def policy_of(keyword: str):
    return KEYWORD_POLICY.get(keyword, UNKNOWN_KEYWORD_POLICY)
