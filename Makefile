# dupbert: `make book` executes the chapters and builds the book; `make test` runs the tests.
# `make help` lists all targets. Variables (override on the command line or in the environment):
#   PROFILE=cpu|gpu   parameter set for the chapters: notebooks/params/$(PROFILE)/<chapter>.yaml
#   VENV=.venv        virtual environment to create and use; VENV= uses the tools on PATH instead
#                     (e.g. inside the conda environment of environment.yml) and installs nothing
#   PYTHON=python3    interpreter that creates the virtual environment
#   NOTEBOOKS=...     the notebooks to execute (default all notebooks/*.ipynb), e.g.
#                     `make book NOTEBOOKS=notebooks/rq1.ipynb` re-executes only RQ1

SHELL := bash
.SHELLFLAGS := -eu -o pipefail -c
.DELETE_ON_ERROR:
.SUFFIXES:
MAKEFLAGS += --no-builtin-rules

PROFILE ?= cpu
PYTHON ?= python3
VENV ?= .venv

# Defaults that the caller's environment overrides. No machine of this project reaches the
# Hugging Face Hub; without HF_HUB_OFFLINE=1 every Hub lookup hangs ~50 s before failing.
export HF_HUB_OFFLINE ?= 1
export TOKENIZERS_PARALLELISM ?= false
ifeq ($(origin DUPBERT_DATA_DIR),undefined)
ifneq ($(wildcard ../shared/data/.),)
export DUPBERT_DATA_DIR := $(abspath ../shared/data)
endif
endif

# A plain `pip install torch` pulls a multi-GB CUDA build: CPU machines pin the CPU wheel.
ifeq ($(PROFILE),gpu)
CONSTRAINTS ?=
else
CONSTRAINTS ?= -c constraints-cpu.txt
endif

ifneq ($(VENV),)
BIN := $(VENV)/bin/
ENV_STAMP := $(VENV)/.dupbert-installed
else
BIN :=
ENV_STAMP :=
endif

NOTEBOOKS ?= $(sort $(wildcard notebooks/*.ipynb))
CHAPTERS := $(NOTEBOOKS:notebooks/%=book/%)
LIBRARY := $(wildcard dupbert/*.py dupbert/*/*.py dupbert/*/*.json)
WORK := .cache/make
PROFILE_STAMP := $(WORK)/profile

.PHONY: help env book chapters render test check notebooks mutants clean distclean FORCE

help:
	@echo "make book       execute changed chapters (papermill, PROFILE=$(PROFILE)) into book/, then build the book"
	@echo "make render     build the book from the executed chapters in book/, running nothing"
	@echo "make test       pytest --nbval: unit tests, and notebooks/ re-executed and compared with their stored outputs"
	@echo "make check      the quick loop: lint-imports and the unit tests not marked slow, without the notebooks, the book build and the browser"
	@echo "make notebooks  re-execute notebooks/*.ipynb with their default (smoke) parameters, storing the outputs nbval compares"
	@echo "make env        create/update the virtual environment $(VENV)"
	@echo "NOTEBOOKS=notebooks/rq1.ipynb limits book/notebooks to the notebooks named"
	@echo "make clean      remove _build/ and temporary files; make distclean also removes $(VENV)"
	@echo "the book is written to _build/html/index.html"

env: $(ENV_STAMP)

ifneq ($(VENV),)
# Reinstall only when the dependency declarations change.
$(ENV_STAMP): pyproject.toml constraints-cpu.txt
	test -x $(BIN)python || $(PYTHON) -m venv $(VENV)
	$(BIN)python -m pip install $(CONSTRAINTS) -e '.[test,book]'
	touch $@
endif

# Rewritten only when PROFILE changes, so that switching profiles re-executes every chapter.
$(PROFILE_STAMP): FORCE
	@mkdir -p $(@D)
	@[ "$$(cat $@ 2>/dev/null)" = "$(PROFILE)" ] || echo "$(PROFILE)" > $@

# Shown collapsed in the book: the cell papermill inserts with the profile's parameters.
define HIDE_INJECTED_PARAMETERS
import sys, nbformat
nb = nbformat.read(sys.argv[1], as_version=4)
for cell in nb.cells:
    tags = cell.metadata.get("tags", [])
    if "injected-parameters" in tags and "hide-input" not in tags:
        cell.metadata["tags"] = [*tags, "hide-input"]
nbformat.write(nb, sys.argv[1])
endef
export HIDE_INJECTED_PARAMETERS

# A chapter is re-executed when its notebook, its parameters, the library or PROFILE change.
# papermill writes to a scratch file that is moved into place only on success, so an interrupted
# or failed run leaves no half chapter (the failed notebook stays in $(WORK) for inspection).
book/%.ipynb: notebooks/%.ipynb notebooks/params/$(PROFILE)/%.yaml $(LIBRARY) $(PROFILE_STAMP) | $(ENV_STAMP)
	@mkdir -p $(WORK)
	$(BIN)papermill $< $(WORK)/$*.ipynb -f notebooks/params/$(PROFILE)/$*.yaml --cwd notebooks --progress-bar
	$(BIN)python -c "$$HIDE_INJECTED_PARAMETERS" $(WORK)/$*.ipynb
	mv $(WORK)/$*.ipynb $@

# RQ4 and RQ5 read the results that RQ3 writes: re-run them whenever RQ3 ran. The results-at-a-glance
# page reads the tables of every chapter (results/$(PROFILE)/*.csv and RQ3's runs).
book/rq4.ipynb: book/rq3.ipynb
# RQ2 relates RQ1's translator table (tables_dir/rq1-translator.csv) to layer similarity.
book/rq2.ipynb: $(filter book/rq1.ipynb,$(CHAPTERS))
book/rq5.ipynb: book/rq3.ipynb
# RQ3 re-reads the committed runs of every study, test and pilot (run_missing: false) and their
# registered plans: rows that land re-execute it, and with it RQ4, RQ5 and the glance page.
book/rq3.ipynb: $(wildcard results/$(PROFILE)/rq3*.jsonl notebooks/params/$(PROFILE)/rq3*.yaml)
# The emergence chapter reads the record that scripts/pretrain.sh writes.
book/emergence.ipynb: $(wildcard results/$(PROFILE)/emergence.csv results/$(PROFILE)/pretrain-loss.csv)
book/glance.ipynb: $(filter book/rq1.ipynb book/rq2.ipynb book/rq3.ipynb book/rq5.ipynb,$(CHAPTERS))

chapters: $(CHAPTERS)

book: chapters
	$(MAKE) render

render: | $(ENV_STAMP)
	$(BIN)jupyter-book build . -W --keep-going
	@echo "book: file://$(abspath _build/html/index.html)"

# The tests run on every core (pytest-xdist), a file's tests on one worker (its fixtures are built
# once; a notebook's cells run in order in one kernel), one torch thread per worker: more threads
# than cores made the runs several times slower. TEST_WORKERS=0 runs them in this process.
TEST_WORKERS ?= auto
TESTS_ON_WORKERS = OMP_NUM_THREADS=1 $(BIN)pytest -n $(TEST_WORKERS) --dist loadfile

test: | $(ENV_STAMP)
	$(BIN)lint-imports
	$(TESTS_ON_WORKERS) --nbval

check: | $(ENV_STAMP)
	$(BIN)lint-imports
	$(TESTS_ON_WORKERS) tests -q -m "not slow" --ignore=tests/test_browser.py --ignore=tests/test_book.py

# The stored outputs of notebooks/*.ipynb are what `pytest --nbval` compares against: refresh them
# after changing a notebook or the library (same kernel and working directory as nbval, no timings).
define EXECUTE_IN_PLACE
import sys, nbformat, nbclient
for path in sys.argv[1:]:
    print("executing", path, flush=True)
    nb = nbformat.read(path, as_version=4)
    nbclient.NotebookClient(nb, timeout=1800, kernel_name="python3", record_timing=False,
                            resources={"metadata": {"path": "notebooks"}}).execute()
    nbformat.write(nb, path)
endef
export EXECUTE_IN_PLACE

notebooks: | $(ENV_STAMP)
	$(BIN)python -c "$$EXECUTE_IN_PLACE" $(NOTEBOOKS)

# Mutation testing, on demand, not in CI: mutmut over the analysis modules with their
# unit tests ([tool.mutmut] in pyproject.toml), then the kill rate per module into
# benchmarks/results/mutation.json. From scratch (mutants/ removed first); MUTANTS_JOBS mutmut
# workers (default 1: leaves a core to other work; see benchmarks/README.md for the cost).
MUTANTS_JOBS ?= 1
mutants: | $(ENV_STAMP)
	$(BIN)python -m pip install $(CONSTRAINTS) -e '.[mutants]'
	rm -rf mutants
	$(BIN)python benchmarks/mutation.py run --jobs $(MUTANTS_JOBS)

clean:
	rm -rf _build $(WORK)

distclean: clean
	rm -rf $(VENV)

FORCE:
