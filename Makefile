# Two commands do all the set-up on a fresh machine:
#   make run    create .venv, install, generate the sample corpus, run the pipeline on it
#   make test   create .venv, install, run the test suite (what CI runs)
# While working: make test-fast (the unit and composite tiers, under 2 minutes; docs/testing.md).
PYTHON ?= python3.11
VENV := .venv
PY := $(VENV)/bin/python
SAMPLE := build/sample
OUT := build/out
TEST_PACKAGES := build/test-packages

.PHONY: install run test test-fast test-deps bench bench-input clean flink-jar

# The set-up prints its steps and any error, not the build backend's notices: setuptools' editable install
# warns (BuildBackendWarning) that a folder named like a package in the working directory would take
# precedence on import, which is what an editable install of this checkout means.
$(VENV)/.installed: requirements.txt requirements-tests-nodeps.txt setup.py
	@test -x $(PY) || { echo "set-up: creating $(VENV)"; $(PYTHON) -m venv $(VENV) || python3 -m venv $(VENV); }
	@echo "set-up: installing requirements.txt and requirements-tests-nodeps.txt into $(VENV)"
	@$(PY) -m pip install --quiet --upgrade pip
	@$(PY) -m pip install --quiet -r requirements.txt
	@$(PY) -m pip install --quiet --no-deps -r requirements-tests-nodeps.txt
	@echo "set-up: installing this checkout (editable)"
	@PYTHONWARNINGS=ignore:::setuptools.command.editable_wheel \
		$(PY) -m pip install --quiet --no-deps --no-build-isolation -e .
	@touch $@

# requirements-tests-apart.txt goes to $(TEST_PACKAGES), outside .venv: a package that slows every run when importable
# (tensorflow-text), on the PYTHONPATH of the one test that needs it.
$(TEST_PACKAGES)/.installed: requirements-tests-apart.txt $(VENV)/.installed
	@echo "set-up: installing requirements-tests-apart.txt into $(TEST_PACKAGES)"
	@$(PY) -m pip install --quiet --no-deps --upgrade --target $(TEST_PACKAGES) -r requirements-tests-apart.txt
	@touch $@

install: $(VENV)/.installed $(TEST_PACKAGES)/.installed

# The commands are not echoed: the console shows the runs' progress and summaries (docs/running.md, What the console shows).
run: install
	@$(PY) -m tools.sample_corpus $(SAMPLE) --overwrite
	@$(PY) -m beam_pipeline --input $(SAMPLE)/segmentation/manifest.csv --output $(OUT)/segmentation \
		--task segmentation --num_classes 8 --ignore_label 255 --overwrite
	@$(PY) -m beam_pipeline --input $(SAMPLE)/classification/images --output $(OUT)/classification \
		--task classification --overwrite

# System packages the tests need beyond Python, from Debian when missing: chromium for the report's
# browser test, a JDK and Maven for the Flink tests. Under CI=true a skipped integration test fails.
test-deps:
	bash tools/install_chromium.sh
	bash tools/install_java_maven.sh

# Two test processes, each module whole in one of them (pytest-xdist, --dist loadfile): the tests spend much
# of their time starting processes and waiting on them, which leaves a core idle (docs/testing.md).
TEST_PROCESSES ?= 2
test: install test-deps
	$(PY) -m pytest -q -n $(TEST_PROCESSES) --dist loadfile

# The pure and composite tiers (tests/unit, tests/composites): no system packages, no pipeline run of the sample corpus.
test-fast: install
	$(PY) -m pytest -q tests/unit tests/composites

# The Beam Flink job server jar (and the runner-lib jar for a cluster's lib/) in build/flink/; see docs/runners.md, Running on Flink.
flink-jar:
	bash tools/flink/fetch_job_server.sh

# BENCH_ARGS passes options, e.g. make bench BENCH_ARGS="--pairs 200 --sizes 1,2 --rss_sizes 1,2"
bench: install
	$(PY) bench/pipeline_throughput.py $(BENCH_ARGS)

bench-input: install
	$(PY) bench/input_throughput.py $(BENCH_ARGS)

clean:
	rm -rf build
