"""Triton kernels shared by the tests: one definition each, wrapped as each test needs."""

import copy
import inspect

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


@triton.jit
def add_kernel(x_ptr, y_ptr, out_ptr, n, BLOCK: tl.constexpr):
    """``out = x + y``, one block per program: triton-ascend's tile generator sizes ``BLOCK`` for it."""
    offsets = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offsets < n
    x = tl.load(x_ptr + offsets, mask=mask, other=0.0)
    y = tl.load(y_ptr + offsets, mask=mask, other=0.0)
    tl.store(out_ptr + offsets, x + y, mask=mask)


@triton.jit
def tiled_matmul(a_ptr, b_ptr, c_ptr, S: tl.constexpr, BLOCK_K: tl.constexpr):
    """``c = a @ b`` for S x S matrices, the inner dimension taken BLOCK_K at a time (K >= 16 for tl.dot)."""
    rows = tl.arange(0, S)
    acc = tl.zeros([S, S], tl.float32)
    for start in range(0, S, BLOCK_K):
        inner = start + tl.arange(0, BLOCK_K)
        a = tl.load(a_ptr + rows[:, None] * S + inner[None, :])
        b = tl.load(b_ptr + inner[:, None] * S + rows[None, :])
        acc += tl.dot(a, b)
    tl.store(c_ptr + rows[:, None] * S + rows[None, :], acc.to(c_ptr.dtype.element_ty))


#: Elements of the add for which triton-ascend 3.2.0 generates two tiles (BLOCK 2048 and 1639) for a
#: 910B4's 20 AI cores, as the stand-in reports them.
AUTO_TILED_N = 65536


def auto_tiled_add(configs=(), **options):
    """``add_kernel`` under triton-ascend's auto-tiling tuner (``enable_ascend_autotune``)."""
    hints = {"enable_ascend_autotune": True}
    return triton.autotune(configs=list(configs), key=["n"], hints=hints, **options)(add_kernel)


#: What triton-ascend 3.2.0's auto-tiling tuner finds in ``add_kernel`` by parsing it (``BLOCK`` splits
#: axis ``x`` across programs, nothing tiles inside one, ``x`` is the low dim), and what 3.2.0rc4's, which
#: parses nothing, is given by its decorator instead.
ADD_TILING = {"split_params": {"x": "BLOCK"}, "tiling_params": {}, "low_dims": ["x"]}


def auto_tiled_by_params(fn=add_kernel, configs=(), key=None, **options):
    """``fn`` (by default ``add_kernel``) under triton-ascend 3.2.0rc4's auto-tiling tuner, declared its way.

    rc4's own ``triton.autotune``, reached under any replacement the search_params hooks made (which
    would turn a dict key into a list), with ``split_params``, ``tiling_params`` and ``low_dims``
    (:data:`ADD_TILING`) and ``key``: by default the axis dict rc4 documents, ``{"x": "n"}``.
    """
    autotune = inspect.unwrap(triton.autotune)
    key = {"x": "n"} if key is None else key
    return autotune(configs=list(configs), key=key, **copy.deepcopy(ADD_TILING), **options)(fn)


def launch_add(kernel, x, y):
    out = torch.empty_like(x)
    kernel[lambda meta: (triton.cdiv(x.numel(), meta["BLOCK"]),)](x, y, out, x.numel())
    return out
