"""Speculative decoding: SGLang's own ``spec_utils.generate_token_bitmask`` / ``traverse_tree``
walk a draft tree with ``accept_token`` / ``fill_vocab_mask`` / ``rollback(1)`` and test
bits directly. Our grammar must give the same rows as SGLang's xgrammar backend for every
visited node, and end in the state it started in."""

from __future__ import annotations

import json
import random
from types import SimpleNamespace

import pytest

from sglang_harness import QWEN3_EOS, QWEN3_VOCAB, allowed, classify_difference, encode, require_sglang

require_sglang()

import torch  # noqa: E402
from sglang.srt.speculative.spec_utils import generate_token_bitmask  # noqa: E402

V = QWEN3_VOCAB
EOS = QWEN3_EOS[0]

CASES = [
    ("regex", r"(GET|POST) /[a-z]{1,8}(/[a-z0-9]{1,6}){0,3} HTTP/1\.[01]", "POST /api/v2/items HTTP/1.1"),
    ("ebnf", 'root ::= "(" expr ")"\nexpr ::= num (("+" | "*") num)*\nnum ::= [0-9]+', "(12+7*300)"),
    ("json", json.dumps({"type": "object", "properties": {"id": {"type": "integer"}, "ok": {"type": "boolean"}},
                         "required": ["id", "ok"]}), '{"id": 42, "ok": false}'),
]


def _tree(rng: random.Random, path, vocab_pool, n_nodes: int):
    """A draft tree: the chain ``path`` (valid continuation) plus random siblings (mostly
    invalid) hung at random depths. Returns (next_token, next_sibling, tokens) 1-D tensors;
    node 0 is the already-accepted root."""
    tokens = [path[0]]
    first_child = [-1]
    next_sib = [-1]
    parent_of = [-1]
    prev = 0
    for t in path[1:]:  # the valid chain
        tokens.append(t)
        first_child.append(-1)
        next_sib.append(-1)
        parent_of.append(prev)
        first_child[prev] = len(tokens) - 1
        prev = len(tokens) - 1
    while len(tokens) < n_nodes:
        p = rng.randrange(len(tokens))
        tokens.append(rng.choice(vocab_pool))
        first_child.append(-1)
        next_sib.append(-1)
        parent_of.append(p)
        node = len(tokens) - 1
        if first_child[p] == -1:
            first_child[p] = node
        else:
            c = first_child[p]
            while next_sib[c] != -1:
                c = next_sib[c]
            next_sib[c] = node
    return (torch.tensor(first_child), torch.tensor(next_sib), torch.tensor(tokens))


@pytest.mark.parametrize("case", range(len(CASES)), ids=[c[0] for c in CASES])
def test_tree_masks_match_builtin_xgrammar(backend, upstream, tokenizer, case):
    kind, spec, text = CASES[case]
    dispatch = {"regex": "dispatch_regex", "ebnf": "dispatch_ebnf", "json": "dispatch_json"}[kind]
    ids = encode(tokenizer, text) + [EOS]
    rng = random.Random(case)
    pool = list(set(ids)) + [rng.randrange(V) for _ in range(20)] + [EOS]
    visited_total = 0
    for start in range(0, len(ids) - 1, 3):
        ours = getattr(backend, dispatch)(spec)
        up = getattr(upstream, dispatch)(spec)
        for t in ids[:start]:
            ours.accept_token(t)
            up.accept_token(t)
        # Node 0 is the token the target model produced last step: accept it like the
        # scheduler did, then the tree below it is the draft.
        ours.accept_token(ids[start])
        up.accept_token(ids[start])
        path = ids[start:start + 6]
        nt, ns, tok = _tree(rng, path, pool, n_nodes=len(path) + 8)
        before = ours.allocate_vocab_mask(vocab_size=V, batch_size=1, device="cpu")
        ours.fill_vocab_mask(before, 0)
        m_ours, _ = generate_token_bitmask([SimpleNamespace(grammar=ours)], nt[None], ns[None], tok[None], V)
        m_up, _ = generate_token_bitmask([SimpleNamespace(grammar=up)], nt[None], ns[None], tok[None], V)
        assert m_ours.shape == m_up.shape and m_ours.dtype == m_up.dtype == torch.int32
        for node in range(m_ours.shape[0]):
            a, b = allowed(m_ours[node].numpy(), V), allowed(m_up[node].numpy(), V)
            if a != b:
                kinds, rest_ours, rest_up = classify_difference(tokenizer, a - b, b - a)
                assert not rest_ours and not rest_up and (kind == "json" and kinds <= {"CONTROL", "CR"}), (
                    f"{kind} start {start} node {node}: ours-only {sorted(rest_ours)[:8]} "
                    f"upstream-only {sorted(rest_up)[:8]} kinds {kinds}"
                )
            visited_total += int(not bool((m_ours[node] == -1).all()))
        # Every accept was rolled back: same state, same row as before the traversal.
        after = ours.allocate_vocab_mask(vocab_size=V, batch_size=1, device="cpu")
        ours.fill_vocab_mask(after, 0)
        assert torch.equal(before, after)
        assert ours.num_accepted == start + 1
    assert visited_total > 0
