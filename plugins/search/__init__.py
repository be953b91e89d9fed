"""Search strategies: which points of a generated space get measured.

Pure decisions over plain data, no Triton: ``pattern`` (the default),
``staged`` and ``exhaustive``, sharing the steps of :mod:`.moves`.
"""
