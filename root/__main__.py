"""``python -m kerneltune``: the same command as the ``kerneltune`` console script."""

from kerneltune.cli import main

main(prog_name="kerneltune")
