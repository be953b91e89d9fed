"""Triton integration: the adapter over Triton's autotuner internals, and the
interceptor that hands ``triton.autotune`` launches to the contextual tuner."""
