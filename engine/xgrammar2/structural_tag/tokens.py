"""Token-level formats: resolving upstream's token references (an id, or a token string)
against a tokenizer.

A structural tag may name tokens (``{"type": "token", "token": "<|python_tag|>"}``,
``trigger_tokens``, ``exclude_tokens``, a tag's token ``begin`` / ``end``). In the EBNF they
become ``Token(id)`` terminals (see ``csrc/common/token_marker.h``), so strings must be
resolved to ids first, which needs the tokenizer: :meth:`GrammarCompiler.compile_structural_tag`
passes one; :meth:`Grammar.from_structural_tag` has none and accepts ids only.
"""

from typing import Dict, List, Optional

#: Largest id a ``Token(id)`` terminal can carry.
TOKEN_ID_MAX = (1 << 30) - 1


class TokenResolver:
    """Maps token strings to ids and tells text tokens from special ones for one
    tokenizer (built from a :class:`xgrammar2.TokenizerInfo`)."""

    def __init__(self, tokenizer_info) -> None:
        self.vocab_size: int = tokenizer_info.vocab_size
        self._decoded: List[bytes] = tokenizer_info.decoded_vocab
        self._special = set(tokenizer_info.special_token_ids)
        self._by_string: Dict[str, int] = {}
        for i, tok in enumerate(tokenizer_info.encoded_vocab):
            key = tok.decode("utf-8", "replace") if isinstance(tok, bytes) else tok
            self._by_string.setdefault(key, i)
        for i, raw in enumerate(self._decoded):  # a text token's decoded text also names it
            if raw and i not in self._special:
                self._by_string.setdefault(raw.decode("utf-8", "replace"), i)

    def token_id(self, token: str) -> Optional[int]:
        return self._by_string.get(token)

    def text(self, token_id: int) -> Optional[bytes]:
        """The token's bytes when it can be grammar text; None for special tokens."""
        if token_id in self._special or token_id >= len(self._decoded):
            return None
        raw = self._decoded[token_id]
        return raw or None


def resolver_for(tokenizer_info) -> TokenResolver:
    """The (cached) resolver of a TokenizerInfo."""
    r = getattr(tokenizer_info, "_xgr2_token_resolver", None)
    if r is None:
        r = TokenResolver(tokenizer_info)
        try:
            tokenizer_info._xgr2_token_resolver = r
        except AttributeError:  # pragma: no cover - slotted or frozen object
            pass
    return r
