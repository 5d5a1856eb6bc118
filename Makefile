# The two commands of the README: `make run` and `make test`. Each builds its own virtualenv.
# Deployment: `make package STAGE=prod` (templates in out/prod/), `make cfn-lint STAGE=prod`.
PYTHON ?= python3.11
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed
LINT_VENV := .venv-lint
LINT_STAMP := $(LINT_VENV)/.installed
SDK_VENV := .venv-sdk
SDK_STAMP := $(SDK_VENV)/.installed
STAGE ?= prod
OUT := out/$(STAGE)

.PHONY: run test check chaos bench fuzz fuzz-chaos fuzz-stateful check-data load load-fairness lint package cfn-lint policy clean sdk \
	browser-test browser-tools ocr-tools bench-tools ocr-image ocr-base docker-tools

$(STAMP): requirements.txt requirements-dev.txt infra/ocr/requirements.txt
	@command -v $(PYTHON) >/dev/null 2>&1 || { echo "$(PYTHON) not found; set PYTHON=python3"; exit 1; }
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --disable-pip-version-check -r requirements-dev.txt
	touch $(STAMP)

# cfn-lint and aws-sam-translator pin pydantic lower than the app: their own virtualenv.
$(LINT_STAMP): requirements-lint.txt
	@command -v $(PYTHON) >/dev/null 2>&1 || { echo "$(PYTHON) not found; set PYTHON=python3"; exit 1; }
	$(PYTHON) -m venv $(LINT_VENV)
	$(LINT_VENV)/bin/python -m pip install --quiet --disable-pip-version-check -r requirements-lint.txt
	touch $(LINT_STAMP)

# The platform's own SDK and CLI (kodexa, kodexa-cli) pin their own dependencies: their own
# virtualenv, which tests/integration/test_sdk_client.py drives the local server from.
$(SDK_STAMP): requirements-sdk.txt
	@command -v $(PYTHON) >/dev/null 2>&1 || { echo "$(PYTHON) not found; set PYTHON=python3"; exit 1; }
	$(PYTHON) -m venv $(SDK_VENV)
	$(SDK_VENV)/bin/python -m pip install --quiet --disable-pip-version-check -r requirements-sdk.txt
	touch $(SDK_STAMP)

sdk: $(SDK_STAMP)

# OCR of scanned PDFs and images (chalicelib/features/parsing/readers/ocr.py) runs Debian's
# tesseract-ocr + tesseract-ocr-eng (+ tesseract-ocr-osd, orientation) + the languages of
# invoices from unknown suppliers (OCR_LANGUAGES: ocr.py's LANGUAGES, whose accents English alone
# reads wrong): installed with apt-get (as root) when `tesseract` or one of them is missing.
# On AWS the OCR function's container image carries them (infra/ocr/Dockerfile).
OCR_LANGUAGES := eng osd deu fra spa
ocr-tools:
	@if ! command -v tesseract >/dev/null 2>&1 || \
			[ "$$(tesseract --list-langs 2>/dev/null | grep -cxE '$(subst $(eval) ,|,$(OCR_LANGUAGES))')" != "$(words $(OCR_LANGUAGES))" ]; then \
		if [ "$$(id -u)" = 0 ]; then \
			apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends \
				tesseract-ocr $(addprefix tesseract-ocr-,$(OCR_LANGUAGES)); \
		else \
			echo "tesseract or a language missing (OCR of scans and images): run as root, or: sudo apt-get install tesseract-ocr $(addprefix tesseract-ocr-,$(OCR_LANGUAGES))"; \
			exit 1; \
		fi; \
	fi

# Keeps its data in .local/moto-state.pickle across restarts; `make run FRESH=1` starts empty
# (docs/operations/local-state.md).
run: $(STAMP) ocr-tools
	PYTHONPATH=. FRESH=$(FRESH) $(PY) -m localdev.run

# Two groups that share nothing, side by side on the 2 cores: the in-process group (tests/unit,
# tests/api: chalice.test.Client on in-process moto, on two xdist workers that take the cores the
# live-server group leaves idle while it waits on its servers; its output is shown when both are
# done) and the live-server group (tests/integration, then tests/browser: real local servers on
# free loopback ports; the browser tests drive Debian's headless Chromium, installed by
# browser-tools when missing; bench/README.md "Review page (issue 49)" has their wall time).
# The live group's marker expression names `browser` so tests/conftest.py keeps the browser tests
# (it is `not quarantine` all the same).
# Fails if either fails, or collects nothing (pytest's exit 5). docs/architecture.md "The test loop".
# Each group ends with its slowest tests (--durations): where a slow CI run spent its time.
# The OCR image (below) is built in the background meanwhile, when its tag is missing;
# tests/integration/test_ocr_image.py waits for it (OCR_IMAGE_BUILD_EXIT) and runs it as Lambda
# does. A Docker daemon is started when none answers and stopped at the end, whatever the outcome.
# TEST_IN_PROCESS / TEST_LIVE narrow the groups (e.g. TEST_LIVE=tests/integration/test_ocr_image.py).
TEST_LOG := .local/test-in-process.log
OCR_BUILD := .local/docker/build
TEST_IN_PROCESS ?= tests/unit tests/api
TEST_LIVE ?= tests/integration tests/browser
LIVE_MARKERS := (not quarantine) or (browser and not quarantine)
test: $(STAMP) $(SDK_STAMP) ocr-tools docker-tools browser-tools
	@mkdir -p .local/docker; rm -f $(OCR_BUILD).exit; status=0; \
	$(OCR) daemon-start || exit 1; trap '$(OCR) daemon-stop' EXIT; trap 'exit 130' INT TERM; \
	{ $(OCR) build > $(OCR_BUILD).log 2>&1; echo $$? > $(OCR_BUILD).exit; } & build=$$!; \
	PYTHONPATH=. $(PY) -m pytest -q -p no:cacheprovider -m "not quarantine" -n 2 --dist loadfile \
		--durations=10 $(TEST_IN_PROCESS) > $(TEST_LOG) 2>&1 & inproc=$$!; \
	OCR_IMAGE_BUILD_EXIT=$(OCR_BUILD).exit PYTHONPATH=. $(PY) -m pytest -q -p no:cacheprovider \
		--durations=15 -m "$(LIVE_MARKERS)" $(TEST_LIVE) || status=$$?; \
	wait $$inproc; inproc_status=$$?; \
	kill $$build 2>/dev/null; wait $$build 2>/dev/null; \
	echo "---------------- OCR image: $$(tail -1 $(OCR_BUILD).log 2>/dev/null)"; \
	echo "---------------- in-process group (tests/unit, tests/api): exit $$inproc_status"; \
	cat $(TEST_LOG); \
	if [ $$status -eq 0 ]; then status=$$inproc_status; fi; \
	exit $$status

# The quick loop while changing code: ruff, the import contracts (lint-imports), then tests/unit
# (the import-cycle test among them) and the in-process API tests on two workers (pytest-xdist,
# one file per worker: module fixtures stay whole). No live server, no SDK virtualenv. QUICK_CHECK=1
# leaves out the tests marked `slow` and samples large parametrized tests (tests/conftest.py: 12
# cases in tests/unit, 6 in tests/api); `make test` runs all of them. ~1,080 tests, ~2 min 35 s on
# this 2-core machine (bench/README.md "The test suite"); keep it under 3 minutes.
check: $(STAMP)
	$(VENV)/bin/ruff check .
	PYTHONPATH=. $(VENV)/bin/lint-imports
	QUICK_CHECK=1 PYTHONPATH=. $(PY) -m pytest -q -p no:cacheprovider -m "not quarantine" -n 2 --dist loadfile \
		tests/unit tests/api

# The chaos run of `make test` as a longer soak: CHAOS_RUN_ROUNDS x 9 requests (default 120 x 9,
# ~6 min), CHAOS_RUN_SEED. (A test marked `quarantine` is left out of `make test`; none is now.)
chaos: $(STAMP)
	CHAOS_RUN_ROUNDS=$${CHAOS_RUN_ROUNDS:-120} CHAOS_RUN_SLOW=default PYTHONPATH=. $(PY) -m pytest -q -p no:cacheprovider -s \
		tests/integration/test_chaos_run.py

# The browser tests alone (tests/browser/, marker `browser`; `make test` runs them in its live
# group): /docs (Authorize, Try it out + Execute on GET /api/projects; screenshot in
# tests/artifacts/) and the reviewer's page (/review: screenshots and timing in
# .local/artifacts/review/).
browser-test: $(STAMP) browser-tools
	PYTHONPATH=. $(PY) -m pytest -q -p no:cacheprovider -m browser tests/browser

# Debian's chromium + chromium-driver, with apt-get (~2 min, as root) when they are missing.
browser-tools:
	@if ! command -v chromium >/dev/null 2>&1 || ! command -v chromedriver >/dev/null 2>&1; then \
		if [ "$$(id -u)" = 0 ]; then \
			apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends \
				chromium chromium-driver; \
		else \
			echo "chromium/chromedriver missing: run as root, or: sudo apt-get install chromium chromium-driver"; \
			exit 1; \
		fi; \
	fi

# bench/bench_parsing.py's peers and fixtures: poppler's pdftotext, qpdf (a 500-page PDF), tesseract.
bench-tools: ocr-tools
	@if ! command -v pdftotext >/dev/null 2>&1 || ! command -v qpdf >/dev/null 2>&1; then \
		if [ "$$(id -u)" = 0 ]; then \
			apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends \
				poppler-utils qpdf; \
		else \
			echo "pdftotext/qpdf missing (bench_parsing.py): run as root, or: sudo apt-get install poppler-utils qpdf"; \
			exit 1; \
		fi; \
	fi

bench: $(STAMP) bench-tools
	PYTHONPATH=. $(PY) bench/run_all.py

# the layer contracts (.importlinter) and ruff (ruff.toml); `make test` and `make check` run both too
lint: $(STAMP)
	PYTHONPATH=. $(VENV)/bin/lint-imports
	$(VENV)/bin/ruff check .

# schemathesis against the local server (its own moto), driven by /v3/api-docs; ~2-4 min.
fuzz: $(STAMP)
	PYTHONPATH=. $(PY) tests/fuzz_api.py

# schemathesis under injected AWS faults (CHAOS_RATE of DynamoDB/S3/SQS calls fail or stall):
# no 500, every 5xx a 503 with Retry-After, the invariant checker clean afterwards. Slow faults
# cost 8 s each, so fewer random cases per operation (5) and a 15-minute budget.
fuzz-chaos: $(STAMP)
	CHAOS_RATE=$${CHAOS_RATE:-0.1} CHAOS_SEED=$${CHAOS_SEED:-1616} FUZZ_MAX_EXAMPLES=$${FUZZ_MAX_EXAMPLES:-5} \
	FUZZ_TIMEOUT=$${FUZZ_TIMEOUT:-900} PYTHONPATH=. $(PY) tests/fuzz_api.py

# Only the stateful phase: sequences along the document's OpenAPI links (create -> get -> update -> delete).
fuzz-stateful: $(STAMP)
	FUZZ_PHASES=stateful PYTHONPATH=. $(PY) tests/fuzz_api.py

# The table's invariants (chalicelib/ops/check_table.py; reads the whole table: an operator tool).
# Against `make run`'s moto server: AWS_ENDPOINT_URL=http://127.0.0.1:<moto port> make check-data
check-data: $(STAMP)
	PYTHONPATH=. $(PY) -m chalicelib.ops.check_table

# locust against a local server on loopback: 5 minutes, 20 users + 1 over the rate limit (tests/load/).
load: $(STAMP)
	PYTHONPATH=. $(PY) tests/load/run_load.py

# Issue 50's tenant fairness at the issue's size: organization B's invoice extracted within 2x its
# idle time behind organization A's burst of FAIRNESS_BURST (default 200) documents
# (tests/integration/test_tenant_fairness.py; ~2 min here). `make test` runs the same test with a
# burst of 35; bench/README.md "Tenant fairness (issue 50)", docs/operations/worker.md.
load-fairness: $(STAMP)
	FAIRNESS_BURST=$${FAIRNESS_BURST:-200} PYTHONPATH=. $(PY) -m pytest -q -p no:cacheprovider -s \
		tests/integration/test_tenant_fairness.py

# The deployable templates of a stage, no AWS account needed: out/$(STAGE)/data.json (data
# stack), app.json + deployment.zip (app stack). The zip carries requirements.txt (the runtime
# libraries) and nothing of requirements-dev.txt (chalice's CLI included). The first run downloads
# the Lambda wheels (~70 s here), later ones reuse .chalice/deployments (~15 s). `make test` runs
# the same build in its deploy rehearsal (tests/integration/test_deploy_rehearsal.py).
package: $(STAMP)
	PYTHONPATH=. $(PY) -m infra.package $(STAGE) $(OUT)

# The OCR function's container image (infra/ocr/Dockerfile, built by infra/ocr/image.sh;
# docs/operations/parsing.md "The OCR image"): Debian bookworm + Debian's Tesseract + the app, tagged
# platform-ocr:<hash of its inputs> (and :latest), built only when they change. Its base
# (debian:bookworm-slim, OCR_BASE=...) is made from Debian's packages with debootstrap where no
# registry serves it. Starts a Docker daemon when none answers (as root), stops it afterwards.
# Push it to ECR and pass its URI as the app stack's OcrImageUri parameter.
OCR := PY=$(PY) infra/ocr/image.sh
ocr-image: $(STAMP) docker-tools
	@$(OCR) daemon-start || exit 1; trap '$(OCR) daemon-stop' EXIT; trap 'exit 130' INT TERM; $(OCR) build

# Only the base image (what `ocr-image` makes first when it is missing): debian:bookworm-slim from
# Debian's packages (debootstrap --variant=minbase bookworm, docker import) where no registry has it.
ocr-base: docker-tools
	@$(OCR) daemon-start || exit 1; trap '$(OCR) daemon-stop' EXIT; trap 'exit 130' INT TERM; $(OCR) base

# Debian's docker.io (the daemon) and debootstrap (the base image), with apt-get as root, when missing.
docker-tools:
	@infra/ocr/image.sh tools

# cfn-lint on every template of out/$(STAGE) (the SAM app also expanded); fails on any error.
cfn-lint: package $(LINT_STAMP)
	$(LINT_VENV)/bin/python infra/lint.py $(OUT)

# Rewrite .chalice/policy-$(STAGE).json from infra/iam.py (packaging refuses a stale one).
policy: $(STAMP)
	PYTHONPATH=. $(PY) -m infra.iam write $(STAGE)

clean:
	rm -rf $(VENV) $(LINT_VENV) $(SDK_VENV) .local out
