"""Draft-tree traversal for speculative decoding (EAGLE-style token trees in vLLM / SGLang).

A draft tree is given as three 1-D int64 tensors of the same length ``n`` (SGLang's layout):

* ``retrieve_next_token[i]``: the first child of node ``i`` (-1: none);
* ``retrieve_next_sibling[i]``: the next sibling of node ``i`` (-1: none);
* ``draft_tokens[i]``: the token drafted at node ``i``. Node 0 is the root: the position the
  matcher is at now; its token is the one already accepted and is not looked at.

:func:`traverse_draft_tree` fills row ``i`` of a ``(n, ceil(vocab_size / 32))`` int32 bitmask
with the tokens allowed after the path root -> ``i``, walking the tree depth-first with
accept / rollback on the matcher (one accept and one rollback step per accepted node; the
matcher ends in the state it started in). A node whose token the grammar rejects at its parent
(or that is outside the vocabulary), and a node after which the matcher is terminated, gets an
all-zero row; nodes below a rejected or terminated node, nodes not reachable from the root,
and nodes not reached before the time limit keep whatever their rows held.

The walk runs in the core (``xgr_matcher_traverse_draft_tree_ret``, csrc/runtime/draft_tree.c),
one call per tree; the core also checks the lengths and the edges. For the usual arguments
(plain CPU torch tensors, contiguous) the Python side reads only what the core needs (dtype,
device, layout, length and address of each tensor): about 1 µs on top of the walk.
Two cases walk in Python with the same result: per-node ``temperatures`` (read from the
matcher at each node), and a rollback limit (``max_rollback_tokens``: each level of the path
is then a fork).

Behaviour follows upstream xgrammar 0.2.8's ``GrammarMatcher.traverse_draft_tree``: the same
shape / dtype checks (RuntimeError), tree checks (edges in ``[-1, n)``, the root has no sibling
and no parent, no node is the target of two edges, so every walk ends), ``time_threshold``
(seconds, checked before every non-root node; <= 0: no limit; returns False on timeout) and
the optional per-node ``temperatures`` output.
"""

import sys
import time
import weakref
from typing import TYPE_CHECKING, Any, List, NoReturn, Optional

from . import _core
from .exception import InvalidArgumentError

_lib = _core.lib
_accept_ret = _lib.xgr_matcher_accept_token_ret
_fill_ret = _lib.xgr_matcher_fill_bitmask_ret
_traverse_ret = _lib.xgr_matcher_traverse_draft_tree_ret
_XGR_ERR_INVALID_ARG = _lib.XGR_ERR_INVALID_ARG  # read from xgr2.h through the cdef

if TYPE_CHECKING:  # pragma: no cover
    from .matcher import GrammarMatcher

__all__ = ["InvalidDraftTreeError", "traverse_draft_tree"]


class InvalidDraftTreeError(InvalidArgumentError, RuntimeError):
    """A draft tree, its bitmask or its temperatures tensor has the wrong shape, dtype or
    edges. (A RuntimeError as upstream's check failures, and a ValueError.)"""


def _is_torch(x: Any) -> bool:
    torch = sys.modules.get("torch")
    return torch is not None and isinstance(x, torch.Tensor)


def _int64_array(x: Any, name: str) -> Any:
    """A validated, contiguous 1-D int64 CPU tensor / array, or InvalidDraftTreeError."""
    if _is_torch(x):
        import torch

        if x.dim() != 1 or x.dtype != torch.int64:
            raise InvalidDraftTreeError(
                f"The {name} tensor must be a 1D int64 tensor, got shape {tuple(x.shape)} and "
                f"dtype {x.dtype}"
            )
        if x.device.type != "cpu":
            raise InvalidDraftTreeError(f"The {name} tensor must be on the CPU, got {x.device}")
        return x.contiguous()
    np = sys.modules.get("numpy")
    if np is not None and isinstance(x, np.ndarray):
        if x.ndim != 1 or x.dtype != np.int64:
            raise InvalidDraftTreeError(
                f"The {name} tensor must be a 1D int64 tensor, got shape {x.shape} and dtype "
                f"{x.dtype}"
            )
        return np.ascontiguousarray(x)
    raise InvalidDraftTreeError(
        f"The {name} tensor must be a 1D int64 torch.Tensor or numpy.ndarray, got "
        f"{type(x).__name__}"
    )


def _address(a: Any) -> int:
    """The data address of a contiguous array from :func:`_int64_array` (kept alive by the
    caller)."""
    return a.data_ptr() if _is_torch(a) else a.ctypes.data


def _check_bitmask_2d(bitmask: Any) -> int:
    """The number of rows of a 2-D int32 bitmask, or InvalidDraftTreeError."""
    if _is_torch(bitmask):
        import torch

        ok = bitmask.dim() == 2 and bitmask.dtype == torch.int32
        shape, dtype = tuple(bitmask.shape), bitmask.dtype
    else:
        np = sys.modules.get("numpy")
        if np is None or not isinstance(bitmask, np.ndarray):
            raise InvalidDraftTreeError(
                "The token_bitmask must be a 2D int32 torch.Tensor or numpy.ndarray, got "
                f"{type(bitmask).__name__}"
            )
        ok = bitmask.ndim == 2 and bitmask.dtype == np.int32
        shape, dtype = bitmask.shape, bitmask.dtype
    if not ok:
        raise InvalidDraftTreeError(
            f"The token_bitmask tensor must be a 2D int32 tensor, got shape {shape} and dtype "
            f"{dtype}"
        )
    return int(shape[0])


def _check_temperatures(temperatures: Any, num_nodes: int) -> None:
    if _is_torch(temperatures):
        import torch

        ok = (temperatures.dim() == 1 and temperatures.dtype == torch.float32
              and temperatures.device.type == "cpu")
        shape, dtype = tuple(temperatures.shape), temperatures.dtype
    else:
        np = sys.modules.get("numpy")
        if np is None or not isinstance(temperatures, np.ndarray):
            raise InvalidDraftTreeError(
                "The temperatures tensor must be a 1D float32 CPU torch.Tensor, got "
                f"{type(temperatures).__name__}"
            )
        ok = temperatures.ndim == 1 and temperatures.dtype == np.float32
        shape, dtype = temperatures.shape, temperatures.dtype
    if not ok:
        raise InvalidDraftTreeError(
            f"The temperatures tensor must be a 1D float32 CPU tensor, got shape {shape} and "
            f"dtype {dtype}"
        )
    if shape[0] != num_nodes:
        raise InvalidDraftTreeError(
            f"The temperatures tensor must have one element per node: {num_nodes}, got {shape[0]}"
        )


def _check_tree(next_token: List[int], next_sibling: List[int]) -> None:
    """Edges in [-1, n), the root has neither a sibling nor a parent, every other node at
    most one parent / previous sibling: the walk from the root visits each node once."""
    n = len(next_token)
    if n == 0:
        raise InvalidDraftTreeError("The draft tree must not be empty")
    if n > 2**31 - 1:
        raise InvalidDraftTreeError(f"The draft tree has {n} nodes; at most 2**31 - 1 are supported")
    if next_sibling[0] != -1:
        raise InvalidDraftTreeError("The root node must not have siblings")
    in_degree = [0] * n
    named = (("retrieve_next_token", next_token), ("retrieve_next_sibling", next_sibling))
    for name, edges in named:
        for i, j in enumerate(edges):
            if not -1 <= j < n:
                raise InvalidDraftTreeError(
                    f"{name}[{i}] = {j} is out of bounds: it should be in [-1, {n})."
                )
            if j >= 0:
                in_degree[j] += 1
    if in_degree[0]:
        raise InvalidDraftTreeError("The root node must not be the child or sibling of a node")
    for i, d in enumerate(in_degree):
        if d > 1:
            raise InvalidDraftTreeError(
                f"Node {i} is the target of {d} retrieve_next_token / retrieve_next_sibling "
                "entries; the draft tree must not contain cycles or shared nodes."
            )


class _Walker:
    """The matcher states along the current path. With unlimited rollback (the default) one
    matcher steps forward with the core's accept and back with its rollback of one step; with
    a rollback limit each level is a fork of its parent, so any depth works. Calls the core
    directly (a node costs one accept, one fill and one rollback)."""

    def __init__(self, matcher: "GrammarMatcher") -> None:
        self._in_place = matcher.max_rollback_tokens == -1
        self._stack = [matcher]
        self.depth = 0

    @property
    def top(self) -> "GrammarMatcher":
        return self._stack[-1]

    def advance(self, token: int) -> bool:
        m = self._stack[-1]
        if not self._in_place:
            m = m.fork()
        r = _accept_ret(m._ptr, token)
        if r < 0:  # a terminated matcher refuses (False); anything else is an error
            m._raise_or_false(-r, f"accepting draft token {token}")
            return False
        if r == 0:
            return False
        if not self._in_place:
            self._stack.append(m)
        self.depth += 1
        return True

    def retreat(self) -> None:
        if self._in_place:
            _core.check(_lib.xgr_matcher_rollback(self._stack[0]._ptr, 1),
                        "rolling back a draft token")
        else:
            self._stack.pop()
        self.depth -= 1

    def unwind(self) -> None:
        if self.depth:
            if self._in_place:
                _core.check(_lib.xgr_matcher_rollback(self._stack[0]._ptr, self.depth),
                            "rolling back the draft tree")
            else:
                del self._stack[1:]
            self.depth = 0


def _temperature(matcher: "GrammarMatcher") -> float:
    # `GrammarMatcher.temperature` (None when no temperature applies) where the matcher has it.
    t = getattr(matcher, "temperature", None)
    return -1.0 if t is None else float(t)


# torch.Tensor and torch.int64 once torch is imported (resolved on the first call that sees
# it); the fast path below takes exactly these, anything else goes through _checked_walk.
_TENSOR: Any = None
_I64: Any = None
# (weakref to the bitmask tensor, data_ptr, _version, checked view) of the last bitmask
# checked here: the same tensor, unchanged, skips the dtype / device / layout checks (as
# GrammarMatcher._check_bitmask does for fills).
_LAST_BITMASK: Optional[tuple] = None


def _resolve_torch() -> Any:
    global _TENSOR, _I64
    torch = sys.modules.get("torch")
    if torch is None:
        return None
    _TENSOR, _I64 = torch.Tensor, torch.int64
    return _TENSOR


def _bitmask_view(matcher: "GrammarMatcher", bitmask: Any) -> tuple:
    """The matcher's checked view (pointer, rows, words, stride) of the bitmask, remembered
    for the next traversal when the tensor tracks a version."""
    global _LAST_BITMASK
    last = _LAST_BITMASK
    if (last is not None and last[0]() is bitmask and bitmask.data_ptr() == last[1]
            and bitmask._version == last[2]):
        base = last[3]
        if base[2] >= matcher._row_words:
            return base
    _check_bitmask_2d(bitmask)
    base = matcher._check_bitmask(bitmask)
    version = matcher._bm_version if matcher._bm is bitmask else None
    if version is not None:
        _LAST_BITMASK = (weakref.ref(bitmask), bitmask.data_ptr(), version, base)
    return base


def _walk_in_core(matcher: "GrammarMatcher", next_token: int, next_sibling: int,
                  tokens: int, n: int, n_sibling: int, n_tokens: int, token_bitmask: Any,
                  threshold: float) -> bool:
    """One core call for the whole tree (addresses of contiguous int64 arrays)."""
    base = _bitmask_view(matcher, token_bitmask)
    r = _traverse_ret(matcher._ptr, next_token, next_sibling, tokens, n, n_sibling, n_tokens,
                      base[0], base[1], base[3], base[2], threshold)
    return r == 1 if r >= 0 else _raise_status(r)


def _raise_status(r: int) -> NoReturn:
    """Raises the error of a negative return of xgr_matcher_traverse_draft_tree_ret."""
    if -r == _XGR_ERR_INVALID_ARG:
        raise InvalidDraftTreeError(_core.last_error())
    raise _core.error_from_status(-r, "traversing the draft tree")


def traverse_draft_tree(
    matcher: "GrammarMatcher",
    retrieve_next_token: Any,
    retrieve_next_sibling: Any,
    draft_tokens: Any,
    token_bitmask: Any,
    time_threshold: float = -1.0,
    temperatures: Optional[Any] = None,
) -> bool:
    """Fills ``token_bitmask[i]`` for every node ``i`` of a draft tree reachable from the root
    through accepted tokens (see the module docstring). Returns True when the whole tree was
    walked, False when ``time_threshold`` (seconds, > 0) ran out first. The matcher's state is
    unchanged afterwards (also after an error).

    Raises
    ------
    InvalidDraftTreeError (a RuntimeError)
        Wrong shapes, dtypes or tree edges.
    """
    T = _TENSOR or _resolve_torch()
    # The fast path: plain contiguous 1-D int64 CPU tensors, no temperatures, unlimited
    # rollback (the core walks with accept / rollback). Only what the core cannot see is
    # read here; it checks the lengths, the bitmask rows and the edges itself.
    if (type(retrieve_next_token) is T and type(retrieve_next_sibling) is T
            and type(draft_tokens) is T and temperatures is None
            and matcher._max_rollback_tokens == -1):
        a, b, c, i64 = retrieve_next_token, retrieve_next_sibling, draft_tokens, _I64
        if (a.dtype is i64 and b.dtype is i64 and c.dtype is i64
                and a.ndim == 1 and b.ndim == 1 and c.ndim == 1
                and a.is_cpu and b.is_cpu and c.is_cpu
                and a.is_contiguous() and b.is_contiguous() and c.is_contiguous()):
            threshold = time_threshold
            if type(threshold) is not float:
                try:
                    threshold = float(threshold)
                except (TypeError, ValueError):
                    threshold = None
            bm = token_bitmask
            last = _LAST_BITMASK  # (inlined _bitmask_view: this path runs once per step)
            if (last is not None and last[0]() is bm and bm.data_ptr() == last[1]
                    and bm._version == last[2] and last[3][2] >= matcher._row_words):
                base = last[3]
            elif threshold is not None:
                base = _bitmask_view(matcher, bm)
            if threshold is not None:
                r = _traverse_ret(matcher._ptr, a.data_ptr(), b.data_ptr(), c.data_ptr(),
                                  a.numel(), b.numel(), c.numel(), base[0], base[1], base[3],
                                  base[2], threshold)
                return r == 1 if r >= 0 else _raise_status(r)
    return _checked_walk(matcher, retrieve_next_token, retrieve_next_sibling, draft_tokens,
                         token_bitmask, time_threshold, temperatures)


def _checked_walk(
    matcher: "GrammarMatcher",
    retrieve_next_token: Any,
    retrieve_next_sibling: Any,
    draft_tokens: Any,
    token_bitmask: Any,
    time_threshold: float,
    temperatures: Optional[Any],
) -> bool:
    """traverse_draft_tree for any accepted argument types, with every check in Python."""
    start = time.perf_counter()
    next_token_a = _int64_array(retrieve_next_token, "retrieve_next_token")
    next_sibling_a = _int64_array(retrieve_next_sibling, "retrieve_next_sibling")
    tokens_a = _int64_array(draft_tokens, "draft_tokens")
    rows = _check_bitmask_2d(token_bitmask)
    n = len(next_token_a)
    if len(next_sibling_a) != n:
        raise InvalidDraftTreeError(
            "The retrieve_next_token and retrieve_next_sibling tensors must have the same length"
        )
    if len(tokens_a) != n:
        raise InvalidDraftTreeError(
            "The retrieve_next_token and draft_tokens tensors must have the same length"
        )
    if rows != n:
        raise InvalidDraftTreeError(
            "The token_bitmask batch size must match the number of nodes in the tree "
            f"({n}), got {rows}"
        )
    if n == 0:
        raise InvalidDraftTreeError("The draft tree must not be empty")
    if n > 2**31 - 1:
        raise InvalidDraftTreeError(f"The draft tree has {n} nodes; at most 2**31 - 1 are supported")
    if temperatures is not None:
        _check_temperatures(temperatures, n)
    try:
        threshold = float(time_threshold)
    except (TypeError, ValueError):
        raise InvalidDraftTreeError(
            f"time_threshold must be a number, got {type(time_threshold).__name__}"
        ) from None
    if temperatures is None and matcher.max_rollback_tokens == -1:
        # the whole walk in the core (csrc/runtime/draft_tree.c)
        return _walk_in_core(matcher, _address(next_token_a), _address(next_sibling_a),
                             _address(tokens_a), n, n, n, token_bitmask, threshold)
    next_token = next_token_a.tolist()
    next_sibling = next_sibling_a.tolist()
    tokens = tokens_a.tolist()
    _check_tree(next_token, next_sibling)
    if temperatures is not None:  # -1: not visited, rejected, or no temperature applies
        if _is_torch(temperatures):
            temperatures.fill_(-1.0)
        else:
            temperatures.fill(-1.0)

    vocab_size = matcher._vocab_size
    # the bitmask's checked view (dtype, device, layout, row width): row i at base + i * stride
    base, _, words, stride = matcher._check_bitmask(token_bitmask)
    walker = _Walker(matcher)
    is_terminated = _lib.xgr_matcher_is_terminated

    def fill(node: int) -> bool:
        """Fills the node's row; False when the matcher is terminated there (zero row, and
        the node's children are not visited)."""
        m = walker.top
        live = not is_terminated(m._ptr)
        if live:
            r = _fill_ret(m._ptr, base + node * stride, words)
            if r < 0:
                raise _core.error_from_status(-r, f"filling the bitmask of draft node {node}")
        else:
            token_bitmask[node] = 0
        if temperatures is not None:
            temperatures[node] = _temperature(m)
        return live

    # cursors[k]: the next node to look at among the children of the node at depth k of the
    # current path (the walker is at that node's state while cursors has k + 1 entries).
    cursors = [next_token[0] if fill(0) else -1]
    try:
        while cursors:
            node = cursors[-1]
            if node == -1:
                cursors.pop()
                if cursors:
                    walker.retreat()
                continue
            if threshold > 0 and time.perf_counter() - start > threshold:
                walker.unwind()
                return False
            cursors[-1] = next_sibling[node]
            token = tokens[node]
            if 0 <= token < vocab_size and walker.advance(token):
                cursors.append(next_token[node] if fill(node) else -1)
            else:
                token_bitmask[node] = 0
    finally:
        walker.unwind()
    return True
