# The two entry points README.md documents. Both install what they need first.
PYTHON ?= python3
# torch is pinned to the version the CI and development machines hold as a
# CPU build; pip would otherwise pick the newest release, a multi-GB CUDA
# build on most indexes. Set TORCH=... to install another.
TORCH ?= torch==2.13.0

.PHONY: install demo test

# A strict editable install: a tree of links to the sources under build/, which
# static tools (mypy, pyright, IDEs) resolve as kerneltune.*; the default mode
# is an import hook they cannot follow. A module added later needs `make install`.
install:
	$(PYTHON) -m pip install -q "$(TORCH)" -e ".[triton,test,plot]" -e examples/kerneltune-example-plugin \
		--config-settings editable_mode=strict

demo: install
	$(PYTHON) demo.py

test: install
	$(PYTHON) -m ruff check .
	$(PYTHON) -m pytest
