"""GrammarMatcher.traverse_draft_tree (xgrammar2.draft_tree): speculative-decoding draft trees.

Checked three ways: hand-made trees with known rows, random trees against a replay oracle (a
fresh matcher accepting the path root -> node), and the same random trees against real upstream
xgrammar 0.2.8 when it is installed (rows compared on the vocabulary's bits; upstream also sets
the padding bits past vocab_size when every token is allowed)."""

import random

import pytest

torch = pytest.importorskip("torch")
xgr = pytest.importorskip("xgrammar2")
from xgrammar2.draft_tree import InvalidDraftTreeError  # noqa: E402

VOCAB = ["a", "b", "c", "{", "}", '"', ":", ",", " ", "true", "false", "null", "</s>"]
STOP = 12


def _compiled(mod, grammar=None):
    ti = mod.TokenizerInfo(VOCAB, vocab_size=len(VOCAB), stop_token_ids=[STOP])
    g = mod.Grammar.builtin_json_grammar() if grammar is None else mod.Grammar.from_ebnf(grammar)
    return mod.GrammarCompiler(ti).compile_grammar(g)


@pytest.fixture(scope="module")
def json_cg():
    return _compiled(xgr)


def _tensors(nt, ns, dt):
    return (torch.tensor(nt, dtype=torch.int64), torch.tensor(ns, dtype=torch.int64),
            torch.tensor(dt, dtype=torch.int64))


def _vocab_bits(bm):
    return (bm[:, 0] & ((1 << len(VOCAB)) - 1)).tolist()


def test_linear_tree_rows(json_cg):
    m = xgr.GrammarMatcher(json_cg)
    bm = xgr.allocate_token_bitmask(3, len(VOCAB))
    # '{' is allowed at the root, then '"' after '{': rows for root, '{', '{"'
    assert m.traverse_draft_tree(*_tensors([1, 2, -1], [-1, -1, -1], [0, 3, 5]), bm) is True
    assert _vocab_bits(bm)[0] == 1 << 3
    assert _vocab_bits(bm)[1] == (1 << 4) | (1 << 5) | (1 << 8)  # '}', '"', ' '
    assert bm[2].any()
    # the matcher is where it started
    assert m.num_steps == 0 and m.accept_string('{"a": 1}')


def test_rejected_and_below_rejected_rows(json_cg):
    m = xgr.GrammarMatcher(json_cg)
    bm = xgr.allocate_token_bitmask(4, len(VOCAB))
    # node 1 ':' is rejected at the root: zero row; node 2 below it is not visited (keeps -1);
    # node 3 (sibling of 1, token '{') is accepted; out-of-vocabulary / negative tokens reject
    assert m.traverse_draft_tree(*_tensors([1, 2, -1, -1], [-1, 3, -1, -1], [0, 6, 3, 3]), bm)
    assert not bm[1].any()
    assert (bm[2] == -1).all()
    assert _vocab_bits(bm)[3] == (1 << 4) | (1 << 5) | (1 << 8)
    for bad in (100, -3, len(VOCAB)):
        bm = xgr.allocate_token_bitmask(2, len(VOCAB))
        assert m.traverse_draft_tree(*_tensors([1, -1], [-1, -1], [0, bad]), bm)
        assert not bm[1].any()


def test_terminated_node_children_not_visited(json_cg):
    m = xgr.GrammarMatcher(json_cg)
    assert m.accept_string("{}")
    bm = xgr.allocate_token_bitmask(3, len(VOCAB))
    assert m.traverse_draft_tree(*_tensors([1, 2, -1], [-1, -1, -1], [0, STOP, 3]), bm)
    assert _vocab_bits(bm)[0] == 1 << STOP
    assert not bm[1].any()  # terminated after the stop token
    assert (bm[2] == -1).all()  # below a terminated node: untouched
    assert not m.is_terminated() and m.num_steps == 1


def test_rollback_limit_uses_forks(json_cg):
    # with max_rollback_tokens=0 the walk cannot roll back: it forks per level instead
    m = xgr.GrammarMatcher(json_cg, max_rollback_tokens=0)
    ref = xgr.GrammarMatcher(json_cg)
    tree = _tensors([1, 2, -1, -1], [-1, 3, -1, -1], [0, 3, 5, 3])
    bm, bm_ref = (xgr.allocate_token_bitmask(4, len(VOCAB)) for _ in range(2))
    assert m.traverse_draft_tree(*tree, bm) and ref.traverse_draft_tree(*tree, bm_ref)
    assert torch.equal(bm, bm_ref)
    assert m.num_steps == 0


@pytest.mark.parametrize(
    "nt, ns, dt, bm_rows, match",
    [
        ([1, -1], [-1], [0, 0], 2, "same length"),
        ([1, -1], [-1, -1], [0], 2, "same length"),
        ([1, -1], [-1, -1], [0, 0], 3, "batch size"),
        ([], [], [], 0, "must not be empty"),
        ([1, -1], [1, -1], [0, 0], 2, "root node must not have siblings"),
        ([5, -1], [-1, -1], [0, 0], 2, "out of bounds"),
        ([1, -1], [-1, -2], [0, 0], 2, "out of bounds"),
        ([1, 0], [-1, -1], [0, 0], 2, "root node must not be the child"),
        ([1, 1, -1], [-1, -1, -1], [0, 0, 0], 3, "cycles or shared nodes"),
        ([1, -1, -1], [-1, 1, -1], [0, 0, 0], 3, "cycles or shared nodes"),
    ],
)
def test_bad_trees_raise(json_cg, nt, ns, dt, bm_rows, match):
    m = xgr.GrammarMatcher(json_cg)
    with pytest.raises(RuntimeError, match=match):
        m.traverse_draft_tree(*_tensors(nt, ns, dt), xgr.allocate_token_bitmask(bm_rows, len(VOCAB)))
    assert m.num_steps == 0


def test_bad_dtypes_raise(json_cg):
    m = xgr.GrammarMatcher(json_cg)
    nt, ns, dt = _tensors([1, -1], [-1, -1], [0, 3])
    bm = xgr.allocate_token_bitmask(2, len(VOCAB))
    with pytest.raises(InvalidDraftTreeError, match="retrieve_next_token tensor must be a 1D int64"):
        m.traverse_draft_tree(nt.to(torch.int32), ns, dt, bm)
    with pytest.raises(InvalidDraftTreeError, match="draft_tokens tensor must be a 1D int64"):
        m.traverse_draft_tree(nt, ns, dt.view(1, 2), bm)
    with pytest.raises(InvalidDraftTreeError, match="token_bitmask tensor must be a 2D int32"):
        m.traverse_draft_tree(nt, ns, dt, bm[0])
    with pytest.raises(InvalidDraftTreeError, match="temperatures tensor"):
        m.traverse_draft_tree(nt, ns, dt, bm, temperatures=torch.zeros(2, dtype=torch.float64))
    with pytest.raises(InvalidDraftTreeError, match="temperatures tensor"):
        m.traverse_draft_tree(nt, ns, dt, bm, temperatures=torch.zeros(3, dtype=torch.float32))


def test_timeout_returns_false_and_restores_state():
    ti = xgr.TokenizerInfo(["a"], vocab_size=1, stop_token_ids=[])
    cg = xgr.GrammarCompiler(ti).compile_grammar(xgr.Grammar.from_ebnf('root ::= "a" root | "a"'))
    n = 2000
    tree = _tensors([i + 1 for i in range(n - 1)] + [-1], [-1] * n, [0] * n)
    m = xgr.GrammarMatcher(cg)
    bm = torch.zeros((n, 1), dtype=torch.int32)
    assert m.traverse_draft_tree(*tree, bm, time_threshold=1e-9) is False
    assert bm[0].item() == 1 and not bm[1:].any()  # root only
    assert m.num_steps == 0
    bm.zero_()
    assert m.traverse_draft_tree(*tree, bm, time_threshold=100.0) is True
    assert (bm[:, 0] == 1).all()
    assert m.num_steps == 0


def test_numpy_inputs(json_cg):
    np = pytest.importorskip("numpy")
    m = xgr.GrammarMatcher(json_cg)
    bm = np.full((2, 1), -1, dtype=np.int32)
    nt = np.array([1, -1], dtype=np.int64)
    ns = np.array([-1, -1], dtype=np.int64)
    assert m.traverse_draft_tree(nt, ns, np.array([0, 3], dtype=np.int64), bm)
    assert bm[0, 0] == 1 << 3 and bm[1, 0] == (1 << 4) | (1 << 5) | (1 << 8)


def _random_tree(rng, n):
    """A random draft tree over n nodes in SGLang's first-child / next-sibling layout."""
    children = {i: [] for i in range(n)}
    for i in range(1, n):
        children[rng.randrange(i)].append(i)
    nt, ns = [-1] * n, [-1] * n
    for p, cs in children.items():
        if cs:
            nt[p] = cs[0]
            for a, b in zip(cs, cs[1:]):
                ns[a] = b
    # mostly tokens the JSON grammar likes, some never-allowed ones
    dt = [rng.choice([3, 3, 5, 5, 0, 1, 6, 7, 8, 4, 9, STOP, 20]) for _ in range(n)]
    return nt, ns, dt


def _oracle_rows(cg, prefix, nt, ns, dt):
    """Row per node by replaying the root -> node path on a fresh matcher; None = not
    visited (below a rejected / terminated node)."""
    n = len(nt)
    rows = [None] * n
    stack = [(0, [])]
    while stack:
        node, path = stack.pop()
        m = xgr.GrammarMatcher(cg)
        assert m.accept_string(prefix)
        ok = all(0 <= t < len(VOCAB) and m.accept_token(t) for t in path)
        bm = xgr.allocate_token_bitmask(1, len(VOCAB))
        if not ok or m.is_terminated():
            rows[node] = 0
        else:
            m.fill_next_token_bitmask(bm)
            rows[node] = bm[0, 0].item() & ((1 << len(VOCAB)) - 1)
        if ok and not m.is_terminated():
            c = nt[node]
            while c != -1:
                stack.append((c, path + [dt[c]]))
                c = ns[c]
    return rows


@pytest.mark.parametrize("seed", range(20))
def test_random_trees_match_replay_oracle(json_cg, seed):
    rng = random.Random(seed)
    nt, ns, dt = _random_tree(rng, rng.randrange(1, 24))
    prefix = rng.choice(["", "{", '{"', '{"a":', "{}"])
    m = xgr.GrammarMatcher(json_cg)
    assert m.accept_string(prefix)
    steps = m.num_steps
    bm = xgr.allocate_token_bitmask(len(nt), len(VOCAB))
    assert m.traverse_draft_tree(*_tensors(nt, ns, dt), bm)
    for node, want in enumerate(_oracle_rows(json_cg, prefix, nt, ns, dt)):
        if want is None:
            assert (bm[node] == -1).all(), node
        else:
            assert _vocab_bits(bm)[node] == want, node
    assert m.num_steps == steps


@pytest.mark.parametrize("seed", range(20))
def test_random_trees_match_upstream(seed):
    up = pytest.importorskip("xgrammar")
    if up is xgr or not hasattr(up.GrammarMatcher, "traverse_draft_tree"):
        pytest.skip("real upstream xgrammar with traverse_draft_tree not installed")
    rng = random.Random(1000 + seed)
    nt, ns, dt = _random_tree(rng, rng.randrange(1, 24))
    prefix = rng.choice(["", "{", '{"', '{"a":', "{}"])
    rows = []
    for mod in (xgr, up):
        m = mod.GrammarMatcher(_compiled(mod))
        assert m.accept_string(prefix)
        bm = torch.full((len(nt), 1), -1, dtype=torch.int32)
        assert m.traverse_draft_tree(*_tensors(nt, ns, dt), bm) is True
        rows.append(_vocab_bits(bm))
    assert rows[0] == rows[1]


def test_temperatures_output_defaults_to_minus_one(json_cg):
    # without a temperature configured every entry is -1 (visited, rejected or not visited)
    m = xgr.GrammarMatcher(json_cg)
    bm = xgr.allocate_token_bitmask(3, len(VOCAB))
    temps = torch.full((3,), 7.0, dtype=torch.float32)
    assert m.traverse_draft_tree(*_tensors([1, 2, -1], [-1, -1, -1], [0, 3, 6]), bm, temperatures=temps)
    assert temps.tolist() == [-1.0, -1.0, -1.0]
    assert not bm[2].any()  # ':' right after '{' is rejected


@pytest.mark.parametrize("seed", range(30))
def test_core_walk_matches_python_walks(json_cg, seed):
    # three implementations of the same walk: the core's (default), the Python in-place walk
    # (taken when temperatures are asked for) and the Python fork walk (rollback limit)
    rng = random.Random(5000 + seed)
    nt, ns, dt = _random_tree(rng, rng.randrange(1, 40))
    prefix = rng.choice(["", "{", '{"', '{"a":', "{}", '{"a": [1, {"b": '])
    rows = []
    for kind in ("core", "python", "fork"):
        m = xgr.GrammarMatcher(json_cg, max_rollback_tokens=10**6 if kind == "fork" else -1)
        assert m.accept_string(prefix)
        steps = m.num_steps
        bm = torch.full((len(nt), 1), -1, dtype=torch.int32)
        temps = torch.zeros(len(nt), dtype=torch.float32) if kind == "python" else None
        assert m.traverse_draft_tree(*_tensors(nt, ns, dt), bm, temperatures=temps) is True
        assert m.num_steps == steps
        rows.append(bm[:, 0].tolist())
    assert rows[0] == rows[1] == rows[2]


# ---- the fast path (plain torch tensors, one core call) against the checked path ---------


def _checked(m, nt, ns, dt, bm, **kw):
    from xgrammar2.draft_tree import _checked_walk

    return _checked_walk(m, nt, ns, dt, bm, kw.get("time_threshold", -1.0), None)


@pytest.mark.parametrize("seed", range(20))
def test_fast_path_matches_checked_path(json_cg, seed):
    # the same rows, results and final state whichever argument form takes which path:
    # plain tensors (fast), numpy arrays and non-contiguous views (checked in Python)
    np = pytest.importorskip("numpy")
    rng = random.Random(9000 + seed)
    nt, ns, dt = _random_tree(rng, rng.randrange(1, 40))
    n = len(nt)
    prefix = rng.choice(["", "{", '{"a": [1, {"b": '])
    outs = []
    for form in ("fast", "checked", "numpy", "strided"):
        m = xgr.GrammarMatcher(json_cg)
        assert m.accept_string(prefix)
        steps = m.num_steps
        bm = torch.full((n, 1), -1, dtype=torch.int32)
        if form == "fast":
            assert m.traverse_draft_tree(*_tensors(nt, ns, dt), bm) is True
        elif form == "checked":
            assert _checked(m, *_tensors(nt, ns, dt), bm) is True
        elif form == "numpy":
            arrs = [np.array(x, dtype=np.int64) for x in (nt, ns, dt)]
            bm_np = bm.numpy()
            assert m.traverse_draft_tree(*arrs, bm_np) is True
        else:  # every other element of a twice-as-long tensor
            views = []
            for x in (nt, ns, dt):
                t = torch.zeros(2 * n, dtype=torch.int64)
                t[::2] = torch.tensor(x, dtype=torch.int64)
                views.append(t[::2])
            assert not views[0].is_contiguous() or n == 1
            assert m.traverse_draft_tree(*views, bm) is True
        assert m.num_steps == steps
        outs.append(bm[:, 0].tolist())
    assert outs[0] == outs[1] == outs[2] == outs[3]


@pytest.mark.parametrize(
    "nt, ns, dt, bm_rows, match",
    [
        ([1, -1], [-1], [0, 0], 2, "same length"),
        ([1, -1], [-1, -1], [0], 2, "same length"),
        ([1, -1], [-1, -1], [0, 0], 3, "batch size"),
        ([], [], [], 0, "must not be empty"),
        ([1, -1], [1, -1], [0, 0], 2, "root node must not have siblings"),
        ([5, -1], [-1, -1], [0, 0], 2, "out of bounds"),
        ([1, 1, -1], [-1, -1, -1], [0, 0, 0], 3, "cycles or shared nodes"),
    ],
)
def test_fast_and_checked_paths_raise_the_same(json_cg, nt, ns, dt, bm_rows, match):
    m = xgr.GrammarMatcher(json_cg)
    messages = []
    for walk in (m.traverse_draft_tree, lambda *a: _checked(m, *a)):
        with pytest.raises(InvalidDraftTreeError, match=match) as e:
            walk(*_tensors(nt, ns, dt), xgr.allocate_token_bitmask(bm_rows, len(VOCAB)))
        messages.append(str(e.value))
        assert m.num_steps == 0
    assert messages[0] == messages[1]


def test_fast_path_bitmask_reuse_and_versionless_tensors(json_cg):
    # the checked view of a bitmask is reused while the tensor is unchanged; a tensor made
    # under inference_mode (no version counter) is checked every time; a bitmask too narrow
    # for another matcher's vocabulary is refused even when it was checked before
    tree = _tensors([1, 2, -1], [-1, -1, -1], [0, 3, 5])
    m = xgr.GrammarMatcher(json_cg)
    bm = xgr.allocate_token_bitmask(3, len(VOCAB))
    for _ in range(3):
        bm.fill_(-1)
        assert m.traverse_draft_tree(*tree, bm)
        assert _vocab_bits(bm)[:2] == [1 << 3, (1 << 4) | (1 << 5) | (1 << 8)]
    with torch.inference_mode():
        bm_inf = xgr.allocate_token_bitmask(3, len(VOCAB))
        tree_inf = _tensors([1, 2, -1], [-1, -1, -1], [0, 3, 5])
        for _ in range(2):
            assert m.traverse_draft_tree(*tree_inf, bm_inf)
            assert torch.equal(bm_inf, bm)
    big = xgr.TokenizerInfo(VOCAB + [f"t{i}" for i in range(40)], stop_token_ids=[STOP])
    m_big = xgr.GrammarMatcher(xgr.GrammarCompiler(big).compile_grammar(
        xgr.Grammar.builtin_json_grammar()))
    with pytest.raises(RuntimeError):
        m_big.traverse_draft_tree(*tree, bm)
    assert m_big.num_steps == 0
    # a 1-D bitmask, a 2-D int64 one: refused on the fast path too
    with pytest.raises(InvalidDraftTreeError, match="2D int32"):
        m.traverse_draft_tree(*_tensors([-1], [-1], [0]), bm[0])
    with pytest.raises(InvalidDraftTreeError, match="2D int32"):
        m.traverse_draft_tree(*tree, bm.to(torch.int64))
    # a time_threshold that is no number
    with pytest.raises(InvalidDraftTreeError, match="time_threshold"):
        m.traverse_draft_tree(*tree, bm, time_threshold="soon")
