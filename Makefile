# The two entry points README.md documents. Both install what they need first.
PYTHON ?= python3
# torch is pinned to the version the CI and development machines hold as a
# CPU build; pip would otherwise pick the newest release, a multi-GB CUDA
# build on most indexes. Set TORCH=... to install another.
TORCH ?= torch==2.13.0
# Triton releases (the newest patch of each) that `make test-tritons` runs the
# Triton-touching CPU tests against; CI runs it after `make test`. Of the two-rank
# contextual tests, those whose launches go through each release's own adapter path
# (the seed's example, the slowest rank, an unknown autotuner class, triton-ascend's
# tuner); the ranks' agreement on failures and twins is the engine's, tested by `make test`.
TRITONS ?= 3.4 3.5 3.9
DIST := tests/test_contextual_dist.py::test_
TRITON_TESTS ?= tests/test_contextual.py $(DIST)seed_example_on_two_ranks_agrees_and_logs_per_rank \
	$(DIST)the_slowest_rank_decides $(DIST)an_autotuner_class_the_adapter_does_not_know_is_refused_on_every_rank \
	$(DIST)triton_ascends_auto_tiling_tuner_is_tuned_by_kerneltune_with_the_ranks_agreeing \
	tests/test_triton_adapter.py tests/test_accumulate.py tests/test_search_params.py tests/test_config_label.py \
	tests/test_isolation_kernels.py tests/test_twins.py tests/test_seed_003_examples.py
# triton-ascend is the package `triton` too, so it cannot sit over the environment as the
# releases above do: it gets a virtual environment of its own, with the same torch and
# kerneltune, holding the first release of TRITON_ASCENDS. Each later one goes alone into
# build/triton-ascends/<release> and is put ahead of it on PYTHONPATH, as the releases above
# are (a 160 MB wheel and one more test run, not a second venv). Without an NPU,
# tests/conftest.py stands in for its NPU driver only (tests/ascend_stand_in.py says exactly
# how); docs/ascend.md lists what runs.
TRITON_ASCENDS ?= 3.2.0 3.2.0rc4
# Beside those, the tests of what only triton-ascend has (its auto-tiling tuner's checked tilings).
ASCEND_TESTS ?= $(TRITON_TESTS) tests/test_checked_kernels.py
ASCEND_VENV ?= build/venv-triton-ascend
ASCEND_FIRST := $(firstword $(TRITON_ASCENDS))

.PHONY: install demo test test-tritons test-triton-ascend

# `make demo` and `make test` install only when this environment has not yet
# installed what the project now holds: the stamp is named by the interpreter's
# environment (its sys.prefix) and the list of modules (a new one needs linking),
# and is older than the files that declare dependencies after a change to them.
ENVIRONMENT := $(shell $(PYTHON) -c "import hashlib, sys; print(hashlib.sha1(sys.prefix.encode()).hexdigest()[:12])")
MODULES := $(shell find root core plugins cli triton_dist -name '*.py' -not -path '*/build/*' | sort | cksum | cut -d' ' -f1)
STAMP := build/installed-$(ENVIRONMENT)-$(MODULES)
DECLARED := pyproject.toml setup.py triton_dist/pyproject.toml examples/kerneltune-example-plugin/pyproject.toml \
	examples/kerneltune-example-device/pyproject.toml

# A strict editable install: a tree of links to the sources under build/, which
# static tools (mypy, pyright, IDEs) resolve as kerneltune.*; the default mode
# is an import hook they cannot follow. A module added later needs `make install`.
install:
	@echo "installing into $$($(PYTHON) -c 'import sys; print(sys.prefix)'): $(TORCH), kerneltune (editable, with" \
		"its triton, test and plot extras), its triton_dist package and the two example plugins of examples/"
	$(PYTHON) -m pip install -q "$(TORCH)" -e ".[triton,test,plot]" -e triton_dist -e examples/kerneltune-example-plugin -e examples/kerneltune-example-device \
		--config-settings editable_mode=strict
	@mkdir -p build && touch $(STAMP)

$(STAMP): $(DECLARED)
	$(MAKE) install PYTHON="$(PYTHON)" TORCH="$(TORCH)"

demo: $(STAMP)
	$(PYTHON) demo.py

test: $(STAMP)
	$(PYTHON) -m ruff check .
	$(PYTHON) -m mypy
	$(PYTHON) -m pytest -q

# Each release goes alone into build/tritons/<release> (no dependencies: they
# are the environment's) and is put ahead of the environment's own Triton on
# PYTHONPATH, so everything but Triton is what `make test` tested. The release
# the environment holds itself (the newest, from `make install`) is skipped:
# `make test` has just run the whole suite on it.
test-tritons: $(STAMP) test-triton-ascend
	set -e; held=$$($(PYTHON) -c "import triton; print('.'.join(triton.__version__.split('.')[:2]))"); \
	for release in $(TRITONS); do \
		if [ "$$release" = "$$held" ]; then echo "triton $$release: the environment's own, tested by make test"; continue; fi; \
		$(PYTHON) -m pip install -q --no-deps --upgrade --target build/tritons/$$release "triton==$$release.*"; \
		PYTHONPATH=build/tritons/$$release $(PYTHON) -c "import triton; print('triton', triton.__version__)"; \
		PYTHONPATH=build/tritons/$$release $(PYTHON) -m pytest -q $(TRITON_TESTS); \
	done

# triton-ascend's Python layer needs pybind11 and numpy beside it at import.
test-triton-ascend:
	$(PYTHON) -m venv $(ASCEND_VENV)
	$(ASCEND_VENV)/bin/python -m pip install -q --upgrade pip
	$(ASCEND_VENV)/bin/python -m pip install -q "$(TORCH)" "triton-ascend==$(ASCEND_FIRST)" \
		pybind11 numpy pytest pytest-timeout \
		-e . -e triton_dist -e examples/kerneltune-example-plugin -e examples/kerneltune-example-device \
		--config-settings editable_mode=strict
	set -e; for release in $(TRITON_ASCENDS); do \
		over=; \
		if [ "$$release" != "$(ASCEND_FIRST)" ]; then \
			over=build/triton-ascends/$$release; \
			$(ASCEND_VENV)/bin/python -m pip install -q --no-deps --upgrade --target $$over \
				"triton-ascend==$$release"; \
		fi; \
		PYTHONPATH=$$over $(ASCEND_VENV)/bin/python -c \
			"import importlib.metadata as m; print('triton-ascend', m.version('triton-ascend'))"; \
		PYTHONPATH=$$over $(ASCEND_VENV)/bin/python -m pytest -q $(ASCEND_TESTS); \
	done
