"""Triton integration, in two rooms.

This package is the interception room: the adapter over Triton's autotuner
internals and its version table (:mod:`.adapter`), ``triton.Config``
(:mod:`.configs`), ``triton.autotune`` itself (:mod:`.autotune`), compiling
ahead (:mod:`.compiler`), isolation (:mod:`.isolated`), config labels
(:mod:`.labels`) and the interceptor that hands ``triton.autotune`` launches
to the contextual tuner (:mod:`.interceptor`). The ``search_params`` feature
is the other room, :mod:`.search_params`, which uses these and is used by none.
"""
