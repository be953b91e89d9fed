# The two entry points README.md documents. Both install what they need first.
PYTHON ?= python3
# torch is pinned to the CPU build that pip finds on local disk; any other
# version would pull a multi-GB CUDA build on a machine without a GPU.
TORCH ?= torch==2.13.0

.PHONY: install demo test

install:
	$(PYTHON) -m pip install -q "$(TORCH)" -e ".[triton,test]" -e examples/kerneltune-example-plugin

demo: install
	$(PYTHON) demo.py

test: install
	$(PYTHON) -m ruff check .
	$(PYTHON) -m pytest
