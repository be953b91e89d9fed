"""Caches: where picks live between processes."""
