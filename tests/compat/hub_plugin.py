"""pytest plugin for the upstream-compatibility gate: Hugging Face hub names -> local tokenizers.

Loaded with ``-p hub_plugin`` by ``tests/compat/run_upstream_suite.sh`` for both our run and
the ``--reference`` run (real xgrammar), so both see exactly the same tokenizers.

Upstream xgrammar's tests load tokenizers by hub name (``AutoTokenizer.from_pretrained(
"meta-llama/...")``). There is no hub access here, so:

* names listed in ``HUB_TOKENIZERS`` are served from the real vocabularies under
  ``../shared/data/tokenizers`` (materialised once as HF tokenizer folders in a cache
  directory outside the repository); every entry says what it was built from and why that is
  the same tokenizer as the hub one;
* any other hub name skips the test: ``tokenizer not available: NAME``. The same holds for
  ``AutoConfig.from_pretrained`` (``model config not available``) and ``hf_hub_download``
  (``hub file not available``).

Upstream's ``tests/conftest.py`` skips every ``hf_token_required`` test when no HF token is
configured; with local tokenizers the token is not needed, so ``_hf_token_available`` is made
to answer True (unknown names still skip through the rule above). No token is read or set.
"""

from __future__ import annotations

import gzip
import json
import os
import shutil
import sys
import tempfile
import threading
from pathlib import Path

import pytest

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

_REPO = Path(__file__).resolve().parents[2]
DATA = Path(os.environ.get("XGR2_SHARED_DATA", _REPO.parent / "shared" / "data")).resolve()
TOK = DATA / "tokenizers"
TEMPLATES = DATA / "chat_templates"
CACHE = Path(
    os.environ.get(
        "XGR2_COMPAT_TOKENIZERS",
        Path(os.environ.get("XGR2_CACHE", Path.home() / ".cache" / "xgrammar2"))
        / "upstream-compat"
        / "tokenizers",
    )
)
# Bump when a builder changes, so cached folders are rebuilt.
BUILD_VERSION = "2"


# --------------------------------------------------------------------------------------------
# builders: each writes an HF tokenizer folder (tokenizer.json + tokenizer_config.json) to `out`


def _read_json(path: Path):
    with open(path, encoding="utf-8") as f:
        return json.load(f)


def _write_folder(out: Path, tokenizer_json, config: dict, chat_template: str | None = None):
    out.mkdir(parents=True, exist_ok=True)
    if isinstance(tokenizer_json, (str, Path)):
        shutil.copyfile(tokenizer_json, out / "tokenizer.json")
    else:
        with open(out / "tokenizer.json", "w", encoding="utf-8") as f:
            json.dump(tokenizer_json, f, ensure_ascii=False)
    config = dict(config)
    config.pop("chat_template", None)
    if chat_template is not None:
        config["chat_template"] = chat_template
    with open(out / "tokenizer_config.json", "w", encoding="utf-8") as f:
        json.dump(config, f, ensure_ascii=False, indent=1)


def _template(name: str) -> str:
    return (TEMPLATES / name).read_text(encoding="utf-8")


def _llama3_config(eos: str) -> dict:
    # the fields of meta-llama/Llama-3.x tokenizer_config.json other than added_tokens_decoder
    return {
        "bos_token": "<|begin_of_text|>",
        "eos_token": eos,
        "clean_up_tokenization_spaces": True,
        "model_input_names": ["input_ids", "attention_mask"],
        "model_max_length": 131072,
        "tokenizer_class": "PreTrainedTokenizerFast",
    }


def _llama31_tokenizer_json():
    # Llama 3 and Llama 3.1/3.2 share the 128,000 BPE tokens, the pre-tokenizer, the merges and
    # the 256 special ids; 3.1 renamed some reserved specials (<|eom_id|> 128008, <|python_tag|>
    # 128010, <|finetune_right_pad_id|> 128004, reserved_special_token_N renumbered). The names
    # come from canonical/llama-3.1.json, itself built from Meta's tokenizer.model.
    tj = _read_json(TOK / "original" / "llama-3-instruct" / "tokenizer.json")
    names = _read_json(TOK / "canonical" / "llama-3.1.json")["tokens"]
    for tok in tj["added_tokens"]:
        tok["content"] = names[tok["id"]]
    return tj


def build_llama3_instruct(out: Path):
    src = TOK / "original" / "llama-3-instruct"
    _write_folder(out, src / "tokenizer.json", _read_json(src / "tokenizer_config.json"),
                  _read_json(src / "tokenizer_config.json").get("chat_template"))


def build_llama31_instruct(out: Path):
    _write_folder(out, _llama31_tokenizer_json(), _llama3_config("<|eot_id|>"),
                  _template("meta-llama-Llama-3.1-8B-Instruct.jinja"))


def build_llama32_instruct(out: Path):
    _write_folder(out, _llama31_tokenizer_json(), _llama3_config("<|eot_id|>"),
                  _template("meta-llama-Llama-3.2-3B-Instruct.jinja"))


def build_llama32_base(out: Path):
    _write_folder(out, _llama31_tokenizer_json(), _llama3_config("<|end_of_text|>"))


def build_llama2_chat(out: Path):
    # llama.cpp's vocab-only GGUF of meta-llama/Llama-2-7b-hf (same tokenizer.model as the chat
    # model), converted by transformers' own GGUF -> tokenizers converter.
    src = TOK / "original" / "llama-2"
    tok = _ORIGINAL_FROM_PRETRAINED(str(src), gguf_file="ggml-vocab-llama-spm.gguf")
    tok.save_pretrained(str(out))
    cfg_path = out / "tokenizer_config.json"
    cfg = _read_json(cfg_path)
    # meta-llama/Llama-2-7b-chat-hf tokenizer_config.json
    for key in ("backend", "is_local", "local_files_only"):
        cfg.pop(key, None)
    cfg.update({"tokenizer_class": "LlamaTokenizer", "add_bos_token": True, "add_eos_token": False, "bos_token": "<s>",
                "eos_token": "</s>", "unk_token": "<unk>", "pad_token": None,
                "clean_up_tokenization_spaces": False, "legacy": False})
    cfg.pop("chat_template", None)
    with open(cfg_path, "w", encoding="utf-8") as f:
        json.dump(cfg, f, ensure_ascii=False, indent=1)
    for extra in ("chat_template.jinja",):
        (out / extra).unlink(missing_ok=True)


def _qwen_config(eos: str) -> dict:
    cfg = _read_json(TOK / "original" / "qwen3" / "tokenizer_config.json")
    cfg.pop("added_tokens_decoder", None)
    cfg["eos_token"] = eos
    return cfg


def build_qwen3_2507(out: Path):
    # All Qwen3 checkpoints (incl. the 2507 updates) ship the same 151,669-token tokenizer.json;
    # eos_token is <|im_end|> for the instruct/thinking models. No chat template: the 2507
    # template is not in ../shared/data.
    _write_folder(out, TOK / "original" / "qwen3" / "tokenizer.json", _qwen_config("<|im_end|>"))


def build_qwen25_base(out: Path):
    # Qwen2.5 = Qwen3's tokenizer without the 4 tokens Qwen3 appended (151665..151668, see
    # canonical/qwen2.5.json); base checkpoints stop on <|endoftext|>.
    tj = _read_json(TOK / "original" / "qwen3" / "tokenizer.json")
    tj["added_tokens"] = [t for t in tj["added_tokens"] if t["id"] < 151665]
    cfg = _qwen_config("<|endoftext|>")
    _write_folder(out, tj, cfg)


def build_deepseek_v3(out: Path):
    src = TOK / "original" / "deepseek-v3"
    cfg = _read_json(src / "tokenizer_config.json")
    _write_folder(out, src / "tokenizer.json", cfg, cfg.get("chat_template"))


def build_gpt_oss(out: Path):
    src = TOK / "original" / "gpt-oss"
    out.mkdir(parents=True, exist_ok=True)
    with gzip.open(src / "tokenizer.json.gz", "rb") as f, open(out / "tokenizer.json", "wb") as g:
        shutil.copyfileobj(f, g)
    cfg = _read_json(src / "tokenizer_config.json")
    cfg.pop("chat_template", None)
    # openai/gpt-oss-20b and -120b ship the same harmony chat template
    cfg["chat_template"] = _template("openai-gpt-oss-120b.jinja")
    with open(out / "tokenizer_config.json", "w", encoding="utf-8") as f:
        json.dump(cfg, f, ensure_ascii=False, indent=1)


# hub name -> (cache folder, builder, model config facts for AutoConfig, note)
HUB_TOKENIZERS = {
    "meta-llama/Meta-Llama-3-8B-Instruct": (
        "llama-3-instruct", build_llama3_instruct, {"model_type": "llama", "vocab_size": 128256},
        "original/llama-3-instruct (the HF tokenizer.json + tokenizer_config.json)"),
    "meta-llama/Llama-3.1-8B-Instruct": (
        "llama-3.1-instruct", build_llama31_instruct, {"model_type": "llama", "vocab_size": 128256},
        "llama-3-instruct BPE + Llama 3.1 special names + the 3.1 chat template"),
    "meta-llama/Meta-Llama-3.1-8B-Instruct": (
        "llama-3.1-instruct", build_llama31_instruct, {"model_type": "llama", "vocab_size": 128256},
        "hub alias of meta-llama/Llama-3.1-8B-Instruct"),
    "meta-llama/Llama-3.2-1B-Instruct": (
        "llama-3.2-instruct", build_llama32_instruct, {"model_type": "llama", "vocab_size": 128256},
        "Llama 3.1 vocabulary + the Llama 3.2 chat template"),
    "meta-llama/Llama-3.2-1B": (
        "llama-3.2-base", build_llama32_base, {"model_type": "llama", "vocab_size": 128256},
        "Llama 3.1 vocabulary, eos <|end_of_text|>"),
    "meta-llama/Llama-2-7b-chat-hf": (
        "llama-2-chat", build_llama2_chat, {"model_type": "llama", "vocab_size": 32000},
        "original/llama-2 GGUF (Llama-2 tokenizer.model) converted by transformers"),
    "Qwen/Qwen3-235B-A22B-Instruct-2507-FP8": (
        "qwen3-2507", build_qwen3_2507, {"model_type": "qwen3_moe", "vocab_size": 151936},
        "original/qwen3 tokenizer.json, eos <|im_end|>, no chat template"),
    "Qwen/Qwen2.5-0.5B": (
        "qwen2.5-base", build_qwen25_base, {"model_type": "qwen2", "vocab_size": 151936},
        "qwen3 tokenizer.json minus the 4 Qwen3-only tokens, eos <|endoftext|>"),
    "Qwen/Qwen2.5-1.5B": (
        "qwen2.5-base", build_qwen25_base, {"model_type": "qwen2", "vocab_size": 151936},
        "same tokenizer as Qwen/Qwen2.5-0.5B"),
    "deepseek-ai/DeepSeek-V3-0324": (
        "deepseek-v3", build_deepseek_v3, {"model_type": "deepseek_v3", "vocab_size": 129280},
        "original/deepseek-v3 (HF deepseek-ai/DeepSeek-V3 tokenizer files)"),
    "openai/gpt-oss-20b": (
        "gpt-oss", build_gpt_oss, {"model_type": "gpt_oss", "vocab_size": 201088},
        "original/gpt-oss tokenizer.json + the gpt-oss chat template"),
}

_BUILD_LOCK = threading.Lock()


def local_tokenizer_dir(name: str) -> Path:
    folder, builder, _cfg, _note = HUB_TOKENIZERS[name]
    out = CACHE / folder
    stamp = out / ".xgr2-compat-built"
    if stamp.is_file() and stamp.read_text().strip() == BUILD_VERSION:
        return out
    with _BUILD_LOCK:
        if stamp.is_file() and stamp.read_text().strip() == BUILD_VERSION:
            return out
        CACHE.mkdir(parents=True, exist_ok=True)
        tmp = Path(tempfile.mkdtemp(prefix=folder + ".", dir=CACHE))
        try:
            builder(tmp)
            (tmp / ".xgr2-compat-built").write_text(BUILD_VERSION)
            if out.exists():
                shutil.rmtree(out, ignore_errors=True)
            os.replace(tmp, out)
        finally:
            shutil.rmtree(tmp, ignore_errors=True)
    return out


def _is_hub_name(name) -> bool:
    if not isinstance(name, str) or "/" not in name:
        return False
    if os.path.exists(name) or name.startswith((".", "/", "~")):
        return False
    return name.count("/") == 1


_ORIGINAL_FROM_PRETRAINED = None
_ORIGINAL_CONFIG_FROM_PRETRAINED = None
_ORIGINAL_HF_HUB_DOWNLOAD = None
_HUB_KWARGS = ("revision", "token", "use_auth_token", "cache_dir", "force_download",
               "local_files_only", "subfolder", "_from_auto", "trust_remote_code")


def _local_kwargs(kwargs: dict) -> dict:
    out = {k: v for k, v in kwargs.items() if k not in _HUB_KWARGS}
    return out


def _patched_tokenizer_from_pretrained(name, *args, **kwargs):
    if _is_hub_name(name):
        if name not in HUB_TOKENIZERS:
            pytest.skip(f"tokenizer not available: {name}")
        path = local_tokenizer_dir(name)
        return _ORIGINAL_FROM_PRETRAINED(str(path), *args, **_local_kwargs(kwargs))
    return _ORIGINAL_FROM_PRETRAINED(name, *args, **kwargs)


def _patched_config_from_pretrained(name, *args, **kwargs):
    if _is_hub_name(name):
        if name not in HUB_TOKENIZERS:
            pytest.skip(f"model config not available: {name}")
        from transformers import AutoConfig

        facts = dict(HUB_TOKENIZERS[name][2])
        return AutoConfig.for_model(facts.pop("model_type"), **facts)
    return _ORIGINAL_CONFIG_FROM_PRETRAINED(name, *args, **kwargs)


def _patched_hf_hub_download(repo_id, filename=None, *args, **kwargs):
    pytest.skip(f"hub file not available: {repo_id}/{filename}")


def install_patches():
    """Patch transformers / huggingface_hub entry points (idempotent)."""
    global _ORIGINAL_FROM_PRETRAINED, _ORIGINAL_CONFIG_FROM_PRETRAINED, _ORIGINAL_HF_HUB_DOWNLOAD
    if _ORIGINAL_FROM_PRETRAINED is not None:
        return
    import huggingface_hub
    from transformers import AutoConfig, AutoTokenizer

    _ORIGINAL_FROM_PRETRAINED = AutoTokenizer.from_pretrained
    _ORIGINAL_CONFIG_FROM_PRETRAINED = AutoConfig.from_pretrained
    _ORIGINAL_HF_HUB_DOWNLOAD = huggingface_hub.hf_hub_download
    AutoTokenizer.from_pretrained = staticmethod(_patched_tokenizer_from_pretrained)
    AutoConfig.from_pretrained = staticmethod(_patched_config_from_pretrained)
    huggingface_hub.hf_hub_download = _patched_hf_hub_download


def pytest_configure(config):
    if not TOK.is_dir():
        raise pytest.UsageError(f"hub_plugin: tokenizer data not found at {TOK}")
    install_patches()
    # upstream tests/conftest.py: hf_token_required tests run (hub names resolve locally)
    for plugin in config.pluginmanager.get_plugins():
        if getattr(plugin, "_hf_token_available", None) is not None and hasattr(
            plugin, "_hf_token_explicitly_disabled"
        ):
            plugin._hf_token_available = lambda: True
    mod = sys.modules.get("conftest")
    if mod is not None and hasattr(mod, "_hf_token_available"):
        mod._hf_token_available = lambda: True


_TOKENIZER_PARAMS = ("tokenizer_path", "tokenizer_id", "model_id")


@pytest.hookimpl(trylast=True)
def pytest_collection_modifyitems(config, items):
    # Skip up front the tests parametrized by a tokenizer we do not have: test_tokenizer_info
    # loads tokenizers in one test and reads them from a shared dict in the following ones,
    # which would otherwise fail with KeyError instead of skipping.
    for item in items:
        params = getattr(getattr(item, "callspec", None), "params", {})
        for key in _TOKENIZER_PARAMS:
            name = params.get(key)
            if _is_hub_name(name) and name not in HUB_TOKENIZERS:
                item.add_marker(pytest.mark.skip(reason=f"tokenizer not available: {name}"))
                break


def pytest_report_header(config):
    return [f"hub_plugin: {len(HUB_TOKENIZERS)} hub names served from {TOK}, cache {CACHE}"]
