"""Search strategies: which points of a generated space get measured.

Pure decisions over :mod:`kerneltune.core.values.geometry`'s plain data, no Triton:
``pattern`` (the default), ``staged`` and ``exhaustive``, each a module
that registers itself; :mod:`~kerneltune.plugins.search.moves` holds the
steps through a space they share.
"""
