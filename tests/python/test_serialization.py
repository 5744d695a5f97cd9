"""serialize_json / deserialize_json of Grammar, TokenizerInfo and CompiledGrammar
(xgrammar2/serialization.py, docs/serialization.md): round trips, token masks after
deserialization with real tokenizers, and the error raised for every kind of bad payload.
Where upstream xgrammar is installed, its payloads must be refused with the version error
(and it refuses ours the same way)."""

import base64
import json
import pickle
import subprocess
import sys

import numpy as np
import pytest

from pyapi_helpers import canonical_path, requires_core, requires_data

pytestmark = requires_core

import xgrammar2 as xgr  # noqa: E402
from xgrammar2.serialization import SERIALIZATION_VERSION  # noqa: E402

try:
    import xgrammar as upstream
except ImportError:  # pragma: no cover - upstream is a dev dependency
    upstream = None

requires_upstream = pytest.mark.skipif(upstream is None, reason="upstream xgrammar not installed")


# ---- fixtures -------------------------------------------------------------------------------


def small_grammar():
    return xgr.Grammar.from_ebnf(
        'rule1 ::= ([^0-9] rule1) | ""\nroot_rule ::= rule1 "a"\n', root_rule_name="root_rule"
    )


def small_tokenizer_info():
    return xgr.TokenizerInfo(
        ["1", "212", "a", "A", "b", "一", "-", "aBc", "abc"],
        vocab_type=xgr.VocabType.BYTE_FALLBACK,
        vocab_size=10,
        stop_token_ids=[0, 1],
        add_prefix_space=True,
    )


def small_compiled():
    info = small_tokenizer_info()
    return xgr.GrammarCompiler(info).compile_grammar(small_grammar()), info


SCHEMA = {
    "type": "object",
    "properties": {
        "name": {"type": "string", "maxLength": 8},
        "age": {"type": "integer", "minimum": 0},
        "tags": {"type": "array", "items": {"enum": ["a", "b c", "é"]}},
    },
    "required": ["name", "age"],
}


def various_grammars():
    tag = {
        "type": "structural_tag",
        "format": {
            "type": "triggered_tags",
            "triggers": ["<function="],
            "tags": [
                {
                    "begin": "<function=get>",
                    "content": {"type": "json_schema", "json_schema": SCHEMA},
                    "end": "</function>",
                }
            ],
        },
    }
    g = [
        small_grammar(),
        xgr.Grammar.from_json_schema(SCHEMA),
        xgr.Grammar.from_json_schema(SCHEMA, any_whitespace=False, indent=2),
        xgr.Grammar.builtin_json_grammar(),
        xgr.Grammar.from_regex(r"(\d{3}-)?[A-Z][a-z]*|é+|[^\x00-\x1f]{2,4}"),
        xgr.Grammar.from_ebnf(
            'root ::= "こんにちは" | "😊" | "你好" | "\\n" | "\\"q\\"" | [\\x00-\\x7f]'
        ),
        xgr.Grammar.from_ebnf('root ::= a "b"\na ::= ("a"+ | "x"{2,5}) (= "b")'),
        xgr.Grammar.from_ebnf('root ::= Token(1, 2) "a"'),
        xgr.Grammar.from_structural_tag(json.dumps(tag)),
    ]
    g.append(xgr.Grammar.union(g[1], g[4]))
    g.append(xgr.Grammar.concat(g[5], g[6]))
    return g


# ---- Grammar --------------------------------------------------------------------------------


def test_serialization_version_and_exports():
    assert xgr.get_serialization_version() == SERIALIZATION_VERSION
    assert isinstance(xgr.get_serialization_version(), str)
    assert xgr.config.get_serialization_version is xgr.get_serialization_version
    payload = json.loads(small_grammar().serialize_json())
    assert payload["__VERSION__"] == xgr.get_serialization_version()
    for name in ("DeserializeFormatError", "DeserializeVersionError", "InvalidJSONError"):
        cls = getattr(xgr, name)
        assert cls is getattr(xgr.exception, name)
        assert issubclass(cls, RuntimeError)  # what upstream's are
        assert issubclass(cls, xgr.XGrammar2Error)


@requires_upstream
def test_version_differs_from_upstream():
    # The payloads are not interchangeable, so the versions must not collide.
    assert xgr.get_serialization_version() != upstream.get_serialization_version()


def test_grammar_payload_fields():
    payload = json.loads(small_grammar().serialize_json())
    assert payload == {
        "__VERSION__": SERIALIZATION_VERSION,
        "__TYPE__": "Grammar",
        "root_rule_name": "root_rule",
        "ebnf": str(small_grammar()),
        "warnings": [],
    }


@pytest.mark.parametrize("index", range(11))
def test_grammar_roundtrip(index):
    grammar = various_grammars()[index]
    text = grammar.serialize_json()
    recovered = xgr.Grammar.deserialize_json(text)
    assert str(recovered) == str(grammar)
    assert recovered.serialize_json() == text  # a fixed point
    assert recovered == grammar
    assert recovered.warnings == grammar.warnings
    assert xgr.Grammar.deserialize_json(text.encode()) == grammar  # bytes are accepted too


def test_grammar_roundtrip_keeps_warnings():
    schema = {"type": "object", "properties": {"v": {"type": "string", "format": "semver"}}}
    with pytest.warns(UserWarning):
        grammar = xgr.Grammar.from_json_schema(schema)
    assert grammar.warnings
    recovered = xgr.Grammar.deserialize_json(grammar.serialize_json())
    assert recovered.warnings == grammar.warnings


def test_grammar_functional():
    recovered = xgr.Grammar.deserialize_json(small_grammar().serialize_json())
    for text, ok in [("a", True), ("xya", True), ("1a", False), ("ab", False)]:
        assert xgr.testing._is_grammar_accept_string(recovered, text) is ok
    utf8 = xgr.Grammar.deserialize_json(various_grammars()[5].serialize_json())
    for text in ["こんにちは", "😊", "你好", "\n", '"q"', "z"]:
        assert xgr.testing._is_grammar_accept_string(utf8, text)


def test_grammar_pickles_through_serialization():
    grammar = small_grammar()  # its root rule is not called "root"
    grammar._warnings = ("w",)
    recovered = pickle.loads(pickle.dumps(grammar))
    assert str(recovered) == str(grammar)
    assert recovered.warnings == ("w",)


def test_serialized_output_pickles():
    # (Upstream once crashed pickling its serialized strings.) Ours are plain str.
    compiled, info = small_compiled()
    values = [
        xgr.get_serialization_version(),
        small_grammar().serialize_json(),
        info.serialize_json(),
        compiled.serialize_json(),
    ]
    for value in values:
        assert type(value) is str
        assert pickle.loads(pickle.dumps(value)) == value


# ---- TokenizerInfo --------------------------------------------------------------------------


def test_tokenizer_info_payload_fields():
    payload = json.loads(small_tokenizer_info().serialize_json())
    assert payload == {
        "__VERSION__": SERIALIZATION_VERSION,
        "__TYPE__": "TokenizerInfo",
        "vocab_type": 1,
        "vocab_size": 10,
        "add_prefix_space": True,
        "stop_token_ids": [0, 1],
        "special_token_ids": [],
        "added_token_ids": [],
        "encoded_vocab": ["1", "212", "a", "A", "b", "一", "-", "aBc", "abc"],
    }


def assert_same_tokenizer_info(a, b):
    assert a.vocab_type == b.vocab_type
    assert a.vocab_size == b.vocab_size
    assert a.add_prefix_space == b.add_prefix_space
    assert a.stop_token_ids == b.stop_token_ids
    assert a.special_token_ids == b.special_token_ids
    assert a.added_token_ids == b.added_token_ids
    assert a.decoded_vocab == b.decoded_vocab
    assert a.encoded_vocab == b.encoded_vocab
    assert a.dump_metadata() == b.dump_metadata()


@pytest.mark.parametrize(
    "info",
    [
        small_tokenizer_info(),
        xgr.TokenizerInfo([]),
        xgr.TokenizerInfo([b"\x00", b"a", b"</s>"], vocab_type=xgr.VocabType.RAW, vocab_size=4,
                          stop_token_ids=[2]),
        # Text and bytes tokens mixed; control characters, non-BMP text, explicit special
        # and added tokens, padding ids past the vocabulary.
        xgr.TokenizerInfo(["\x00\n\"\\", b"\xff\xfe", "😊", "<|eot|>", "<x>", "ab"],
                          vocab_type=xgr.VocabType.RAW, vocab_size=9, stop_token_ids=[3],
                          special_token_ids=[3], added_token_ids=[4]),
        xgr.TokenizerInfo(["<unk>", "<0x0A>", "▁a", "b"], vocab_type=xgr.VocabType.BYTE_FALLBACK,
                          stop_token_ids=[]),
    ],
    ids=["small", "empty", "bytes", "mixed", "byte_fallback"],
)
def test_tokenizer_info_roundtrip(info):
    text = info.serialize_json()
    recovered = xgr.TokenizerInfo.deserialize_json(text)
    assert_same_tokenizer_info(info, recovered)
    assert recovered.serialize_json() == text
    assert text.isascii()


def test_bytes_tokens_are_base64():
    info = xgr.TokenizerInfo([b"\x00", "a", b"\xff"], vocab_type=xgr.VocabType.RAW)
    vocab = json.loads(info.serialize_json())["encoded_vocab"]
    assert vocab == [{"b64": "AA=="}, "a", {"b64": "/w=="}]


def test_tokenizer_info_token_masks_after_roundtrip():
    info = xgr.TokenizerInfo(
        [b"\x00", b"a", b"</s>"], vocab_type=xgr.VocabType.RAW, vocab_size=4, stop_token_ids=[2]
    )
    recovered = xgr.TokenizerInfo.deserialize_json(info.serialize_json())
    grammar = xgr.Grammar.from_ebnf("root ::= Token(1)\n")
    compiled = xgr.GrammarCompiler(recovered, cache_enabled=False).compile_grammar(grammar)
    matcher = xgr.GrammarMatcher(compiled)
    mask = xgr.allocate_token_bitmask(1, recovered.vocab_size)
    matcher.fill_next_token_bitmask(mask)
    assert xgr.testing._get_masked_tokens_from_bitmask(mask, recovered.vocab_size) == [0, 2, 3]


@requires_data
@pytest.mark.parametrize("name", ["llama-3.1", "llama-2", "gpt-oss"])
def test_real_tokenizer_info_roundtrip(name):
    info = xgr.TokenizerInfo.from_canonical_json(canonical_path(name))
    text = info.serialize_json()
    recovered = xgr.TokenizerInfo.deserialize_json(text)
    assert_same_tokenizer_info(info, recovered)
    assert recovered.serialize_json() == text


# ---- CompiledGrammar ------------------------------------------------------------------------


def test_compiled_grammar_payload_fields():
    compiled, info = small_compiled()
    payload = json.loads(compiled.serialize_json())
    assert payload["__VERSION__"] == SERIALIZATION_VERSION
    assert payload["__TYPE__"] == "CompiledGrammar"
    assert payload["grammar"] == {
        "root_rule_name": "root_rule",
        "ebnf": str(small_grammar()),
        "warnings": [],
    }
    assert payload["tokenizer_metadata"] == {
        "vocab_type": 1,
        "vocab_size": 10,
        "add_prefix_space": True,
        "stop_token_ids": [0, 1],
    }
    assert payload["tokenizer_digest"].startswith("sha256:")
    assert "encoded_vocab" not in json.dumps(payload)  # the vocabulary is not repeated


def test_compiled_grammar_roundtrip():
    compiled, info = small_compiled()
    text = compiled.serialize_json()
    recovered = xgr.CompiledGrammar.deserialize_json(text, info)
    assert recovered.serialize_json() == text
    assert recovered.tokenizer_info is info
    assert str(recovered.grammar) == str(compiled.grammar)
    # A deserialized tokenizer info is the same tokenizer.
    info2 = xgr.TokenizerInfo.deserialize_json(info.serialize_json())
    assert xgr.CompiledGrammar.deserialize_json(text, info2).serialize_json() == text


def test_compiled_grammar_functional():
    compiled, info = small_compiled()
    recovered = xgr.CompiledGrammar.deserialize_json(compiled.serialize_json(), info)
    m1, m2 = xgr.GrammarMatcher(compiled), xgr.GrammarMatcher(recovered)
    b1 = xgr.allocate_token_bitmask(1, info.vocab_size)
    b2 = xgr.allocate_token_bitmask(1, info.vocab_size)
    assert m1.fill_next_token_bitmask(b1) == m2.fill_next_token_bitmask(b2)
    assert np.array_equal(np.asarray(b1), np.asarray(b2))
    assert m1.accept_string("aaa") == m2.accept_string("aaa")
    assert m1.is_terminated() == m2.is_terminated()


@pytest.mark.filterwarnings("ignore:JSON schema:UserWarning")
def test_compiled_grammar_keeps_warnings():
    schema = {"type": "object", "properties": {"v": {"type": "string", "format": "semver"}}}
    info = small_tokenizer_info()
    compiled = xgr.GrammarCompiler(info).compile_json_schema(schema)
    recovered = xgr.CompiledGrammar.deserialize_json(compiled.serialize_json(), info)
    assert recovered.grammar.warnings
    assert getattr(recovered, "warnings", ()) == getattr(compiled, "warnings", ())


def _walk_masks(compiled, vocab_size, seed, steps=32):
    """Token bitmasks along a seeded random walk through allowed tokens (stop tokens last,
    whitespace-only tokens only when nothing else is allowed, so the walk gets somewhere),
    and the tokens taken."""
    rng = np.random.default_rng(seed)
    matcher = xgr.GrammarMatcher(compiled)
    decoded = compiled.tokenizer_info.decoded_vocab
    stops = set(compiled.tokenizer_info.stop_token_ids)
    stops.update(i for i, d in enumerate(decoded) if not d.strip())
    mask = xgr.allocate_token_bitmask(1, vocab_size)
    masks, taken = [], []
    for _ in range(steps):
        if matcher.is_terminated():
            break
        matcher.fill_next_token_bitmask(mask)
        row = np.asarray(mask).copy()
        masks.append(row)
        allowed = xgr.testing._get_allowed_tokens_from_bitmask(mask, vocab_size)
        assert allowed, "a walk reached a dead end"
        text_tokens = [t for t in allowed if t not in stops]
        token = int(rng.choice(text_tokens)) if text_tokens else int(allowed[0])
        assert matcher.accept_token(token)
        taken.append(token)
    return masks, taken


def _replay_masks(compiled, vocab_size, tokens):
    matcher = xgr.GrammarMatcher(compiled)
    mask = xgr.allocate_token_bitmask(1, vocab_size)
    masks = []
    for token in tokens:
        matcher.fill_next_token_bitmask(mask)
        masks.append(np.asarray(mask).copy())
        assert matcher.accept_token(token)
    return masks


@requires_data
@pytest.mark.parametrize("name", ["llama-3.1", "llama-2", "gpt-oss"])
def test_deserialized_masks_equal_original(name):
    """The masks of a deserialized compiled grammar equal the original's, step by step along
    walks, for grammars compiled every way (through the cache's rebuild path, regex,
    builtin JSON, a linked structural tag, EBNF text)."""
    info = xgr.TokenizerInfo.from_canonical_json(canonical_path(name))
    # As a server would: the tokenizer info shipped separately, as JSON.
    info_loaded = xgr.TokenizerInfo.deserialize_json(info.serialize_json())
    compiler = xgr.GrammarCompiler(info)
    tag = {
        "type": "structural_tag",
        "format": {
            "type": "triggered_tags",
            "triggers": ["<tool="],
            "tags": [
                {"begin": "<tool=a>", "content": {"type": "json_schema", "json_schema": SCHEMA},
                 "end": "</tool>"},
                {"begin": "<tool=b>", "content": {"type": "json_schema",
                                                   "json_schema": {"type": "integer"}},
                 "end": "</tool>"},
            ],
        },
    }
    compiled_all = [
        compiler.compile_json_schema(SCHEMA),
        compiler.compile_json_schema(SCHEMA, any_whitespace=False),
        compiler.compile_regex(r"[a-z]{1,6}( [0-9]+)?\.?"),
        compiler.compile_builtin_json_grammar(),
        compiler.compile_structural_tag(json.dumps(tag)),
        compiler.compile_grammar('root ::= "yes" | "no" | "maybe" [!?]*'),
    ]
    for k, compiled in enumerate(compiled_all):
        recovered = xgr.CompiledGrammar.deserialize_json(compiled.serialize_json(), info_loaded)
        for seed in (k, 100 + k):
            masks, tokens = _walk_masks(compiled, info.vocab_size, seed)
            assert len(masks) >= 2
            again = _replay_masks(recovered, info.vocab_size, tokens)
            for step, (a, b) in enumerate(zip(masks, again)):
                assert np.array_equal(a, b), f"grammar {k}, seed {seed}: step {step} differs"


# ---- errors ---------------------------------------------------------------------------------


def _payloads():
    compiled, info = small_compiled()
    return {
        "Grammar": small_grammar().serialize_json(),
        "TokenizerInfo": info.serialize_json(),
        "CompiledGrammar": compiled.serialize_json(),
    }, info


def _deserialize(kind, text, info=None):
    if kind == "Grammar":
        return xgr.Grammar.deserialize_json(text)
    if kind == "TokenizerInfo":
        return xgr.TokenizerInfo.deserialize_json(text)
    return xgr.CompiledGrammar.deserialize_json(text, info or small_tokenizer_info())


KINDS = ["Grammar", "TokenizerInfo", "CompiledGrammar"]


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize(
    "text", ["not a valid json string", "", "{", '{"a": 1,}', "[1, 2", "nan?", b"\xff\xfe{"],
    ids=["words", "empty", "open_brace", "trailing_comma", "open_array", "junk", "bad_utf8"],
)
def test_invalid_json(kind, text):
    with pytest.raises(xgr.InvalidJSONError):
        _deserialize(kind, text)


@pytest.mark.parametrize("kind", KINDS)
def test_too_deep_json_is_invalid_json(kind):
    with xgr.max_recursion_depth(50):
        with pytest.raises(xgr.InvalidJSONError, match="Maximum recursion depth exceeded"):
            _deserialize(kind, "[" * 60 + "]" * 60)
    # Beyond Python's own recursion limit too: refused before parsing, not a RecursionError.
    with pytest.raises(xgr.InvalidJSONError, match="Maximum recursion depth exceeded"):
        _deserialize(kind, "[" * 100000 + "]" * 100000)


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("text", ["[1]", "1", '"x"', "null", "true"])
def test_not_an_object(kind, text):
    with pytest.raises(xgr.DeserializeFormatError, match="expected a JSON object"):
        _deserialize(kind, text)


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("version", [None, "v16", "v1", "xgrammar2-v0", "xgrammar2-v2", 1, ""])
def test_wrong_version(kind, version):
    payloads, info = _payloads()
    obj = json.loads(payloads[kind])
    if version is None:
        del obj["__VERSION__"]
    else:
        obj["__VERSION__"] = version
    with pytest.raises(xgr.DeserializeVersionError):
        _deserialize(kind, json.dumps(obj), info)


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("other", KINDS)
def test_payload_of_another_type(kind, other):
    if kind == other:
        return
    payloads, info = _payloads()
    with pytest.raises(xgr.DeserializeFormatError, match="__TYPE__"):
        _deserialize(kind, payloads[other], info)


@pytest.mark.parametrize("kind", KINDS)
def test_missing_type(kind):
    payloads, info = _payloads()
    obj = json.loads(payloads[kind])
    del obj["__TYPE__"]
    with pytest.raises(xgr.DeserializeFormatError):
        _deserialize(kind, json.dumps(obj), info)


FIELDS = {
    "Grammar": ["root_rule_name", "ebnf", "warnings"],
    "TokenizerInfo": ["vocab_type", "vocab_size", "add_prefix_space", "stop_token_ids",
                      "special_token_ids", "added_token_ids", "encoded_vocab"],
    "CompiledGrammar": ["grammar", "tokenizer_metadata", "tokenizer_digest"],
}


@pytest.mark.parametrize(
    "kind, field",
    [(kind, field) for kind in KINDS for field in FIELDS[kind]],
)
def test_missing_field(kind, field):
    payloads, info = _payloads()
    obj = json.loads(payloads[kind])
    assert sorted(k for k in obj if not k.startswith("__")) == sorted(FIELDS[kind])
    del obj[field]
    with pytest.raises(xgr.DeserializeFormatError, match=field):
        _deserialize(kind, json.dumps(obj), info)


def test_unknown_fields_are_ignored():
    # As upstream: extra members do not make a payload invalid.
    payloads, info = _payloads()
    for kind in KINDS:
        obj = json.loads(payloads[kind])
        obj["comment"] = "added by a tool"
        _deserialize(kind, json.dumps(obj), info)


def _set_path(obj, path, value):
    for key in path[:-1]:
        obj = obj[key]
    obj[path[-1]] = value


@pytest.mark.parametrize(
    "path, value",
    [
        (["ebnf"], 5),
        (["ebnf"], 'root ::= "a'),  # syntax error
        (["ebnf"], "root ::= undefined_rule"),  # semantic error
        (["ebnf"], ""),
        (["root_rule_name"], "no_such_rule"),
        (["root_rule_name"], ""),
        (["root_rule_name"], None),
        (["warnings"], "w"),
        (["warnings"], [1]),
    ],
    ids=["ebnf_int", "ebnf_syntax", "ebnf_undefined_rule", "ebnf_empty", "root_unknown",
         "root_empty", "root_null", "warnings_str", "warnings_int"],
)
def test_corrupted_grammar(path, value):
    obj = json.loads(small_grammar().serialize_json())
    _set_path(obj, path, value)
    with pytest.raises(xgr.DeserializeFormatError):
        xgr.Grammar.deserialize_json(json.dumps(obj))


@pytest.mark.parametrize(
    "path, value",
    [
        (["vocab_type"], 7),
        (["vocab_type"], True),
        (["vocab_type"], "RAW"),
        (["vocab_size"], 3),  # smaller than the vocabulary
        (["vocab_size"], "10"),
        (["vocab_size"], -1),
        (["vocab_size"], 2**40),
        (["add_prefix_space"], 1),
        (["stop_token_ids"], [10**6]),
        (["stop_token_ids"], [-1]),
        (["stop_token_ids"], [True]),
        (["stop_token_ids"], 0),
        (["special_token_ids"], [-1]),
        (["added_token_ids"], [100]),
        (["encoded_vocab"], "abc"),
        (["encoded_vocab", 0], 5),
        (["encoded_vocab", 0], {"b64": "!!"}),
        (["encoded_vocab", 0], {"b64": 5}),
        (["encoded_vocab", 0], {"hex": "00"}),
        (["encoded_vocab", 0], None),
    ],
    ids=["vocab_type_unknown", "vocab_type_bool", "vocab_type_str", "vocab_size_small",
         "vocab_size_str", "vocab_size_negative", "vocab_size_huge", "add_prefix_space_int",
         "stop_out_of_range", "stop_negative", "stop_bool", "stop_not_list",
         "special_negative", "added_out_of_range", "vocab_str", "token_int", "token_bad_b64",
         "token_b64_int", "token_unknown_key", "token_null"],
)
def test_corrupted_tokenizer_info(path, value):
    obj = json.loads(small_tokenizer_info().serialize_json())
    _set_path(obj, path, value)
    with pytest.raises(xgr.DeserializeFormatError):
        xgr.TokenizerInfo.deserialize_json(json.dumps(obj))


@pytest.mark.parametrize(
    "path, value",
    [
        (["grammar"], "root ::= \"a\""),
        (["grammar", "ebnf"], 'root ::= "a'),
        (["grammar", "root_rule_name"], "nope"),
        (["tokenizer_metadata"], []),
        (["tokenizer_metadata"], {}),
        (["tokenizer_metadata", "vocab_size"], 11),
        (["tokenizer_metadata", "vocab_type"], 0),
        (["tokenizer_metadata", "add_prefix_space"], False),
        (["tokenizer_metadata", "stop_token_ids"], [0]),
        (["tokenizer_metadata", "vocab_size"], 10.0),
        (["tokenizer_digest"], "sha256:0"),
        (["tokenizer_digest"], None),
    ],
    ids=["grammar_str", "grammar_syntax", "grammar_root", "metadata_list", "metadata_empty",
         "vocab_size",
         "vocab_type", "add_prefix_space", "stop_token_ids", "vocab_size_float", "digest",
         "digest_null"],
)
def test_corrupted_compiled_grammar(path, value):
    compiled, info = small_compiled()
    obj = json.loads(compiled.serialize_json())
    _set_path(obj, path, value)
    with pytest.raises(xgr.DeserializeFormatError):
        xgr.CompiledGrammar.deserialize_json(json.dumps(obj), info)


def test_compiled_grammar_refuses_another_tokenizer():
    compiled, info = small_compiled()
    text = compiled.serialize_json()
    # Different metadata (upstream refuses these too) ...
    other = xgr.TokenizerInfo(["a", "b"], vocab_type=xgr.VocabType.RAW, vocab_size=3)
    with pytest.raises(xgr.DeserializeFormatError, match="vocab_type"):
        xgr.CompiledGrammar.deserialize_json(text, other)
    # ... and the same metadata over another vocabulary (upstream accepts that one, and its
    # masks would then be wrong).
    same_meta = xgr.TokenizerInfo(
        ["1", "212", "a", "A", "b", "二", "-", "aBc", "abc"],
        vocab_type=xgr.VocabType.BYTE_FALLBACK,
        vocab_size=10,
        stop_token_ids=[0, 1],
        add_prefix_space=True,
    )
    with pytest.raises(xgr.DeserializeFormatError, match="not the one"):
        xgr.CompiledGrammar.deserialize_json(text, same_meta)
    with pytest.raises(TypeError):
        xgr.CompiledGrammar.deserialize_json(text, None)


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("value", [None, 5, ["{}"]])
def test_not_a_string(kind, value):
    with pytest.raises(TypeError):
        _deserialize(kind, value)


def test_errors_are_catchable_as_upstream_names():
    # Code written against upstream catches these names (RuntimeError subclasses there).
    with pytest.raises(RuntimeError):
        xgr.Grammar.deserialize_json("{")
    with pytest.raises(RuntimeError):
        xgr.Grammar.deserialize_json('{"__VERSION__": "v16"}')
    with pytest.raises(RuntimeError):
        xgr.Grammar.deserialize_json(json.dumps({"__VERSION__": SERIALIZATION_VERSION}))


def test_hand_written_foreign_payload():
    # Shaped like upstream's grammar JSON (no __TYPE__, upstream's members).
    foreign = {"rules": [], "grammar_expr_data": [], "root_rule_id": 0, "__VERSION__": "v16"}
    with pytest.raises(xgr.DeserializeVersionError, match="upstream"):
        xgr.Grammar.deserialize_json(json.dumps(foreign))


@requires_upstream
def test_upstream_payloads_refused_both_ways():
    up_info = upstream.TokenizerInfo(["a", "b", "</s>"], vocab_type=upstream.VocabType.RAW,
                                     stop_token_ids=[2])
    up_grammar = upstream.Grammar.from_ebnf('root ::= "a" "b"')
    up_compiled = upstream.GrammarCompiler(up_info).compile_grammar(up_grammar)
    info = xgr.TokenizerInfo(["a", "b", "</s>"], vocab_type=xgr.VocabType.RAW, stop_token_ids=[2])
    grammar = xgr.Grammar.from_ebnf('root ::= "a" "b"')
    compiled = xgr.GrammarCompiler(info).compile_grammar(grammar)

    with pytest.raises(xgr.DeserializeVersionError):
        xgr.Grammar.deserialize_json(up_grammar.serialize_json())
    with pytest.raises(xgr.DeserializeVersionError):
        xgr.TokenizerInfo.deserialize_json(up_info.serialize_json())
    with pytest.raises(xgr.DeserializeVersionError):
        xgr.CompiledGrammar.deserialize_json(up_compiled.serialize_json(), info)

    # Upstream refuses ours with its own version error.
    with pytest.raises(upstream.DeserializeVersionError):
        upstream.Grammar.deserialize_json(grammar.serialize_json())
    with pytest.raises(upstream.DeserializeVersionError):
        upstream.TokenizerInfo.deserialize_json(info.serialize_json())
    with pytest.raises(upstream.DeserializeVersionError):
        upstream.CompiledGrammar.deserialize_json(compiled.serialize_json(), up_info)


@requires_upstream
def test_same_error_classes_as_upstream():
    """The same bad inputs raise the same-named error class in both."""
    ours = {"Grammar": small_grammar().serialize_json()}
    theirs = {"Grammar": upstream.Grammar.from_ebnf('root ::= "a"').serialize_json()}
    cases = {
        "invalid_json": lambda payload: "not a valid json string",
        "missing_version": lambda payload: json.dumps(
            {k: v for k, v in json.loads(payload).items() if k != "__VERSION__"}),
        "wrong_version": lambda payload: json.dumps(dict(json.loads(payload), __VERSION__="v1")),
        "other_type": None,
    }
    for name, make in cases.items():
        if make is None:
            ours_text = small_tokenizer_info().serialize_json()
            theirs_text = upstream.TokenizerInfo(["a"]).serialize_json()
        else:
            ours_text, theirs_text = make(ours["Grammar"]), make(theirs["Grammar"])
        with pytest.raises(Exception) as ours_err:
            xgr.Grammar.deserialize_json(ours_text)
        with pytest.raises(Exception) as theirs_err:
            upstream.Grammar.deserialize_json(theirs_text)
        assert type(ours_err.value).__name__ == type(theirs_err.value).__name__, name


def test_subprocess_roundtrip():
    """A payload written by one process loads in another (no state shared through the
    process, e.g. a cache or an id)."""
    compiled, info = small_compiled()
    script = (
        "import sys, xgrammar2 as xgr\n"
        "info = xgr.TokenizerInfo.deserialize_json(sys.argv[1])\n"
        "cg = xgr.CompiledGrammar.deserialize_json(sys.argv[2], info)\n"
        "m = xgr.GrammarMatcher(cg)\n"
        "print(m.accept_string('xya'), m.is_terminated() or m.accept_token(0))\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", script, info.serialize_json(), compiled.serialize_json()],
        capture_output=True, text=True, timeout=120,
    )
    assert out.returncode == 0, out.stderr[-2000:]
    assert out.stdout.split() == ["True", "True"]


def test_b64_padding_is_validated():
    info = xgr.TokenizerInfo([b"ab"], vocab_type=xgr.VocabType.RAW)
    obj = json.loads(info.serialize_json())
    assert obj["encoded_vocab"][0] == {"b64": base64.b64encode(b"ab").decode()}
    obj["encoded_vocab"][0] = {"b64": "YWI"}  # missing padding
    with pytest.raises(xgr.DeserializeFormatError):
        xgr.TokenizerInfo.deserialize_json(json.dumps(obj))


def test_tokenizer_info_payload_with_huge_vocab_size_is_refused():
    """A payload is outside input: a vocab_size far past its vocabulary is a format error,
    not a giant allocation."""
    import json

    payload = json.loads(xgr.TokenizerInfo(["a", "b"]).serialize_json())
    payload["vocab_size"] = 10**12
    with pytest.raises(xgr.exception.DeserializeFormatError, match="vocab_size"):
        xgr.TokenizerInfo.deserialize_json(json.dumps(payload))
    payload["vocab_size"] = 2 + 64  # ordinary padding still loads
    assert xgr.TokenizerInfo.deserialize_json(json.dumps(payload)).vocab_size == 66


def test_matcher_from_grammar_matches_strings():
    from xgrammar2.testing import _get_matcher_from_grammar

    m = _get_matcher_from_grammar('root ::= "ab" | "cd"')
    assert m.accept_string("ab") and m.is_completed()
    assert not _get_matcher_from_grammar(xgr.Grammar.from_ebnf('root ::= "ab"')).accept_string("x")
