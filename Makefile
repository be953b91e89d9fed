# The two entry points README.md documents. Both install what they need first.
PYTHON ?= python3
# torch is pinned to the version the CI and development machines hold as a
# CPU build; pip would otherwise pick the newest release, a multi-GB CUDA
# build on most indexes. Set TORCH=... to install another.
TORCH ?= torch==2.13.0
# Triton releases (the newest patch of each) that `make test-tritons` runs the
# Triton-touching CPU tests against; CI runs it after `make test`.
TRITONS ?= 3.4 3.5 3.9
TRITON_TESTS ?= tests/test_contextual.py tests/test_contextual_dist.py tests/test_triton_adapter.py \
	tests/test_search_params.py tests/test_config_label.py tests/test_isolation_kernels.py

.PHONY: install demo test test-tritons

# A strict editable install: a tree of links to the sources under build/, which
# static tools (mypy, pyright, IDEs) resolve as kerneltune.*; the default mode
# is an import hook they cannot follow. A module added later needs `make install`.
install:
	$(PYTHON) -m pip install -q "$(TORCH)" -e ".[triton,test,plot]" -e examples/kerneltune-example-plugin -e examples/kerneltune-example-device \
		--config-settings editable_mode=strict

demo: install
	$(PYTHON) demo.py

test: install
	$(PYTHON) -m ruff check .
	$(PYTHON) -m mypy
	$(PYTHON) -m pytest

# Each release goes alone into build/tritons/<release> (no dependencies: they
# are the environment's) and is put ahead of the environment's own Triton on
# PYTHONPATH, so everything but Triton is what `make test` tested.
test-tritons: install
	set -e; for release in $(TRITONS); do \
		$(PYTHON) -m pip install -q --no-deps --upgrade --target build/tritons/$$release "triton==$$release.*"; \
		PYTHONPATH=build/tritons/$$release $(PYTHON) -c "import triton; print('triton', triton.__version__)"; \
		PYTHONPATH=build/tritons/$$release $(PYTHON) -m pytest -q $(TRITON_TESTS); \
	done
