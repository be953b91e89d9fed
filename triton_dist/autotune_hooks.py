"""Import before decorating kernels to let ``triton.autotune`` take ``hints={"search_params": ...}``.

::

    import triton_dist.autotune_hooks  # noqa: F401

Importing it again, or after other kernels were decorated, changes nothing;
kernels without the hint behave exactly as with stock Triton.
"""

from kerneltune.core.driving import enable_feature

enable_feature("search_params")
