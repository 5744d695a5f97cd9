"""Constrained generation with Hugging Face transformers: a ``LogitsProcessor`` for
``model.generate()``, with the constructor and behaviour of upstream xgrammar's
``xgrammar.contrib.hf.LogitsProcessor``.

.. code:: python

    import xgrammar2 as xgr
    import xgrammar2.contrib.hf

    vocab = model.config.vocab_size  # may exceed the tokenizer's (padding)
    tokenizer_info = xgr.TokenizerInfo.from_huggingface(tokenizer, vocab_size=vocab)
    compiled = xgr.GrammarCompiler(tokenizer_info).compile_json_schema(schema)
    processor = xgr.contrib.hf.LogitsProcessor(compiled)       # one per generate() call
    out = model.generate(input_ids, logits_processor=[processor], max_new_tokens=256)

    # Optional: fill the next mask while the GPU runs the next forward pass.
    processor = xgr.contrib.hf.LogitsProcessor(compiled)
    out = model.generate(input_ids, logits_processor=[processor],
                         stopping_criteria=[processor.overlap_hook()], max_new_tokens=256)

How one step works: the first call (the prompt's logits) creates one matcher per batch row
and remembers the prompt length; every later call accepts each row's newly sampled token,
fills the rows' bitmask on the CPU (all rows at once on a thread pool, GIL released, when the
batch has more than one row) and applies it to the scores on their own device (a pinned
host buffer copied with ``non_blocking=True`` for CUDA scores, then the Triton kernel; nothing
in the processor synchronizes the device except reading the sampled tokens). A row whose
matcher has terminated (it accepted a stop token) is left alone from then on: nothing is
accepted for it and its scores are not masked (``generate`` pads finished rows itself).

With :meth:`LogitsProcessor.overlap_hook` passed as a stopping criterion, the sampled tokens
are copied to the host right after sampling (before ``generate`` launches the next forward
pass), and a worker thread accepts them and fills the next bitmask while the main thread
launches the forward pass and the GPU runs it; the next call only waits for that work and
applies the mask.
"""

from __future__ import annotations

import concurrent.futures
import threading
from typing import Any, List, Optional, Sequence, Union

import torch
import transformers

from ..bitmask import apply_token_bitmask_inplace
from ..compiled_grammar import CompiledGrammar
from ..matcher import GrammarMatcher, _default_threads, fill_next_token_bitmask_batch

__all__ = ["LogitsProcessor"]

_EXECUTOR: Optional[concurrent.futures.ThreadPoolExecutor] = None
_EXECUTOR_LOCK = threading.Lock()


def _executor() -> concurrent.futures.ThreadPoolExecutor:
    """The worker threads of :meth:`LogitsProcessor.overlap_hook` (shared by all processors;
    each processor has at most one job in flight)."""
    global _EXECUTOR
    with _EXECUTOR_LOCK:
        if _EXECUTOR is None:
            _EXECUTOR = concurrent.futures.ThreadPoolExecutor(
                max_workers=4, thread_name_prefix="xgrammar2-hf"
            )
        return _EXECUTOR


class LogitsProcessor(transformers.LogitsProcessor):
    """A ``transformers.LogitsProcessor`` that restricts ``model.generate()`` to what compiled
    grammars allow.

    Example
    -------
    .. code:: python

        config = AutoConfig.from_pretrained(model_name)
        # The model's vocabulary may be larger than the tokenizer's (padding): pass it.
        tokenizer_info = xgr.TokenizerInfo.from_huggingface(tokenizer, vocab_size=config.vocab_size)
        compiled = xgr.GrammarCompiler(tokenizer_info).compile_builtin_json_grammar()
        processor = xgr.contrib.hf.LogitsProcessor(compiled)
        model.generate(input_ids, logits_processor=[processor])

    Notes
    -----
    - A processor serves one ``generate()`` call (its matchers hold that call's state); make
      a new one for each call, or call :meth:`reset` in between.
    - The batch size is ``input_ids.shape[0]`` of the first call, i.e. prompts times
      ``num_return_sequences``. Beam search is not supported (beams are reordered between
      steps; the matchers would not follow).
    - Only tokens the grammar allows reach the sampler, so ``generate``'s own stop condition
      should be one of the grammar's stop tokens (``tokenizer_info.stop_token_ids``): a row
      ends when the grammar accepts its stop token. Stopping a row by other means
      (``stop_strings``, ``max_time``) makes ``generate`` pad it, and the padding is rejected.
    - Scores wider than the tokenizer's vocabulary are fine: ids at or beyond
      ``tokenizer_info.vocab_size`` are masked while a row is constrained.
    """

    def __init__(
        self,
        compiled_grammar: Union[CompiledGrammar, Sequence[CompiledGrammar]],
        *,
        max_threads: Optional[int] = None,
    ) -> None:
        """Creates the processor.

        Parameters
        ----------
        compiled_grammar : CompiledGrammar | list[CompiledGrammar]
            One grammar for every batch row, or one per row (a list whose length is the batch
            size; a list of one is used for every row). All must be compiled against the same
            tokenizer vocabulary size.

        max_threads : Optional[int], default: None
            (xgrammar2) The most threads that fill a batch's bitmask; default: half the CPUs.

        Raises
        ------
        TypeError
            An item is not a CompiledGrammar.
        ValueError
            An empty list, or grammars compiled for different vocabulary sizes.
        """
        if isinstance(compiled_grammar, CompiledGrammar):
            grammars: List[CompiledGrammar] = [compiled_grammar]
        elif isinstance(compiled_grammar, (list, tuple)):
            grammars = list(compiled_grammar)
        else:
            raise TypeError(
                "compiled_grammar must be a CompiledGrammar or a list of them, got "
                f"{type(compiled_grammar).__name__}"
            )
        if not grammars:
            raise ValueError(
                "compiled_grammar is an empty list: give one grammar, or one per batch row"
            )
        for i, g in enumerate(grammars):
            if not isinstance(g, CompiledGrammar):
                raise TypeError(
                    f"compiled_grammar[{i}] is a {type(g).__name__}, not a CompiledGrammar "
                    "(compile it with xgrammar2.GrammarCompiler)"
                )
        sizes = {g.tokenizer_info.vocab_size for g in grammars}
        if len(sizes) != 1:
            raise ValueError(
                f"the grammars were compiled for different vocabulary sizes {sorted(sizes)}; "
                "compile them all against the model's tokenizer info"
            )
        if max_threads is not None and (
            isinstance(max_threads, bool) or not isinstance(max_threads, int) or max_threads < 1
        ):
            raise ValueError(f"max_threads must be a positive int or None, got {max_threads!r}")
        # Public attributes, named as upstream's.
        self.compiled_grammars: List[CompiledGrammar] = grammars
        self.matchers: List[GrammarMatcher] = []
        self.full_vocab_size: int = grammars[0].tokenizer_info.vocab_size
        self.token_bitmask: Optional[torch.Tensor] = None
        self.prefilled: bool = False
        self.batch_size: int = 0
        #: ``input_ids.shape[1]`` at the first call (None before it).
        self.prompt_length: Optional[int] = None
        self._max_threads = max_threads if max_threads is not None else _default_threads()
        self._grammars_given = list(grammars)
        self._clear()

    # ---- state ---------------------------------------------------------------------------

    def _clear(self) -> None:
        self._seen = 0  # input_ids columns whose tokens the matchers have been given
        self._active: List[int] = []  # rows still constrained
        self._active_matchers: List[GrammarMatcher] = []
        self._hosts: List[torch.Tensor] = []  # host bitmask buffers (two, pinned, for CUDA)
        self._host_views: List[Any] = []  # their numpy views (cheap row writes)
        self._released: List[set] = []  # per buffer: rows already set to "allow all"
        self._copied: List[Optional[Any]] = []  # per buffer: CUDA event after its H2D copy
        self._cur = 0  # the buffer filled for the current step
        self._need_apply = True
        self._device_mask: Optional[torch.Tensor] = None
        self._device: Optional[torch.device] = None
        self._scores_width = 0
        self._words = 0
        self._pending: Optional[tuple] = None  # (input_ids length, future) of the overlap hook
        self._tok_host: Optional[torch.Tensor] = None
        self._tok_event: Optional[Any] = None

    def reset(self) -> None:
        """Forgets the matchers and buffers, so the processor can serve another
        ``generate()`` call."""
        self._wait_pending(raise_errors=False)
        self.compiled_grammars = list(self._grammars_given)
        self.matchers = []
        self.token_bitmask = None
        self.prefilled = False
        self.batch_size = 0
        self.prompt_length = None
        self._clear()

    def _start(self, input_ids: torch.Tensor, scores: torch.Tensor) -> None:
        batch = int(input_ids.shape[0])
        grammars = self._grammars_given
        if len(grammars) == 1:
            grammars = grammars * batch
        elif len(grammars) != batch:
            raise ValueError(
                f"LogitsProcessor got {len(grammars)} compiled grammars but the batch has {batch} "
                "rows (prompts x num_return_sequences); give one grammar, or exactly one per row"
            )
        self.batch_size = batch
        self.compiled_grammars = grammars
        self.matchers = [GrammarMatcher(g) for g in grammars]
        self.prompt_length = int(input_ids.shape[1])
        self._seen = self.prompt_length
        self._active = list(range(batch))
        self._active_matchers = list(self.matchers)
        self._device = scores.device
        self._scores_width = int(scores.shape[-1])
        self._words = (max(self._scores_width, self.full_vocab_size) + 31) // 32
        # Normal tensors even when generate() runs under torch.inference_mode(): the matcher
        # reads a tensor's version counter, which inference tensors do not have.
        with torch.inference_mode(False):
            self._allocate(batch, scores)

    def _allocate(self, batch: int, scores: torch.Tensor) -> None:
        shape = (batch, self._words)
        cuda = scores.device.type == "cuda"
        n_buffers = 2 if cuda else 1
        for _ in range(n_buffers):
            if cuda:
                host = torch.empty(shape, dtype=torch.int32, pin_memory=True)
                host.fill_(-1)
                self._copied.append(torch.cuda.Event())
            else:
                host = torch.full(shape, -1, dtype=torch.int32)
                self._copied.append(None)
            self._hosts.append(host)
            self._host_views.append(host.numpy())
            self._released.append(set())
        if scores.device.type != "cpu":
            self._device_mask = torch.empty(shape, dtype=torch.int32, device=scores.device)
        self._cur = n_buffers - 1  # _fill moves to buffer 0

    # ---- one step ------------------------------------------------------------------------

    def _accept(self, tokens: List[List[int]]) -> None:
        """Gives row i the tokens ``tokens[i]`` (the columns after ``_seen``)."""
        done = False
        for i in self._active:
            m = self.matchers[i]
            for t in tokens[i]:
                if not m.accept_token(t):
                    raise RuntimeError(
                        f"xgrammar2 LogitsProcessor: batch row {i} sampled token {t}, which its "
                        f"grammar does not allow (after {m.num_steps} accepted tokens). Another "
                        "logits processor or stopping criterion may have changed the row, or "
                        "generate() stopped it with a token that is not one of the grammar's stop "
                        f"tokens {m.stop_token_ids}"
                    )
                if m.is_terminated():
                    done = True
                    break
        if done:
            keep = [i for i in self._active if not self.matchers[i].is_terminated()]
            self._active = keep
            self._active_matchers = [self.matchers[i] for i in keep]

    def _fill(self) -> None:
        """Fills the next host buffer for the active rows; terminated rows allow everything."""
        k = (self._cur + 1) % len(self._hosts)
        ev = self._copied[k]
        if ev is not None:
            ev.synchronize()  # its last host-to-device copy has run (normally long ago)
        host = self._hosts[k]
        active = self._active
        released = self._released[k]
        if len(active) + len(released) < self.batch_size:
            view = self._host_views[k]
            live = set(active)
            for i in range(self.batch_size):
                if i not in live and i not in released:
                    view[i] = -1
                    released.add(i)
        n = len(active)
        if n == 0:
            need = False
        elif n == 1:
            need = self._active_matchers[0].fill_next_token_bitmask(host, active[0])
            # An all-allowed row still has to mask the ids beyond the tokenizer's vocabulary.
            need = need or self._scores_width > self.full_vocab_size
        else:
            fill_next_token_bitmask_batch(
                self._active_matchers,
                host,
                None if n == self.batch_size else active,
                self._max_threads,
            )
            need = True
        self._cur = k
        self._need_apply = need
        self.token_bitmask = host

    def _apply(self, scores: torch.Tensor) -> torch.Tensor:
        if not self._need_apply:
            return scores
        host = self._hosts[self._cur]
        width = int(scores.shape[-1])
        if scores.device.type == "cpu":
            apply_token_bitmask_inplace(scores, host, vocab_size=width)
            return scores
        dev = self._device_mask
        dev.copy_(host, non_blocking=True)
        ev = self._copied[self._cur]
        if ev is not None:
            ev.record()
        apply_token_bitmask_inplace(scores, dev, vocab_size=width)
        return scores

    def __call__(self, input_ids: torch.LongTensor, scores: torch.FloatTensor) -> torch.FloatTensor:
        """Accepts each row's token sampled in the previous step, fills the bitmask and
        applies it to ``scores`` in place.

        Parameters
        ----------
        input_ids : torch.LongTensor
            ``(batch, length)``: the prompt plus the tokens generated so far.
        scores : torch.FloatTensor
            ``(batch, vocab)``: the next-token logits, on any device.

        Returns
        -------
        scores : torch.FloatTensor
            The same tensor, with disallowed tokens set to ``-inf``.

        Raises
        ------
        ValueError
            The number of grammars does not match the batch size (first call).
        RuntimeError
            The batch size changed, the processor is reused for a new ``generate()``
            call without :meth:`reset`, or a sampled token is not allowed by its grammar.
        """
        if not self.matchers:
            if scores.shape[0] != input_ids.shape[0]:
                raise RuntimeError(
                    f"scores have {scores.shape[0]} rows but input_ids has {input_ids.shape[0]}"
                )
            self._start(input_ids, scores)
            self.prefilled = True
            self._fill()
            return self._apply(scores)
        if input_ids.shape[0] != self.batch_size:
            raise RuntimeError(
                f"Expect input_ids.shape[0] to be LogitsProcessor.batch_size. Got "
                f"{input_ids.shape[0]} for the former, and {self.batch_size} for the latter."
            )
        if scores.device != self._device or scores.shape[-1] != self._scores_width:
            raise RuntimeError(
                f"scores changed from {self._scores_width} columns on {self._device} to "
                f"{scores.shape[-1]} on {scores.device} between calls"
            )
        length = int(input_ids.shape[1])
        pending = self._pending
        if pending is not None and pending[0] == length:
            self._pending = None
            pending[1].result()  # the overlap hook's worker accepted and filled already
            return self._apply(scores)
        self._wait_pending(raise_errors=True)
        new = length - self._seen
        if new <= 0:
            raise RuntimeError(
                f"input_ids has {length} columns, but this processor has already seen "
                f"{self._seen}: a LogitsProcessor serves one generate() call; create a new one "
                "(or call reset()) for the next"
            )
        if self._active:
            self._accept(input_ids[:, self._seen:].tolist())  # one device sync for all rows
        self._seen = length
        self._fill()
        return self._apply(scores)

    # ---- overlap -------------------------------------------------------------------------

    def overlap_hook(self) -> "transformers.StoppingCriteria":
        """(xgrammar2) A stopping criterion (it never stops anything) that lets the next
        bitmask be computed while the model runs its next forward pass. Pass it with the
        processor::

            model.generate(..., logits_processor=[processor],
                           stopping_criteria=[processor.overlap_hook()])

        ``generate`` calls stopping criteria right after it appends the sampled tokens and
        before the next forward pass. The hook queues a non-blocking copy of those tokens to
        pinned host memory and records a CUDA event; a worker thread waits for that event
        (not for the forward pass), accepts the tokens and fills the next bitmask, with the
        GIL released while it fills, so the work overlaps the launch and execution of the
        forward pass. The processor's next call waits for the worker and applies the mask.
        Without the hook the processor does the same work inside its call, after the
        forward pass."""
        return _OverlapHook(self)

    def _prefetch(self, input_ids: torch.Tensor) -> None:
        if not self.matchers or self._pending is not None:
            return
        length = int(input_ids.shape[1])
        if length != self._seen + 1 or input_ids.shape[0] != self.batch_size:
            return  # not one new token per row: the next call does it inline
        if not self._active:
            self._seen = length
            return
        if input_ids.device.type == "cuda":
            if self._tok_host is None:
                with torch.inference_mode(False):
                    self._tok_host = torch.empty(self.batch_size, dtype=torch.long, pin_memory=True)
                self._tok_event = torch.cuda.Event()
            self._tok_host.copy_(input_ids[:, -1], non_blocking=True)
            self._tok_event.record()
            job = _executor().submit(self._job_cuda, length)
        else:
            job = _executor().submit(self._job, input_ids[:, -1].tolist(), length)
        self._pending = (length, job)

    def _job_cuda(self, length: int) -> None:
        self._tok_event.synchronize()
        self._job(self._tok_host.tolist(), length)

    def _job(self, last: List[int], length: int) -> None:
        self._accept([[t] for t in last])
        self._seen = length
        self._fill()

    def _wait_pending(self, raise_errors: bool) -> None:
        pending = self._pending
        if pending is None:
            return
        self._pending = None
        try:
            pending[1].result()
        except Exception:
            if raise_errors:
                raise

    @staticmethod
    def _false_like(input_ids: torch.Tensor) -> torch.Tensor:
        # A new tensor each step: generate() may combine criteria results in place.
        return torch.zeros(input_ids.shape[0], dtype=torch.bool, device=input_ids.device)


class _OverlapHook(transformers.StoppingCriteria):
    """See :meth:`LogitsProcessor.overlap_hook`."""

    def __init__(self, processor: LogitsProcessor) -> None:
        self.processor = processor

    def __call__(self, input_ids: torch.LongTensor, scores: Any, **kwargs: Any) -> torch.BoolTensor:
        self.processor._prefetch(input_ids)
        return LogitsProcessor._false_like(input_ids)
