"""Reducers: how ranks exchange votes and combine timings."""
