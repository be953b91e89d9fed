"""Verbose lines: INFO records that a user sees without configuring logging.

``autotune_verbose=True`` is documented (seed 000, docs/guide.md) as INFO-level
tuning information on standard output. Python's logging shows nothing below
WARNING until a program configures it, so an INFO record alone would show
nothing to most users. Each verbose line is therefore an INFO record on the
``kerneltune`` logger where the program's logging shows that logger's INFO
records, and printed on stdout where it does not: a user sees it once,
either way.
"""

from __future__ import annotations

import logging

ROOT = "kerneltune"


def verbose_line(line: str, *, source: str = ROOT) -> None:
    """Show one verbose line.

    :param source: what the line is about: printed as its ``[source]``
        prefix, and the logger it is logged on (``kerneltune``, or the child
        ``kerneltune.<source>``).
    """
    logger = logging.getLogger(ROOT if source == ROOT else f"{ROOT}.{source}")
    if logger.isEnabledFor(logging.INFO) and logger.hasHandlers():
        logger.info(line)
    else:
        print(f"[{source}] {line}", flush=True)
