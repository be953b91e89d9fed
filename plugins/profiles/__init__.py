"""Compile-option profile families: what a staged search tries for each backend."""
