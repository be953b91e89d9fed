"""Installs the stand-in NPU driver in a process the triton-ascend tests start (a rank, an isolation worker).

Python imports ``sitecustomize`` at start-up from the first folder on its
path that has one; tests/ascend_stand_in.py puts this folder on
``PYTHONPATH`` only where the stand-in serves.
"""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import ascend_stand_in

if ascend_stand_in.wanted():
    ascend_stand_in.install()
