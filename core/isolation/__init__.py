"""Screening candidates in a reusable worker process: the parent's side and the worker's."""
