"""Timers: how long one run of a candidate takes."""
