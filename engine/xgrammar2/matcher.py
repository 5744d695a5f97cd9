"""Matching generated tokens against a compiled grammar and filling next-token bitmasks.

The bitmask may be a CPU ``torch.int32`` tensor or a ``numpy.int32`` array of shape
``(batch, ceil(vocab_size / 32))`` (or 1-D for one row). Rows are written in place through
the array's own memory (no copies); the GIL is released while the core fills them.
"""

import math
import os
import struct
import sys
import weakref
from typing import Any, List, Optional, Sequence, Tuple, Union

from . import _core
from .bitmask import (  # noqa: F401 - re-exported for upstream's `xgrammar.matcher` layout
    allocate_token_bitmask,
    apply_token_bitmask_inplace,
    get_bitmask_shape,
    reset_token_bitmask,
)
from .compiled_grammar import CompiledGrammar
from .draft_tree import traverse_draft_tree as _traverse_draft_tree
from .exception import InvalidArgumentError, InvalidArgumentRuntimeError, InvalidIndexError
from .tokenizer_info import _id_list

__all__ = [
    "GrammarMatcher",
    "BatchGrammarMatcher",
    "fill_next_token_bitmask_batch",
    "allocate_token_bitmask",
    "apply_token_bitmask_inplace",
    "get_bitmask_shape",
    "reset_token_bitmask",
]

_ffi = _core.ffi
_lib = _core.lib
# The per-token calls, bound once (a lib attribute lookup per call is ~35 ns); their verdict
# comes back as the return value instead of through an out-parameter (xgr2.h).
_fill_ret = _lib.xgr_matcher_fill_bitmask_ret
_accept_ret = _lib.xgr_matcher_accept_token_ret
_XGR_ERR_STATE = _lib.XGR_ERR_STATE  # read from xgr2.h through the cdef
# The matcher constructor's calls, bound once for the same reason.
_ffi_new = _ffi.new
_ffi_gc = _ffi.gc
_matcher_new = _lib.xgr_matcher_new
_matcher_free = _lib.xgr_matcher_free
_NULL = _ffi.NULL
_INT32_MAX = 2**31 - 1


_I32 = None  # numpy.dtype("int32"), resolved on first use
# (weakref to the torch tensor, data_ptr, _version, checked view) of the last tensor a
# matcher checked: GrammarMatcher._check_bitmask.
_LAST_CHECKED: Optional[tuple] = None


def _bitmask_base(bitmask: Any) -> Tuple[Any, int, int, int]:
    """(`int32_t *` to row 0, rows, words per row, row stride in words) of a writable CPU
    int32 bitmask whose rows are contiguous. Raises TypeError / ValueError naming the problem.

    This runs once per token, so attribute reads are chosen and ordered for speed."""
    global _I32
    torch = sys.modules.get("torch")
    if torch is not None and isinstance(bitmask, torch.Tensor):
        if bitmask.dtype is not torch.int32:
            raise InvalidArgumentError(f"bitmask must have dtype torch.int32, got {bitmask.dtype}")
        if not bitmask.is_cpu:
            raise ValueError(
                f"bitmask must be on the CPU, got device {bitmask.device}; fill a CPU bitmask "
                "and copy it to the device"
            )
        shape = bitmask.shape
        ndim = len(shape)
        if ndim == 2:
            if bitmask.is_contiguous():
                rows, words, stride = shape[0], shape[1], shape[1]
            else:
                strides = bitmask.stride()
                if strides[1] != 1 and shape[1] > 1:
                    raise ValueError("bitmask rows must be contiguous (stride 1 along the last dim)")
                rows, words, stride = shape[0], shape[1], strides[0]
        elif ndim == 1:
            if bitmask.stride(0) != 1 and shape[0] > 1:
                raise ValueError("bitmask rows must be contiguous (stride 1 along the last dim)")
            rows, words, stride = 1, shape[0], shape[0]
        else:
            raise InvalidArgumentError(f"bitmask must be 1-D or 2-D, got shape {tuple(shape)}")
        return _ffi.cast("int32_t *", bitmask.data_ptr()), rows, words, stride
    np = sys.modules.get("numpy")
    if np is not None and isinstance(bitmask, np.ndarray):
        if _I32 is None:
            _I32 = np.dtype(np.int32)
        if bitmask.dtype != _I32:
            raise InvalidArgumentError(f"bitmask must have dtype int32 (native byte order), got {bitmask.dtype}")
        ndim = bitmask.ndim
        if ndim not in (1, 2):
            raise ValueError(f"bitmask must be 1-D or 2-D, got shape {bitmask.shape}")
        flags = bitmask.flags
        if not flags.writeable:
            raise ValueError("bitmask is read-only")
        shape = bitmask.shape
        rows, words = (shape[0], shape[1]) if ndim == 2 else (1, shape[0])
        if flags.c_contiguous:
            return _ffi.from_buffer("int32_t[]", bitmask), rows, words, words
        strides = bitmask.strides
        if strides[-1] != 4 and words > 1:
            raise ValueError("bitmask rows must be contiguous (stride 1 along the last axis)")
        if ndim == 2 and strides[0] % 4:
            raise ValueError("bitmask row stride must be a whole number of int32 words")
        addr = bitmask.__array_interface__["data"][0]
        return _ffi.cast("int32_t *", addr), rows, words, strides[0] // 4 if ndim == 2 else words
    raise TypeError(
        "bitmask must be a torch.Tensor (CPU, int32) or a numpy.ndarray (int32), got "
        f"{type(bitmask).__name__}"
    )


def _grammar_consts(compiled: CompiledGrammar) -> Tuple[int, int, Tuple[int, ...]]:
    """(vocab size, bitmask words per row, the tokenizer's stop tokens) of a compiled
    grammar, read once and kept on it: every matcher of the grammar starts from them."""
    info = compiled._tokenizer_info
    vocab_size = info.vocab_size
    consts = (vocab_size, (vocab_size + 31) // 32, tuple(info.stop_token_ids))
    compiled._matcher_consts = consts
    return consts


def _check_index(index: Any, rows: int) -> int:
    if isinstance(index, bool) or not hasattr(index, "__index__"):
        raise TypeError(f"index must be an int, got {type(index).__name__}")
    index = index.__index__()
    if not 0 <= index < rows:
        raise InvalidIndexError(f"index {index} is out of range for a bitmask with {rows} row(s)")
    return index


def _tensor_version(t: Any) -> Optional[int]:
    """A torch tensor's version counter, or None for anything without one: numpy arrays,
    and tensors made under ``torch.inference_mode()``, which track no version (reading it
    raises), so their checked view is never reused."""
    try:
        return t._version
    except (AttributeError, RuntimeError):
        return None


class GrammarMatcher:
    """Matches LLM output against a compiled grammar and gives the bitmask of the tokens that
    may come next.

    The matcher accepts tokens (or raw strings) one step at a time, can be rolled back by
    steps (speculative decoding, jump-forward), and terminates when it accepts a stop token
    where the grammar may end (with ``terminate_without_stop_token``, it reports itself
    terminated wherever the grammar may end, as upstream xgrammar does). A matcher belongs to
    one thread at a time; :meth:`fork` makes an independent copy.
    """

    __slots__ = (
        "_ptr",
        "_compiled",
        "_flag",
        "_row_words",
        "_vocab_size",
        "_stop_token_ids",
        "_terminate_without_stop_token",
        "_max_rollback_tokens",
        "_default_temperature",
        "_warned_temperature",
        "_bm",
        "_bm_ptr",
        "_bm_version",
        "_bm_base",
        "__weakref__",
    )

    def __init__(
        self,
        compiled_grammar: CompiledGrammar,
        *,
        override_stop_tokens: Optional[Union[int, List[int]]] = None,
        terminate_without_stop_token: bool = False,
        max_rollback_tokens: int = -1,
        default_temperature: Optional[float] = None,
    ) -> None:
        """Constructs the matcher.

        Parameters
        ----------
        compiled_grammar : CompiledGrammar
            The compiled grammar to match.

        override_stop_tokens : Optional[Union[int, List[int]]], default: None
            Stop tokens that replace the tokenizer's (an empty list: no stop token).

        terminate_without_stop_token : bool, default: False
            As upstream xgrammar: :meth:`is_terminated` is :meth:`is_completed` (no stop token
            is needed, and none is accepted), while whatever the grammar allows goes on being
            accepted after it may end (e.g. ``[a-z]*`` accepts "ab" and then "c"). Masks are
            as without the flag (the stop tokens where the grammar may end).

        max_rollback_tokens : int, default: -1
            How many steps are kept for :meth:`rollback`; -1 = unlimited.

        default_temperature : Optional[float], default: None
            What :attr:`temperature` reports where no open rule has a ``temperature``
            attribute (finite, >= 0; None: no temperature).
        """
        # (A new request's matcher: the defaults take the fewest steps; the grammar's
        # constants are read once per CompiledGrammar, see _grammar_consts.)
        if not isinstance(compiled_grammar, CompiledGrammar):
            raise ValueError("The grammar should be compiled before passing it to GrammarMatcher.")
        consts = compiled_grammar._matcher_consts or _grammar_consts(compiled_grammar)
        if override_stop_tokens is None:
            stops = None
        else:
            stops = _id_list(override_stop_tokens, "override_stop_tokens")
            vocab_size = consts[0]
            for t in stops:
                if not 0 <= t < vocab_size:
                    raise InvalidArgumentError(
                        f"override_stop_tokens contains {t}, outside the vocabulary "
                        f"[0, {vocab_size})"
                    )
        if max_rollback_tokens.__class__ is not int and (
                isinstance(max_rollback_tokens, bool) or not isinstance(max_rollback_tokens, int)):
            raise TypeError("max_rollback_tokens must be an int")
        if max_rollback_tokens < -1:
            raise ValueError(f"max_rollback_tokens must be -1 or >= 0, got {max_rollback_tokens}")
        max_rollback = max_rollback_tokens if max_rollback_tokens <= _INT32_MAX else _INT32_MAX
        if default_temperature is not None:
            default_temperature = _check_temperature(default_temperature)
        out = _ffi_new("xgr_matcher **")
        terminate = 1 if terminate_without_stop_token else 0
        if stops is None:
            rc = _matcher_new(compiled_grammar._ptr, _NULL, 0, 0, terminate, max_rollback, out)
        else:
            arr = _ffi_new("int32_t[]", stops) if stops else _NULL
            rc = _matcher_new(compiled_grammar._ptr, arr, len(stops), 1, terminate,
                              max_rollback, out)
        if rc:
            raise _core.error_from_status(rc, "creating the matcher")
        # (_init's assignments, inline: one call less per request)
        self._default_temperature = default_temperature
        self._warned_temperature = False
        self._ptr = _ffi_gc(out[0], _matcher_free)
        self._compiled = compiled_grammar
        self._flag = None
        self._bm = None
        self._bm_ptr = 0
        self._bm_version = -1
        self._bm_base = None
        self._vocab_size = consts[0]
        self._row_words = consts[1]
        self._stop_token_ids = consts[2] if stops is None else stops
        self._terminate_without_stop_token = terminate == 1
        self._max_rollback_tokens = max_rollback_tokens

    def _init(self, ptr, compiled, stops, terminate_without_stop, max_rollback,
              default_temperature: Optional[float] = None) -> None:
        consts = compiled._matcher_consts or _grammar_consts(compiled)
        self._default_temperature = default_temperature
        self._warned_temperature = False
        self._ptr = ptr
        self._compiled = compiled
        self._flag = None  # accept_string's out-parameter, made on first use
        self._bm: Any = None  # the tensor last filled, with its checked view
        self._bm_ptr = 0
        self._bm_version = -1
        self._bm_base: Optional[tuple] = None
        self._vocab_size = consts[0]
        self._row_words = consts[1]
        self._stop_token_ids = stops  # never changed in place (read through copies)
        self._terminate_without_stop_token = terminate_without_stop
        self._max_rollback_tokens = max_rollback

    # ---- stepping -----------------------------------------------------------------------

    def accept_token(self, token_id: int, *, debug_print: bool = False) -> bool:
        """Accepts one token. Returns True and advances the state if the grammar allows it;
        returns False and leaves the state unchanged otherwise (including after
        termination).

        Raises
        ------
        ValueError
            ``token_id`` is outside ``[0, vocab_size)``.
        """
        try:
            r = _accept_ret(self._ptr, token_id)
        except OverflowError:
            raise InvalidArgumentError(
                f"token id {token_id} is outside the vocabulary [0, {self._vocab_size})"
            ) from None
        if r < 0:
            self._raise_or_false(-r, f"accepting token {token_id}")
            r = 0
        accepted = r == 1
        if debug_print:
            print(
                f"[xgrammar2] accept_token({token_id}) -> {accepted}; "
                f"{self._debug_print_internal_state()}"
            )
        return accepted

    def _raise_or_false(self, rc: int, context: str) -> None:
        # A terminated matcher rejects further input (upstream returns False); any other
        # failure is an exception.
        if rc == _XGR_ERR_STATE and _lib.xgr_matcher_is_terminated(self._ptr):
            return
        raise _core.error_from_status(rc, context)

    def accept_string(self, input_str: Union[str, bytes], *, debug_print: bool = False) -> bool:
        """Accepts a string (as UTF-8) or raw bytes as one step (one rollback unit). Returns
        False and leaves the state unchanged if the grammar does not allow all of it."""
        data = _core.to_bytes(input_str, "input_str")
        flag = self._flag
        if flag is None:
            flag = self._flag = _ffi.new("int *")
        rc = _lib.xgr_matcher_accept_bytes(self._ptr, data, len(data), flag)
        if rc:
            self._raise_or_false(rc, "accepting a string")
            flag[0] = 0
        accepted = bool(flag[0])
        if debug_print:
            print(
                f"[xgrammar2] accept_string({input_str!r}) -> {accepted}; "
                f"{self._debug_print_internal_state()}"
            )
        return accepted

    def fill_next_token_bitmask(
        self, bitmask: Any, index: int = 0, *, debug_print: bool = False
    ) -> bool:
        """Writes the allowed next tokens into row ``index`` of ``bitmask`` (the whole row;
        ids at or beyond the tokenizer's size are never allowed). Does not change the state.

        Parameters
        ----------
        bitmask
            A CPU ``torch.int32`` tensor or ``numpy.int32`` array, shape
            ``(batch, ceil(vocab_size / 32))`` (as from :func:`allocate_token_bitmask`) or
            1-D for a single row; rows must be contiguous.

        index : int, default: 0
            The row to fill.

        Returns
        -------
        need_apply : bool
            False when every token is allowed (applying the mask can be skipped).

        Raises
        ------
        ValueError
            Wrong dtype, device, layout, too few words per row, or ``index`` out of range
            (InvalidIndexError, also an IndexError).
        """
        # An engine passes the same tensor every step: its checked view is reused while the
        # tensor still has the same storage address and version. Every in-place op that can
        # change its shape or strides (resize_, set_, as_strided_, transpose_, ...) bumps the
        # version; `.data =` does not, but gives new storage. Two reads instead of four
        # (data_ptr, shape, stride: ~0.25 us a token).
        if (bitmask is self._bm and bitmask.data_ptr() == self._bm_ptr
                and bitmask._version == self._bm_version):
            ptr, rows, words, stride = self._bm_base
        else:
            ptr, rows, words, stride = self._check_bitmask(bitmask)
        if index != 0 or rows != 1:
            index = _check_index(index, rows)
            ptr = ptr + index * stride
        r = _fill_ret(self._ptr, ptr, words)
        if r < 0:
            raise _core.error_from_status(-r, "filling the bitmask")
        need_apply = r != 0
        if debug_print:
            print(f"[xgrammar2] fill_next_token_bitmask(index={index}) -> need_apply={need_apply}")
        return need_apply

    def _check_bitmask(self, bitmask: Any) -> Tuple[Any, int, int, int]:
        """The checked view of a bitmask this matcher did not fill last, remembered for the
        next fills. An engine hands every request's matcher the same tensor, so the view
        checked by the last matcher of any request is reused when the tensor is unchanged
        (a new request's first fill skips the dtype, device and layout checks)."""
        global _LAST_CHECKED
        self._bm = None
        last = _LAST_CHECKED
        if (last is not None and last[0]() is bitmask and bitmask.data_ptr() == last[1]
                and bitmask._version == last[2]):
            base = last[3]
        else:
            base = _bitmask_base(bitmask)
            last = None
        words = base[2]
        if words < self._row_words:
            raise InvalidArgumentError(
                f"bitmask rows have {words} int32 words but vocab_size {self._vocab_size} "
                f"needs {self._row_words}; allocate with get_bitmask_shape(batch, vocab_size)"
            )
        version = _tensor_version(bitmask)
        if version is not None:  # a torch tensor (numpy views and inference tensors are not cached)
            self._bm_ptr = bitmask.data_ptr()
            self._bm_version = version
            self._bm_base = base
            self._bm = bitmask
            if last is None:
                _LAST_CHECKED = (weakref.ref(bitmask), self._bm_ptr, self._bm_version, base)
        return base

    def _fill_next_token_bitmask_bruteforce(self, bitmask: Any, index: int = 0) -> None:
        """Test oracle: the same row as :meth:`fill_next_token_bitmask`, computed by running
        the parser on every token without the mask cache. Slow."""
        ptr, rows, words, stride = _bitmask_base(bitmask)
        if words < self._row_words:
            raise ValueError(
                f"bitmask rows have {words} int32 words but vocab_size {self._vocab_size} needs "
                f"{self._row_words}"
            )
        index = _check_index(index, rows)
        _core.check(
            _lib.xgr_matcher_fill_bitmask_bruteforce(self._ptr, ptr + index * stride, words),
            "filling the bitmask (bruteforce)",
        )

    # traverse_draft_tree(retrieve_next_token, retrieve_next_sibling, draft_tokens,
    # token_bitmask, time_threshold=-1.0, temperatures=None) -> bool: fills token_bitmask[i]
    # for each node i of a speculative-decoding draft tree, walking it with accept / rollback;
    # the state is unchanged afterwards. The function itself is the method (one Python frame
    # less per call); see xgrammar2.draft_tree.traverse_draft_tree.
    traverse_draft_tree = _traverse_draft_tree

    def find_jump_forward_string(self) -> str:
        """The longest string every continuation must start with ("" when there is a choice).
        It may be appended to the output without decoding. Does not change the state.

        A trailing incomplete UTF-8 sequence is left out; use
        :meth:`find_jump_forward_bytes` for the exact bytes."""
        data = self.find_jump_forward_bytes()
        try:
            return data.decode("utf-8")
        except UnicodeDecodeError as e:
            if e.end == len(data) and e.reason == "unexpected end of data":
                return data[: e.start].decode("utf-8", "replace")
            return data.decode("utf-8", "replace")

    def find_jump_forward_bytes(self) -> bytes:
        """(xgrammar2) The jump-forward string as exact bytes."""
        out = _ffi.new("char **")
        out_len = _ffi.new("size_t *")
        _core.check(_lib.xgr_matcher_jump_forward(self._ptr, out, out_len), "jump-forward")
        return _core.take_string(out, out_len)

    def rollback(self, num_tokens: int = 1) -> None:
        """Undoes the last ``num_tokens`` accepted steps (tokens or strings).

        Raises
        ------
        RuntimeError
            More steps than were kept (see ``max_rollback_tokens``).
        """
        if isinstance(num_tokens, bool) or not isinstance(num_tokens, int):
            raise TypeError(f"num_tokens must be an int, got {type(num_tokens).__name__}")
        if num_tokens < 0:
            raise ValueError(f"num_tokens must be non-negative, got {num_tokens}")
        if num_tokens == 0:
            return
        _core.check(
            _lib.xgr_matcher_rollback(self._ptr, min(num_tokens, _INT32_MAX)),
            f"rolling back {num_tokens} step(s)",
        )

    def validate_tokens(self, tokens: Sequence[int]) -> int:
        """The length of the longest prefix of ``tokens`` the matcher would accept from its
        current state. The state is not changed.

        Raises
        ------
        ValueError
            A token id is outside ``[0, vocab_size)``.
        """
        ids = _id_list(tokens, "tokens") or []
        for t in ids:
            if not 0 <= t < self._vocab_size:
                raise InvalidArgumentError(
                    f"token id {t} is outside the vocabulary [0, {self._vocab_size})"
                )
        if not ids:
            return 0
        arr = _ffi.new("int32_t[]", ids)
        n_out = _ffi.new("size_t *")
        _core.check(
            _lib.xgr_matcher_validate_tokens(self._ptr, arr, len(ids), n_out),
            "validating tokens",
        )
        return int(n_out[0])

    # ---- state --------------------------------------------------------------------------

    def is_terminated(self) -> bool:
        """Whether the matcher has terminated (accepted a stop token, or, with
        ``terminate_without_stop_token``, the grammar may end here)."""
        return bool(_lib.xgr_matcher_is_terminated(self._ptr))

    def is_completed(self) -> bool:
        """Whether the input so far is a complete match of the grammar (it may end here, so a
        stop token would be accepted)."""
        return bool(_lib.xgr_matcher_can_end(self._ptr))

    def reset(self) -> None:
        """Returns to the initial state."""
        _lib.xgr_matcher_reset(self._ptr)

    def fork(self) -> "GrammarMatcher":
        """An independent copy of this matcher with identical state."""
        out = _ffi.new("xgr_matcher **")
        _core.check(_lib.xgr_matcher_fork(self._ptr, out), "forking the matcher")
        m = object.__new__(GrammarMatcher)
        m._init(
            _ffi.gc(out[0], _lib.xgr_matcher_free),
            self._compiled,
            list(self._stop_token_ids),
            self._terminate_without_stop_token,
            self._max_rollback_tokens,
            self._default_temperature,
        )
        return m

    @property
    def compiled_grammar(self) -> CompiledGrammar:
        return self._compiled

    @property
    def stop_token_ids(self) -> List[int]:
        """The stop tokens in use (the override, or the tokenizer's)."""
        return list(self._stop_token_ids)

    @property
    def max_rollback_tokens(self) -> int:
        """How many steps are kept for rollback; -1 = unlimited."""
        return self._max_rollback_tokens

    @property
    def temperature(self) -> Optional[float]:
        """The sampling temperature the grammar asks for here: that of the innermost open
        rule with a ``temperature`` attribute (the largest where ambiguous paths disagree,
        with a warning on stderr once), else ``default_temperature`` (None if not given)."""
        has = _ffi.new("int *")
        val = _ffi.new("float *")
        conflict = _ffi.new("int *")
        _core.check(_lib.xgr_matcher_temperature(self._ptr, has, val, conflict),
                    "reading the temperature")
        if not has[0]:
            return self._default_temperature
        if conflict[0] and not self._warned_temperature:
            self._warned_temperature = True
            sys.stderr.write("[xgrammar2] warning: Multiple active grammar paths specify "
                             "different temperatures; using the maximum\n")
            sys.stderr.flush()
        return float(val[0])

    def get_captures(self, deduplicate: bool = True) -> List[Tuple[str, bytes]]:
        """The spans of rules with a ``capture`` attribute matched so far, as
        ``(label, bytes)`` in the order they completed. A rule's occurrence records a span
        each time it completes (``/[0-9]+/`` after every digit); ``deduplicate`` keeps only
        the longest of each occurrence. Rollback and reset drop the spans of the input they
        undo; filling masks records nothing."""
        out = _ffi.new("char **")
        n = _ffi.new("size_t *")
        _core.check(_lib.xgr_matcher_captures(self._ptr, 1 if deduplicate else 0, out, n),
                    "reading the captures")
        try:
            data = bytes(_ffi.buffer(out[0], n[0])) if n[0] else b""
        finally:
            _lib.xgr_free(out[0])
        res: List[Tuple[str, bytes]] = []
        i = 0
        while i < len(data):
            (ll,) = struct.unpack_from("=I", data, i)
            label = data[i + 4:i + 4 + ll].decode("utf-8", "replace")
            i += 4 + ll
            (vl,) = struct.unpack_from("=I", data, i)
            value = data[i + 4:i + 4 + vl]
            res.append((label, self._unmark(value) if b"\xff" in value else value))
            i += 4 + vl
        return res

    def _unmark(self, value: bytes) -> bytes:
        """Replaces token-level terminals' markers (common/token_marker.h: 0xFF and five
        continuation bytes carrying the id) by the tokens' text."""
        info = self._compiled.tokenizer_info
        out = bytearray()
        i = 0
        while i < len(value):
            b = value[i]
            if b == 0xFF and i + 6 <= len(value) and all(0x80 <= c < 0xC0 for c in value[i + 1:i + 6]):
                tid = 0
                for c in value[i + 1:i + 6]:
                    tid = tid << 6 | (c & 0x3F)
                text = b""
                if 0 <= tid < len(info.decoded_vocab):
                    text = bytes(info.decoded_vocab[tid])
                if not text and 0 <= tid < len(info.encoded_vocab):
                    t = info.encoded_vocab[tid]
                    text = t.encode("utf-8", "surrogatepass") if isinstance(t, str) else bytes(t)
                out += text
                i += 6
            else:
                out.append(b)
                i += 1
        return bytes(out)

    @property
    def num_steps(self) -> int:
        """(xgrammar2) The number of steps that can currently be rolled back."""
        return int(_lib.xgr_matcher_num_steps(self._ptr))

    def _debug_print_internal_state(self) -> str:
        """A one-line summary of the matcher's state (format subject to change)."""
        deadline = int(_lib.xgr_matcher_token_deadline(self._ptr))
        budget = f", budget_deadline={deadline}" if deadline >= 0 else ""
        return (
            f"GrammarMatcher(steps={self.num_steps}, completed={self.is_completed()}, "
            f"terminated={self.is_terminated()}{budget}, "
            f"jump_forward={self.find_jump_forward_bytes()[:40]!r})"
        )


def _check_temperature(value: Any) -> Optional[float]:
    """A default temperature: None, or a finite number >= 0."""
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise InvalidArgumentRuntimeError("default_temperature must be a float or None")
    value = float(value)
    if math.isfinite(value) and 0 <= value <= 3.4028234663852886e38:
        value = struct.unpack("f", struct.pack("f", value))[0]  # a float32, as upstream's
    elif math.isfinite(value) and value > 0:
        value = math.inf  # beyond float32
    if not math.isfinite(value) or value < 0:
        raise InvalidArgumentRuntimeError(f"default_temperature must be a finite non-negative number, got {value}")
    return value


def _default_threads() -> int:
    return max(1, (os.cpu_count() or 2) // 2)


def fill_next_token_bitmask_batch(
    matchers: Sequence[GrammarMatcher],
    bitmask: Any,
    indices: Optional[Sequence[int]] = None,
    max_threads: Optional[int] = None,
) -> None:
    """Fills one bitmask row per matcher, in parallel on up to ``max_threads`` threads
    (default: half the CPUs), with the GIL released.

    ``bitmask`` is 2-D (CPU ``torch.int32`` or ``numpy.int32``) with contiguous rows and the
    same row stride as its width; ``matchers[i]`` writes row ``indices[i]`` (row ``i`` when
    ``indices`` is None). A matcher may appear only once.
    """
    matchers = list(matchers)
    n = len(matchers)
    ptr, rows, words, stride = _bitmask_base(bitmask)
    torch = sys.modules.get("torch")
    ndim = bitmask.dim() if torch is not None and isinstance(bitmask, torch.Tensor) else bitmask.ndim
    if ndim != 2:
        raise ValueError("the batch bitmask must be 2-D: (batch, ceil(vocab_size / 32))")
    if stride != words:
        raise ValueError("the batch bitmask must be C-contiguous (row stride == row width)")
    if n == 0:
        return
    for m in matchers:
        if not isinstance(m, GrammarMatcher):
            raise TypeError(f"matchers must be GrammarMatcher objects, got {type(m).__name__}")
        if words < m._row_words:
            raise ValueError(
                f"bitmask rows have {words} int32 words but vocab_size {m._vocab_size} needs "
                f"{m._row_words}"
            )
    if len({id(m) for m in matchers}) != n:
        raise ValueError("a matcher appears more than once in the batch")
    if indices is None:
        if n > rows:
            raise ValueError(f"{n} matchers but the bitmask has only {rows} rows")
        idx_arr = _ffi.NULL
    else:
        idx = _id_list(indices, "indices") or []
        if len(idx) != n:
            raise ValueError(f"{n} matchers but {len(idx)} indices")
        for i in idx:
            if not 0 <= i < rows:
                raise InvalidIndexError(f"index {i} is out of range for a bitmask with {rows} rows")
        if len(set(idx)) != n:
            raise ValueError("indices must be unique")
        idx_arr = _ffi.new("int32_t[]", idx)
    if max_threads is None:
        max_threads = _default_threads()
    if isinstance(max_threads, bool) or not isinstance(max_threads, int) or max_threads < 1:
        raise ValueError(f"max_threads must be a positive int, got {max_threads!r}")
    arr = _ffi.new("xgr_matcher *[]", [m._ptr for m in matchers])
    _core.check(
        _lib.xgr_fill_bitmask_batch(arr, n, ptr, words, idx_arr, min(max_threads, n)),
        "filling the batch bitmask",
    )


class BatchGrammarMatcher:
    """Batch operations over several matchers; bitmask filling runs on a thread pool in the
    core with the GIL released."""

    def __init__(self, max_threads: Union[int, str] = "auto") -> None:
        """``max_threads``: the most threads used to fill a batch; "auto" = half the CPUs."""
        if max_threads == "auto":
            max_threads = _default_threads()
        if isinstance(max_threads, bool) or not isinstance(max_threads, int) or max_threads < 1:
            raise ValueError(f"max_threads must be a positive int or 'auto', got {max_threads!r}")
        self._max_threads = max_threads

    @property
    def max_threads(self) -> int:
        return self._max_threads

    def batch_fill_next_token_bitmask(
        self,
        matchers: Sequence[GrammarMatcher],
        bitmask: Any,
        indices: Optional[Sequence[int]] = None,
        debug_print: bool = False,
    ) -> None:
        """Fills row ``indices[i]`` (or ``i``) of ``bitmask`` for ``matchers[i]``."""
        fill_next_token_bitmask_batch(matchers, bitmask, indices, self._max_threads)
        if debug_print:
            print(f"[xgrammar2] batch_fill_next_token_bitmask: {len(matchers)} matcher(s)")

    @staticmethod
    def batch_fill_temperature(
        matchers: Sequence[GrammarMatcher], temperatures: Any,
        indices: Optional[Sequence[int]] = None,
    ) -> None:
        """Writes ``matchers[i].temperature`` (-1.0 for None) into ``temperatures[indices[i]]``
        (or ``[i]``); ``temperatures`` is a 1-D float32 tensor."""
        import torch

        if (not isinstance(temperatures, torch.Tensor) or temperatures.dtype != torch.float32
                or temperatures.dim() != 1):
            raise InvalidArgumentRuntimeError("the temperatures tensor must be a 1-D torch.float32 tensor")
        n = temperatures.shape[0]
        if indices is None:
            if len(matchers) > n:
                raise InvalidArgumentRuntimeError(f"the temperatures tensor has {n} entries but there are "
                                 f"{len(matchers)} matchers")
            indices = range(len(matchers))
        elif len(indices) != len(matchers):
            raise InvalidArgumentRuntimeError(f"indices size {len(indices)} does not match the number of "
                             f"matchers {len(matchers)}")
        for i, m in zip(indices, matchers):
            if not 0 <= int(i) < n:
                raise InvalidArgumentRuntimeError(f"index {i} is out of bounds for the temperatures tensor of "
                                 f"size {n}")
        for i, m in zip(indices, matchers):
            t = m.temperature
            temperatures[int(i)] = -1.0 if t is None else t

    @staticmethod
    def batch_accept_token(
        matchers: Sequence[GrammarMatcher], tokens: Sequence[int], debug_print: bool = False
    ) -> List[bool]:
        """``matchers[i].accept_token(tokens[i])`` for every i."""
        if len(matchers) != len(tokens):
            raise InvalidArgumentError(f"{len(matchers)} matchers but {len(tokens)} tokens")
        return [m.accept_token(t, debug_print=debug_print) for m, t in zip(matchers, tokens)]

    @staticmethod
    def batch_accept_string(
        matchers: Sequence[GrammarMatcher],
        strings: Sequence[Union[str, bytes]],
        debug_print: bool = False,
    ) -> List[bool]:
        """``matchers[i].accept_string(strings[i])`` for every i."""
        if len(matchers) != len(strings):
            raise InvalidArgumentError(f"{len(matchers)} matchers but {len(strings)} strings")
        return [m.accept_string(s, debug_print=debug_print) for m, s in zip(matchers, strings)]

    @staticmethod
    def batch_rollback(
        matchers: Sequence[GrammarMatcher], num_tokens: Union[int, Sequence[int]] = 1
    ) -> None:
        """Rolls every matcher back by ``num_tokens`` (one count, or one per matcher)."""
        if isinstance(num_tokens, int):
            num_tokens = [num_tokens] * len(matchers)
        if len(matchers) != len(num_tokens):
            raise InvalidArgumentError(f"{len(matchers)} matchers but {len(num_tokens)} rollback counts")
        for m, k in zip(matchers, num_tokens):
            m.rollback(k)


def __getattr__(name: str) -> Any:
    # `xgrammar.matcher.bitmask_dtype` exists upstream; resolved lazily to keep torch unloaded.
    if name == "bitmask_dtype":
        from . import bitmask

        return bitmask.bitmask_dtype
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
