"""Upstream xgrammar's ``xgrammar.kernels`` layout: one module per way of applying a token
bitmask to logits. Each is a thin, typed entry point over
:func:`xgrammar2.apply_token_bitmask_inplace` (``xgrammar2.bitmask``) with one backend fixed:

- ``apply_token_bitmask_inplace_cpu``: CPU tensors (float32 / float16 / bfloat16 logits);
- ``apply_token_bitmask_inplace_cuda``: CUDA tensors (xgrammar2 ships no CUDA C++ extension:
  the Triton kernel runs instead);
- ``apply_token_bitmask_inplace_triton``: CUDA tensors with Triton (importing it raises
  ImportError when triton is not installed, as upstream's module does);
- ``apply_token_bitmask_inplace_torch_compile`` and ``apply_token_bitmask_inplace_torch``:
  plain torch operations (through ``torch.compile`` for the former), any device;
- ``apply_token_bitmask_mlx``: MLX arrays (importing it needs ``mlx``).

Submodules are imported on demand; importing this package imports neither torch nor triton.
"""
