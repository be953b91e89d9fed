"""Triton kernels shared by the tests: one definition each, wrapped as each test needs."""

import torch
import triton
import triton.language as tl

#: Where the tests put a kernel's tensors: the GPU where there is one, else the CPU (the interpreter).
DEVICE = "cuda" if torch.cuda.is_available() else "cpu"

#: Block sizes no backend can run ``scale_kernel`` with: ``tl.arange`` over more than Triton's
#: largest tensor (2**20 elements) fails to compile on a GPU and to launch in every interpreter,
#: triton-ascend's included (which, unlike upstream, accepts a block that is no power of two).
INVALID_BLOCKS = (1 << 21, 1 << 22)


@triton.jit
def scale_kernel(x_ptr, y_ptr, alpha, n, BLOCK: tl.constexpr):
    """The seed documents' example: ``y = alpha * x``."""
    pid = tl.program_id(0)
    offsets = pid * BLOCK + tl.arange(0, BLOCK)
    mask = offsets < n
    x = tl.load(x_ptr + offsets, mask=mask, other=0.0)
    tl.store(y_ptr + offsets, alpha * x, mask=mask)
