# dmrollout — every target installs what it needs from the project's own files.
PY ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed-stamp
PYTEST_ARGS ?=
# `make test` runs its test files on this many pytest-xdist workers, each in a private network
# namespace of its own with its own local cluster and Temporal (hack/netns-python); 0: one process.
# Files go out in collection order (no reorder by size): the chaos cells, collected last, stop and
# restart their worker's control plane, so no other test may come after them on it.
TEST_WORKERS ?= 2
ifeq ($(TEST_WORKERS),0)
XDIST :=
else
XDIST := --tx $(TEST_WORKERS)*popen//python=$(CURDIR)/hack/netns-python --dist loadfile --no-loadscope-reorder
endif
# `make unit` runs on this many pytest-xdist workers (loopback only, no namespace needed).
UNIT_WORKERS ?= 2
HELM = $(shell bash hack/testenv.sh --print)/helm

.PHONY: sign krew krew-test help venv testenv doctor host-tools browser explore demo-pipeline bench bench-gates bench-startup bench-fleet bench-watch test e2e chaos fuzz unit lint format manifests demo dev-up image image-test chart sbom release clean

help: ## list the targets
	@grep -E '^[a-z-]+:.*## ' $(MAKEFILE_LIST) | awk -F':.*## ' '{printf "  %-10s %s\n", $$1, $$2}'

$(STAMP): pyproject.toml
	$(PY) -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip
	$(BIN)/pip install -q -e '.[dev]'
	touch $@

venv: $(STAMP) ## create .venv and install the project with its dev extras

testenv: ## build (once) etcd, kube-apiserver, controller-manager, scheduler, kwok, helm 3 and 4, krew, cosign and the kstatus checker into the cache; fetch Temporal's time-skipping test server; the Debian programs the tests run (iptables, chromium, ...)
	bash hack/install-host-tools.sh test
	bash hack/testenv.sh
	bash hack/test-server.sh
	bash hack/kstatus.sh
	bash hack/helm4.sh
	bash hack/krew.sh
	bash hack/cosign.sh

doctor: ## list every program the tests, the demo, the chaos faults and the image need, and which are missing
	bash hack/doctor.sh

host-tools: ## install from Debian's packages what `make test` needs and the machine lacks (iptables, chromium, tmux, ...)
	bash hack/doctor.sh --need test --install

browser: host-tools ## (kept for old habits) chromium comes with host-tools

test: venv testenv host-tools krew-test ## run every test in private network namespaces (TEST_WORKERS=2 in parallel)
	DMROLLOUT_WORKER_PYTHON=$(abspath $(BIN))/python hack/in-netns.sh $(BIN)/pytest -q $(XDIST) $(PYTEST_ARGS)

e2e: venv testenv ## the full rollouts only (tests/e2e) in private network namespaces
	DMROLLOUT_WORKER_PYTHON=$(abspath $(BIN))/python hack/in-netns.sh $(BIN)/pytest -q $(XDIST) tests/e2e $(PYTEST_ARGS)

# Temporal stopped for five minutes at steady state (issue 23): an e2e scenario, not a cell (no
# rollout step to land in); make chaos runs it beside the cells so one run covers every fault.
STEADY_OUTAGE := tests/e2e/controller/test_controller_temporal_outage.py

chaos: venv testenv ## the full chaos matrix (every fault at every step it reaches, 54 cells, and Temporal away 5 min at steady state; ~1.5 h); prints a table, also in build/chaos-table.txt
	DMROLLOUT_FULL=chaos hack/in-netns.sh $(BIN)/pytest -q tests/chaos $(STEADY_OUTAGE) $(PYTEST_ARGS)

explore: venv testenv host-tools ## the lifecycle explorer: random operation sequences and faults against invariants for EXPLORE_SECONDS (default 1800; EXPLORE_PARALLEL, EXPLORE_OPS, EXPLORE_SEED); prints counts, also in build/explore-summary.txt
	DMROLLOUT_FULL=explore DMROLLOUT_WORKER_PYTHON=$(abspath $(BIN))/python hack/in-netns.sh $(BIN)/pytest -q tests/explore $(PYTEST_ARGS)

fuzz: venv testenv ## 10,000 generated DecisionModels (pydantic vs the API server), datasets and runtime answers each; prints the counts, also in build/fuzz-counts.txt
	DMROLLOUT_FULL=fuzz hack/in-netns.sh $(BIN)/pytest -q tests/fuzz $(PYTEST_ARGS)

unit: venv ## the fast pure tests only: no cluster, no Temporal, no built tools, no network namespace
	$(BIN)/pytest -q -n $(UNIT_WORKERS) tests/unit $(PYTEST_ARGS)

lint: venv testenv ## ruff, format check, mypy --strict, import contracts, hadolint, helm lint
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/mypy
	$(BIN)/mypy bench
	$(BIN)/lint-imports
	bash hack/hadolint.sh
	$(HELM) lint --strict charts/dmrollout
	$(HELM) lint --strict charts/dmrollout -f charts/dmrollout/ci/all-on-values.yaml
	$(HELM) lint --strict charts/dmrollout -f charts/dmrollout/ci/all-on-values.yaml -f charts/dmrollout/ci/hub-values.yaml

format: venv ## apply ruff's formatting and fixes
	$(BIN)/ruff format .
	$(BIN)/ruff check --fix .

manifests: venv ## regenerate the CRD (deploy/ and the chart) and docs/api.md from the API types
	$(BIN)/dmrollout crd > deploy/crd/decisionmodels.decisionmodel.io.yaml
	cp deploy/crd/decisionmodels.decisionmodel.io.yaml charts/dmrollout/files/
	$(BIN)/python -m decisionmodel.api.crd --docs > docs/api.md
	$(BIN)/python -m decisionmodel.api.pipeline_crd > deploy/pipelines/hub/decisionmodelpipelines.decisionmodel.io.yaml
	cp deploy/pipelines/hub/decisionmodelpipelines.decisionmodel.io.yaml charts/dmrollout/files/

demo-pipeline: venv testenv ## two clusters (hub/staging, prod), one Temporal: a DecisionModelPipeline promoted staging -> prod with a soak and a manual approval (DEMO_ARGS=--scenarios adds a moved tag and a failing candidate)
	hack/in-netns.sh $(BIN)/python -m localenv.pipeline_demo $(DEMO_ARGS)

demo: venv testenv ## local cluster, Temporal (UI on host 127.0.0.1:8233), simulators, worker, controller, two sample rollouts; Ctrl-C stops
	hack/demo.sh $(DEMO_ARGS)

dev-up: venv testenv ## only the local environment: cluster, Temporal (UI), simulators
	hack/in-netns.sh $(BIN)/dmrollout dev up

bench: venv testenv ## every benchmark in one run, one table beside the figures before (~45 min; BENCH_ARGS=--quick ~15 min); also build/bench/
	hack/in-netns.sh $(BIN)/python bench/all.py $(BENCH_ARGS)

bench-gates: venv ## each gate's false pass and false fail at its threshold beside (1-c)/2, 4,000 seeded runs per cell, then looks and retries, fixed-n beside sequential (pure; exits 1 when a cell is over; ~40 min, BENCH_ARGS=--quick ~1.5 min)
	$(BIN)/python bench/gate_errors.py $(BENCH_ARGS)
	$(BIN)/python bench/gate_looks.py $(BENCH_ARGS)

bench-startup: venv testenv ## print start-up timings of the local environment
	hack/in-netns.sh $(BIN)/python bench/startup.py

bench-fleet: venv testenv ## fleets of 20/100/300/1000 DecisionModels at once (FLEET_ARGS="--sizes 100,300 --budget 300", "--quick")
	hack/in-netns.sh $(BIN)/python bench/fleet.py $(FLEET_ARGS)

bench-watch: venv testenv ## post-promotion watch: rollbacks in 20 runs each of a scale-down, a Pod delete, a digest fault, a silent runtime in the window, beside the goal (~10 min; WATCH_ARGS=--quick ~4 min)
	hack/in-netns.sh $(BIN)/python bench/watch_runs.py $(WATCH_ARGS)

image: ## build the image without Docker (mmdebstrap + buildah) into build/dmrollout-<version>.oci.tar
	bash hack/image.sh

image-test: venv testenv image ## run the worker and the controller from the image for one rollout (slow)
	DMROLLOUT_FULL=image hack/in-netns.sh $(BIN)/pytest -q tests/image $(PYTEST_ARGS)

chart: testenv ## package the Helm chart into build/dmrollout-<version>.tgz
	mkdir -p build
	$(HELM) package charts/dmrollout -d build

sbom: venv ## the image's SBOM (CycloneDX 1.6, every Debian package and Python distribution) into build/dmrollout-<version>.sbom.cdx.json (after make image)
	bash hack/sbom.sh

release: image chart ## the image (OCI archive), its SBOM, the chart archive and the krew archives, signed with their provenance (COSIGN_KEY), all in build/
	$(MAKE) sbom krew sign

sign: venv ## sign what is in build/ and attest its provenance (SLSA v1) with cosign, offline, and verify both (COSIGN_KEY, COSIGN_PASSWORD, COSIGN_PUB; unset: a throwaway key)
	bash hack/sign.sh

# kubectl-dm as a krew plugin: a zipapp per platform with the plugin manifest (issue 38). Set
# KREW_BASE_URL to where the archives are published (the manifest's download URIs).
KREW_BASE_URL ?=
krew: venv ## kubectl-dm for krew: per-platform archives (linux and darwin, amd64 and arm64) and the plugin manifest dm.yaml into build/krew
	$(BIN)/python hack/krew_package.py --out build/krew $(if $(KREW_BASE_URL),--base-url $(KREW_BASE_URL))

# The host's archive, which the tests install with krew (inside the network namespace, where
# pip cannot download): made again when the code it packs changes.
KREW_HOST := $(shell uname -s | tr A-Z a-z)_$(subst x86_64,amd64,$(subst aarch64,arm64,$(shell uname -m)))
KREW_SOURCES := pyproject.toml hack/krew_package.py $(shell git ls-files controller decisionmodel kube activities workflows 2>/dev/null)
build/krew-test/dm.yaml: $(STAMP) $(KREW_SOURCES)
	$(BIN)/python hack/krew_package.py --platforms $(KREW_HOST) --out build/krew-test

krew-test: build/krew-test/dm.yaml ## the host's krew archive for the tests (build/krew-test)

clean: ## remove the virtualenv and caches (not the binary cache in ~/.cache/dmrollout)
	rm -rf $(VENV) .mypy_cache .ruff_cache .pytest_cache
