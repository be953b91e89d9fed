"""Triton integration: the adapter over Triton's autotuner internals (:mod:`.adapter`) and what builds on it.

``triton.Config`` (:mod:`.configs`, :mod:`.labels`), ``triton.autotune`` itself (:mod:`.autotune`),
compiling ahead (:mod:`.compiler`), isolation (:mod:`.isolated`) and the interceptor that hands
launches to the contextual tuner (:mod:`.interceptor`); :mod:`.search_params` uses these and is
used by none.
"""
