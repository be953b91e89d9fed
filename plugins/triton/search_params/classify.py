"""The operator classifier: does a kernel do matrix work (``tl.dot``) or vector work?

The answer picks the compile-option profile family: ``tl.dot`` kernels
(matmul, flash attention) run on tensor or cube cores, where pipelining and
the cube/vector split matter; the rest stream data through vector units.
The classifier reads the kernel's source, and the source of the
``@triton.jit`` helpers it calls, for calls named ``dot`` or ``dot_scaled``.
"""

from __future__ import annotations

import ast
import inspect
import textwrap
from collections.abc import Callable
from typing import Any

MATRIX = "matrix"
VECTOR = "vector"
DOT_CALLS = frozenset({"dot", "dot_scaled"})


def python_function(kernel: Any) -> Callable[..., Any] | None:
    """The plain Python function under a JIT kernel, heuristics or interpreter wrapper."""
    seen = 0
    while kernel is not None and not inspect.isfunction(kernel) and seen < 16:
        kernel = getattr(kernel, "fn", None)
        seen += 1
    return kernel if inspect.isfunction(kernel) else None


def _tree(fn: Callable[..., Any]) -> ast.AST | None:
    try:
        return ast.parse(textwrap.dedent(inspect.getsource(fn)))
    except (OSError, TypeError, SyntaxError):
        return None


def _resolve(node: ast.expr, scope: dict[str, Any]) -> Any:
    if isinstance(node, ast.Name):
        return scope.get(node.id)
    if isinstance(node, ast.Attribute):
        owner = _resolve(node.value, scope)
        return None if owner is None else getattr(owner, node.attr, None)
    return None


def _called_name(node: ast.Call) -> str | None:
    if isinstance(node.func, ast.Attribute):
        return node.func.attr
    if isinstance(node.func, ast.Name):
        return node.func.id
    return None


def uses_dot(kernel: Any) -> bool | None:
    """Whether the kernel or a JIT helper it calls calls ``dot``; ``None`` without source."""
    root = python_function(kernel)
    if root is None:
        return None
    pending = [root]
    visited: set[int] = set()
    readable = False
    while pending:
        fn = pending.pop()
        if id(fn) in visited:
            continue
        visited.add(id(fn))
        tree = _tree(fn)
        if tree is None:
            continue
        readable = True
        scope = getattr(fn, "__globals__", {})
        for node in ast.walk(tree):
            if not isinstance(node, ast.Call):
                continue
            if _called_name(node) in DOT_CALLS:
                return True
            target = _resolve(node.func, scope)
            helper = None if inspect.isfunction(target) else python_function(target)
            if helper is not None:
                pending.append(helper)
    return False if readable else None


def operator_class(kernel: Any) -> tuple[str, str]:
    """``("matrix" | "vector", why)`` for a kernel; without source, ``vector``."""
    dot = uses_dot(kernel)
    if dot is None:
        return VECTOR, "its source cannot be read, so it is treated as a vector kernel"
    if dot:
        return MATRIX, "it calls tl.dot"
    return VECTOR, "it does not call tl.dot"
