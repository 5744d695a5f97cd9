"""TokenizerInfo: decoding of real vocabularies, metadata detection and validation.

These tests need no C core: decoding is pure Python and the core's vocabulary handle is built
only when a grammar is compiled.
"""

import base64
import functools
import json
import subprocess
import sys

import pytest

import xgrammar2 as xgr
from xgrammar2.tokenizer_info import _BYTE_TO_UNICODE

from pyapi_helpers import TOKENIZERS, canonical_path, load_hf_tokenizer, requires_data

HF_NAMES = [
    "llama-3-instruct",
    "qwen3",
    "deepseek-v3",
    "smollm2-135m-instruct",
    "mistral-7b-v0.1",
    "gpt-oss",
]
BYTE_LEVEL_NAMES = [n for n in HF_NAMES if n != "mistral-7b-v0.1"]

SAMPLE_TEXTS = [
    "Hello world",
    " leading space and  double  spaces",
    "tabs\tand\nnewlines\r\n\n\n",
    'JSON: {"a": [1, 2.5e-3, true, null], "b": "\\u00e9\\n"}',
    "Äpfel, Straße, naïve café — “quotes” …",
    "нещо на Български, ελληνικά, עברית, العربية",
    "中文分词测试，日本語のテキスト、한국어 텍스트",
    "emoji 🦙🚀👩‍👩‍👧 and flags 🇫🇷 plus rare 𝔘𝔫𝔦𝔠𝔬𝔡𝔢",
    "def f(x):\n    return x ** 2  # comment\n",
    "\x00\x01 control \x7f chars \u00a0nbsp\u200b",
    "   ",
    "1234567890 3.14159 -42",
]


# ---- helpers ----------------------------------------------------------------------------------


@functools.lru_cache(maxsize=None)
def _info_from_hf(name):
    tok = load_hf_tokenizer(name)
    return tok, xgr.TokenizerInfo.from_huggingface(tok)


def _added(tok):
    return {int(i): t for i, t in tok.get_added_tokens_decoder().items()}


# ---- the byte-level alphabet --------------------------------------------------------------


def test_byte_level_alphabet_matches_tokenizers():
    pre_tokenizers = pytest.importorskip("tokenizers.pre_tokenizers")
    assert sorted(pre_tokenizers.ByteLevel.alphabet()) == sorted(_BYTE_TO_UNICODE.values())
    assert _BYTE_TO_UNICODE[ord(" ")] == "Ġ"
    assert _BYTE_TO_UNICODE[ord("\n")] == "Ċ"
    assert len(set(_BYTE_TO_UNICODE.values())) == 256


def test_decode_rules_small():
    info = xgr.TokenizerInfo(
        ["Ġhello", "Ċ", "Ã©", "<|x|>", "ï½ľ", "Ã"], xgr.VocabType.BYTE_LEVEL, stop_token_ids=[3]
    )
    assert info.decoded_vocab == [b" hello", b"\n", "é".encode(), b"<|x|>", "｜".encode(), b"\xc3"]

    info = xgr.TokenizerInfo(
        ["<unk>", "<0x0A>", "<0xE2>", "▁the", "▁▁", "a▁b"],
        xgr.VocabType.BYTE_FALLBACK,
        special_token_ids=[0],
        stop_token_ids=[],
    )
    assert info.decoded_vocab == [b"", b"\n", b"\xe2", b" the", b"  ", b"a b"]
    assert info.special_token_ids == [0]

    info = xgr.TokenizerInfo(["abc", b"\xff\xfe", "Ġ"], xgr.VocabType.RAW, stop_token_ids=[])
    assert info.decoded_vocab == [b"abc", b"\xff\xfe", "Ġ".encode()]


def test_added_tokens_are_literal():
    # "ä" is in the byte alphabet (byte 0xE4) but as an added token it is literal text.
    info = xgr.TokenizerInfo(
        ["ä", "ä", "<ctrl>"],
        xgr.VocabType.BYTE_LEVEL,
        added_token_ids=[1, 2],
        special_token_ids=[2],
        stop_token_ids=[2],
    )
    assert info.decoded_vocab == [b"\xe4", "ä".encode(), b""]
    assert info.special_token_ids == [2]
    assert info.added_token_ids == [1, 2]
    assert info.stop_token_ids == [2]


def test_special_tokens_decode_empty_and_padding_is_special():
    info = xgr.TokenizerInfo(
        ["a", "b", "<|im_end|>", ""], xgr.VocabType.BYTE_LEVEL, vocab_size=8, special_token_ids=[2]
    )
    assert info.decoded_vocab == [b"a", b"b", b"", b""]
    # explicit special, empty token, and the padding ids [4, 8)
    assert info.special_token_ids == [2, 3, 4, 5, 6, 7]
    assert info.vocab_size == 8


def test_stop_token_autodetection_prefers_control_tokens():
    vocab = ["</s>", "a", "<|endoftext|>"]
    info = xgr.TokenizerInfo(vocab, xgr.VocabType.BYTE_LEVEL)
    assert info.stop_token_ids == [0, 2]
    info = xgr.TokenizerInfo(vocab, xgr.VocabType.BYTE_LEVEL, added_token_ids=[2])
    assert info.stop_token_ids == [2]
    assert xgr.TokenizerInfo(["a"], stop_token_ids=0).stop_token_ids == [0]


# ---- validation -------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "kwargs, message",
    [
        (dict(encoded_vocab=["a", "b", "c"], vocab_size=2), "smaller than"),
        (dict(encoded_vocab=["a", "b"], stop_token_ids=[2]), "stop_token_ids"),
        (dict(encoded_vocab=["a", "b"], stop_token_ids=[-1]), "stop_token_ids"),
        (dict(encoded_vocab=["a", "b"], vocab_size=4, stop_token_ids=[4]), "outside"),
        (dict(encoded_vocab=["a", "b"], special_token_ids=[5]), "special_token_ids"),
        (dict(encoded_vocab=["a"], vocab_type="nonsense"), "vocab_type"),
        (dict(encoded_vocab=["a", b"\xff"], vocab_type=xgr.VocabType.BYTE_LEVEL), "token 1"),
    ],
)
def test_validation_errors(kwargs, message):
    with pytest.raises(ValueError, match=message):
        xgr.TokenizerInfo(**kwargs)


def test_validation_type_errors():
    with pytest.raises(TypeError):
        xgr.TokenizerInfo("abc")
    with pytest.raises(TypeError):
        xgr.TokenizerInfo(["a", 3])
    with pytest.raises(TypeError):
        xgr.TokenizerInfo(["a"], vocab_size=2.0)


def test_vocab_type_values_match_upstream():
    assert [(v.name, v.value) for v in xgr.VocabType] == [
        ("RAW", 0),
        ("BYTE_FALLBACK", 1),
        ("BYTE_LEVEL", 2),
    ]
    info = xgr.TokenizerInfo(["a"], "byte_level", stop_token_ids=[])
    assert info.vocab_type is xgr.VocabType.BYTE_LEVEL
    info = xgr.TokenizerInfo(["a"], 1, stop_token_ids=[])
    assert info.vocab_type is xgr.VocabType.BYTE_FALLBACK


# ---- metadata ---------------------------------------------------------------------------------


def test_metadata_roundtrip():
    vocab = ["<s>", "</s>", "Ġhi", "ä", "<tool>"]
    info = xgr.TokenizerInfo(
        vocab,
        xgr.VocabType.BYTE_LEVEL,
        vocab_size=9,
        stop_token_ids=[1],
        add_prefix_space=True,
        special_token_ids=[0, 1],
        added_token_ids=[0, 1, 3, 4],
    )
    meta = json.loads(info.dump_metadata())
    assert meta["vocab_type"] == 2 and meta["vocab_size"] == 9
    assert meta["add_prefix_space"] is True and meta["stop_token_ids"] == [1]
    again = xgr.TokenizerInfo.from_vocab_and_metadata(vocab, info.dump_metadata())
    assert again.decoded_vocab == info.decoded_vocab
    assert again.special_token_ids == info.special_token_ids
    assert again.stop_token_ids == info.stop_token_ids
    assert again.vocab_size == 9 and again.add_prefix_space


def test_pickle_roundtrip():
    import pickle

    info = xgr.TokenizerInfo(
        ["<s>", "Ġa", "ä"], xgr.VocabType.BYTE_LEVEL, vocab_size=5, stop_token_ids=[0],
        special_token_ids=[0], added_token_ids=[2],
    )
    again = pickle.loads(pickle.dumps(info))
    assert again.decoded_vocab == info.decoded_vocab == [b"", b" a", "ä".encode()]
    assert again.special_token_ids == info.special_token_ids
    assert again.stop_token_ids == [0] and again.vocab_size == 5


def test_upstream_metadata_string_is_accepted():
    meta = '{"vocab_type":1,"vocab_size":6,"add_prefix_space":true,"stop_token_ids":[2]}'
    info = xgr.TokenizerInfo.from_vocab_and_metadata(["<unk>", "<s>", "</s>", "▁a", "<0x41>"], meta)
    assert info.vocab_type is xgr.VocabType.BYTE_FALLBACK
    assert info.decoded_vocab[3:] == [b" a", b"A"]
    assert info.stop_token_ids == [2] and info.vocab_size == 6 and info.add_prefix_space
    with pytest.raises(ValueError, match="JSON"):
        xgr.TokenizerInfo.from_vocab_and_metadata(["a"], "{not json")
    with pytest.raises(ValueError, match="vocab_type"):
        xgr.TokenizerInfo.from_vocab_and_metadata(["a"], '{"vocab_size": 1}')


# ---- real tokenizers: id -> bytes against the tokenizer's own decoding -------------------------


@requires_data
@pytest.mark.parametrize("name", BYTE_LEVEL_NAMES)
def test_byte_level_decoding_matches_hf_decode(name):
    tok, info = _info_from_hf(name)
    assert info.vocab_type is xgr.VocabType.BYTE_LEVEL
    decoded = info.decoded_vocab
    special = set(info.special_token_ids)
    ids = [i for i in range(len(decoded)) if i not in special]
    outs = tok.decode_batch([[i] for i in ids], skip_special_tokens=False)
    # The ByteLevel decoder turns invalid UTF-8 into U+FFFD the same way Python does.
    bad = [(i, decoded[i], o) for i, o in zip(ids, outs) if decoded[i].decode("utf-8", "replace") != o]
    assert not bad, bad[:10]
    # Tokens that end mid-character exist and are kept as raw bytes.
    assert any(not _is_utf8(decoded[i]) for i in ids)


@requires_data
@pytest.mark.parametrize("name", HF_NAMES)
def test_special_and_added_tokens(name):
    tok, info = _info_from_hf(name)
    decoded = info.decoded_vocab
    special = set(info.special_token_ids)
    added = _added(tok)
    assert added, "expected added tokens"
    for i, t in added.items():
        if t.special:
            assert i in special and decoded[i] == b"", (i, t.content)
        else:
            assert i not in special and decoded[i] == t.content.encode(), (i, t.content)
    # No regular token is special.
    assert special <= set(added) | {i for i, d in enumerate(decoded) if not d}


@requires_data
@pytest.mark.parametrize("name", HF_NAMES)
def test_encode_then_join_decoded_bytes_roundtrips(name):
    tok, info = _info_from_hf(name)
    decoded = info.decoded_vocab
    for text in SAMPLE_TEXTS:
        ids = tok.encode(text, add_special_tokens=False).ids
        joined = b"".join(decoded[i] for i in ids)
        expected = text
        if info.add_prefix_space and text:
            expected = " " + text
        assert joined == expected.encode("utf-8"), (text, ids)


@requires_data
def test_byte_fallback_decoding_matches_hf_decode_in_context():
    tok, info = _info_from_hf("mistral-7b-v0.1")
    assert info.vocab_type is xgr.VocabType.BYTE_FALLBACK
    assert info.add_prefix_space
    decoded = info.decoded_vocab
    special = set(info.special_token_ids)
    assert special == {0, 1, 2}
    vocab = tok.get_vocab()
    # "<0xNN>" tokens are single bytes.
    for b in range(256):
        assert decoded[vocab[f"<0x{b:02X}>"]] == bytes([b])
    # Every other token, decoded after a plain "a" (the decoder strips one leading space of
    # the whole text, so decode in context and drop the prefix).
    prefix = vocab["a"]
    ids = [i for i in range(len(decoded)) if i not in special and not tok.id_to_token(i).startswith("<0x")]
    outs = tok.decode_batch([[prefix, i] for i in ids], skip_special_tokens=False)
    bad = [(i, decoded[i], o) for i, o in zip(ids, outs) if ("a" + decoded[i].decode("utf-8", "replace")) != o]
    assert not bad, bad[:10]
    # Multi-byte characters spelled with byte tokens.
    ids = tok.encode("🦙 ✓", add_special_tokens=False).ids
    assert any(tok.id_to_token(i).startswith("<0x") for i in ids)
    assert b"".join(decoded[i] for i in ids) == " 🦙 ✓".encode()


@requires_data
@pytest.mark.parametrize(
    "name, vocab_type, add_prefix_space",
    [
        ("llama-3-instruct", xgr.VocabType.BYTE_LEVEL, False),
        ("qwen3", xgr.VocabType.BYTE_LEVEL, False),
        ("mistral-7b-v0.1", xgr.VocabType.BYTE_FALLBACK, True),
    ],
)
def test_detect_metadata_from_serialized_tokenizer(name, vocab_type, add_prefix_space):
    tok = load_hf_tokenizer(name)
    meta = xgr.TokenizerInfo._detect_metadata_from_hf(tok.to_str())
    assert meta == {"vocab_type": vocab_type, "add_prefix_space": add_prefix_space}


# ---- canonical vocabularies -------------------------------------------------------------------


@requires_data
@pytest.mark.parametrize("name", HF_NAMES)
def test_canonical_matches_hf(name):
    tok, info = _info_from_hf(name)
    canon = xgr.TokenizerInfo.from_canonical_json(canonical_path(name))
    assert canon.vocab_type is info.vocab_type
    assert canon.vocab_size == info.vocab_size
    assert canon.decoded_vocab == info.decoded_vocab
    assert canon.special_token_ids == info.special_token_ids
    raw = json.loads(canonical_path(name).read_text(encoding="utf-8"))
    assert canon.stop_token_ids == raw["eos_ids"]


@requires_data
@pytest.mark.parametrize(
    "name", ["llama-3.1", "qwen2.5", "gpt2", "llama-2", "smollm2-135m-instruct"]
)
def test_canonical_loads(name):
    path = canonical_path(name)
    raw = json.loads(path.read_text(encoding="utf-8"))
    info = xgr.TokenizerInfo.from_canonical_json(path, vocab_size=raw["num_tokens"] + 64)
    assert info.vocab_size == raw["num_tokens"] + 64
    assert len(info.decoded_vocab) == raw["num_tokens"]
    assert info.stop_token_ids == raw["eos_ids"]
    special = set(info.special_token_ids)
    assert set(raw["special_ids"]) <= special
    assert set(range(raw["num_tokens"], raw["num_tokens"] + 64)) <= special
    # Non-special added tokens keep their literal text.
    for i in set(raw["added_ids"]) - set(raw["special_ids"]):
        assert info.decoded_vocab[i] == raw["tokens"][i].encode()


def _tiktoken_ranks(path):
    ranks = {}
    with open(path, "rb") as f:
        for line in f:
            if line.strip():
                token, rank = line.split()
                ranks[int(rank)] = base64.b64decode(token)
    return [ranks[i] for i in range(len(ranks))]


@requires_data
@pytest.mark.parametrize(
    "canonical, tiktoken_file",
    [("llama-3.1", "llama-3.1/tokenizer.model"), ("gpt2", "gpt2/gpt2.tiktoken")],
)
def test_byte_level_decoding_matches_tiktoken_bytes(canonical, tiktoken_file):
    path = TOKENIZERS / "original" / tiktoken_file
    if not path.exists():
        pytest.skip(f"{path} not found")
    ranks = _tiktoken_ranks(path)
    info = xgr.TokenizerInfo.from_canonical_json(canonical_path(canonical))
    decoded = info.decoded_vocab
    assert decoded[: len(ranks)] == ranks
    # The same bytes given as a RAW vocabulary decode to themselves.
    raw = xgr.TokenizerInfo(ranks, xgr.VocabType.RAW, stop_token_ids=[])
    assert raw.decoded_vocab == ranks


def _fixture(stem):
    base = TOKENIZERS / "llama.cpp-test-fixtures" / f"ggml-vocab-{stem}.gguf"
    inp = base.with_name(base.name + ".inp")
    out = base.with_name(base.name + ".out")
    if not inp.exists():
        pytest.skip(f"fixture {stem} not found")
    texts = inp.read_text(encoding="utf-8").split("\n__ggml_vocab_test__\n")
    id_lines = out.read_text(encoding="utf-8").split("\n")
    return texts, id_lines


@requires_data
@pytest.mark.parametrize(
    "canonical, fixture",
    [("llama-3.1", "llama-bpe"), ("qwen2.5", "qwen2"), ("gpt2", "gpt-2"), ("llama-2", "llama-spm")],
)
def test_llama_cpp_reference_tokenizations_decode_to_input(canonical, fixture):
    info = xgr.TokenizerInfo.from_canonical_json(canonical_path(canonical))
    decoded = info.decoded_vocab
    texts, id_lines = _fixture(fixture)
    checked = 0
    for text, line in zip(texts, id_lines):
        ids = [int(x) for x in line.split()]
        joined = b"".join(decoded[i] for i in ids)
        expected = text
        if info.add_prefix_space and text:
            expected = " " + text
        assert joined == expected.encode("utf-8"), (text, ids)
        checked += 1
    assert checked >= 40


# ---- transformers -----------------------------------------------------------------------------


@requires_data
@pytest.mark.parametrize("name", ["qwen3", "mistral-7b-v0.1", "llama-3-instruct"])
def test_from_transformers_tokenizer(name):
    transformers = pytest.importorskip("transformers")
    hf = transformers.AutoTokenizer.from_pretrained(str(TOKENIZERS / "original" / name))
    info = xgr.TokenizerInfo.from_huggingface(hf)
    _, from_backend = _info_from_hf(name)
    assert info.decoded_vocab == from_backend.decoded_vocab
    assert info.vocab_type is from_backend.vocab_type
    eos = hf.eos_token_id
    assert info.stop_token_ids == [eos]
    assert set(from_backend.special_token_ids) <= set(info.special_token_ids)

    # Model vocab larger (padding) and smaller (dropped tokens) than the tokenizer's.
    n = len(info.decoded_vocab)
    padded = xgr.TokenizerInfo.from_huggingface(hf, vocab_size=n + 100)
    assert padded.vocab_size == n + 100 and len(padded.decoded_vocab) == n
    assert set(range(n, n + 100)) <= set(padded.special_token_ids)
    small = xgr.TokenizerInfo.from_huggingface(hf, vocab_size=n - 1, stop_token_ids=[0])
    assert small.vocab_size == n - 1 and len(small.decoded_vocab) == n - 1

    gen = xgr.TokenizerInfo.from_huggingface(hf, generation_config={"eos_token_id": [1, eos]})
    assert gen.stop_token_ids == [1, eos]
    with pytest.raises(ValueError, match="empty"):
        xgr.TokenizerInfo.from_huggingface(hf, stop_token_ids=[])


@requires_data
def test_differential_against_upstream_xgrammar():
    """Regular tokens decode exactly as upstream xgrammar decodes them."""
    up = pytest.importorskip("xgrammar")
    transformers = pytest.importorskip("transformers")
    for name in ["qwen3", "mistral-7b-v0.1"]:
        hf = transformers.AutoTokenizer.from_pretrained(str(TOKENIZERS / "original" / name))
        ours = xgr.TokenizerInfo.from_huggingface(hf)
        theirs = up.TokenizerInfo.from_huggingface(hf)
        assert ours.vocab_type.value == theirs.vocab_type.value
        assert ours.add_prefix_space == theirs.add_prefix_space
        assert ours.stop_token_ids == theirs.stop_token_ids
        special = set(ours.special_token_ids)
        a, b = ours.decoded_vocab, theirs.decoded_vocab
        assert [x for i, x in enumerate(a) if i not in special] == [
            x for i, x in enumerate(b) if i not in special
        ]


def test_unsupported_tokenizer_type():
    with pytest.raises(ValueError, match="Unsupported tokenizer"):
        xgr.TokenizerInfo.from_huggingface(object())


# ---- import cost ------------------------------------------------------------------------------


def test_import_does_not_import_torch_or_transformers():
    code = (
        "import sys, xgrammar2\n"
        "bad = [m for m in ('torch', 'transformers', 'tokenizers', 'pydantic') if m in sys.modules]\n"
        "assert not bad, bad\n"
        "xgrammar2.TokenizerInfo(['a', 'b'], stop_token_ids=[1])\n"
        "assert 'torch' not in sys.modules\n"
    )
    env_path = [p for p in sys.path if p]
    subprocess.run(
        [sys.executable, "-c", code],
        check=True,
        env={"PYTHONPATH": ":".join(env_path), "PATH": "/usr/bin:/bin"},
    )


def _is_utf8(b):
    try:
        b.decode("utf-8")
        return True
    except UnicodeDecodeError:
        return False
