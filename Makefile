# toposched developer entry points. Everything runs from a fresh clone: the Python
# environment goes to .venv, the Kubernetes binaries to a cache outside the repo.
SHELL := /bin/bash
.SHELLFLAGS := -euo pipefail -c
.DEFAULT_GOAL := help

PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
KUBECONFIG_LOCAL := $(CURDIR)/.cluster/kubeconfig
# Real kubelet nodes (fake NUMA topologies) `make cluster` adds to the local cluster; needs root.
REAL_NODES ?= 0

.PHONY: help run test test-tools test-images test-chart lint unit integration oracle oracle-dra bench cluster cluster-down cluster-status binaries venv clean \
	image-tools images images-smoke images-clean

help: ## list the targets
	@grep -E '^[a-z-]+:.*## ' $(MAKEFILE_LIST) | awk -F':.*## ' '{printf "  make %-15s %s\n", $$1, $$2}'

$(VENV)/.installed: pyproject.toml constraints.txt
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -c constraints.txt -e '.[dev]'
	touch $@

venv: $(VENV)/.installed ## create the Python environment in .venv

binaries: ## build the pinned Kubernetes, etcd, kwok and helm binaries and toposched's Go helpers (cached)
	hack/build-binaries.sh >/dev/null

# REAL_NODES=N adds real nodes realnode-0..N-1 (2 NUMA zones x 4 CPUs, single-numa-node, static CPU
# manager with CPU 0 reserved); they need root, `make test-tools` and the venv (testkit.realnode).
cluster: $(if $(filter-out 0,$(REAL_NODES)),venv) ## start the local control plane (idempotent); REAL_NODES=N adds real kubelet nodes
	REAL_NODES=$(REAL_NODES) hack/cluster.sh up

cluster-down: ## stop everything `make cluster` started (real nodes included); leaves nothing behind
	hack/cluster.sh down

cluster-status: ## show whether the local control plane is up, and its real nodes
	hack/cluster.sh status

run: venv cluster ## the main job: Online Boutique on real kubelet nodes, toposched beside kube-scheduler alone
	hack/run.sh

# The Go helpers (helpers/<name>/) are checked by gofmt and go vet here, and tested by go test in
# `make unit` and `make test`.
GO_HELPERS := $(wildcard helpers/*/go.mod)
GO := CGO_ENABLED=0 GOTOOLCHAIN=local GOFLAGS=-mod=readonly go

lint: venv ## ruff, mypy --strict, the import contracts, gofmt and go vet
	$(VENV)/bin/ruff check .
	$(VENV)/bin/ruff format --check .
	test -z "$$(gofmt -l helpers)" || { gofmt -l helpers; echo "gofmt: the files above are not formatted" >&2; exit 1; }
	for m in $(dir $(GO_HELPERS)); do (cd $$m && $(GO) vet ./...); done
	$(VENV)/bin/mypy
	$(VENV)/bin/lint-imports
	$(VENV)/bin/hadolint Dockerfile.operator Dockerfile.exporter hack/Dockerfile.kube-scheduler
	hack/build-binaries.sh >/dev/null && "$$(hack/build-binaries.sh --print)/helm" lint --strict charts/toposched

unit: venv ## pure unit tests (no cluster)
	$(VENV)/bin/pytest tests/unit
	for m in $(dir $(GO_HELPERS)); do (cd $$m && $(GO) test ./...); done

integration: venv binaries ## tests against the local control plane (started on demand, reused if up)
	$(VENV)/bin/pytest tests/integration

# netperf, iproute2 and openssl for the prober's and the webhooks' tests; containerd, runc, the
# CNI plugins and busybox-static for the real kubelet nodes (root, apt). Without root the tests
# that need them skip, except under CI, where they fail.
test-tools: ## install the system tools some integration tests need (idempotent)
	hack/install-netperf.sh || [ -z "$${CI:-}" ]
	hack/install-node-tools.sh || [ -z "$${CI:-}" ]

# The binaries (and, as root, the images) are built before pytest starts, so a first build does not
# count against test timeouts. pytest exits 5 when it collects no test; that is not a failure.
test: lint binaries test-tools test-images ## everything: lint, unit and integration tests
	for m in $(dir $(GO_HELPERS)); do (cd $$m && $(GO) test ./...); done
	$(VENV)/bin/pytest tests || [ $$? -eq 5 ]

# The images for the chart's test on real nodes (tests/integration/test_chart_realnodes.py). They
# need root (buildah); elsewhere that test skips, except under CI, where it fails.
test-images:
	if [ "$$(id -u)" -eq 0 ]; then $(MAKE) --no-print-directory images; elif [ -n "$${CI:-}" ]; then \
	  echo "test-images: building the images needs root" >&2; exit 1; fi

# The chart installed for real: images built and imported into two real nodes, helm install,
# placements through the release, upgrade, uninstall; then its warm standby on three real nodes,
# the acting replica lost under a pod stream (root; part of `make test`).
test-chart: venv binaries test-tools test-images ## the chart on real kubelet nodes, from the locally built images
	$(VENV)/bin/pytest tests/integration/test_chart_realnodes.py tests/integration/test_chart_failover.py

# Container images, daemonless: buildah (chroot isolation, overlay or vfs storage) as root. The
# archives go to .images/. IMAGE_BASE=auto (default: the official Python base if it can be
# pulled, else a local Debian bookworm base), official, local or an image reference.
image-tools: ## install buildah and debootstrap from Debian (root; idempotent)
	hack/install-image-tools.sh

images: image-tools ## build the operator, exporter (and kube-scheduler) images into .images/*.tar
	hack/build-images.sh

images-smoke: ## smoke-test the built images: every command as the image's user, read-only root, an NRT
	hack/smoke-images.sh

images-clean: ## remove .images/ and the images' build cache (the local base image included)
	hack/build-images.sh --clean

# The admission predictor against real kubelets (root; docs/oracle.md). Its last line says
# `oracle: N cases, D undocumented disagreements` (so a disagreement does not fail make: the line
# must stay last; tests/integration/test_oracle.py is what fails on one); a run that cannot run fails.
CASES ?= 200
SEED ?= 1
NODES ?= 3
oracle: venv binaries test-tools cluster ## toposched's NUMA predictions against real kubelets: CASES=N SEED=S NODES=K
	$(PY) -m testkit.oracle --cases $(CASES) --seed $(SEED) --nodes $(NODES) --out .cluster/oracle-$(SEED).json \
	  || [ $$? -eq 1 ]

# The DRA device pick toposched predicts against the real kube-scheduler, on kwok nodes (no root;
# docs/oracle.md). Its last line says `oracle-dra: N cases, M undocumented disagreements` (a
# disagreement does not fail make; tests/integration/test_oracle_dra.py fails on one); a run that
# cannot run fails. DRA_HELPER=PATH uses another toposched-dra-allocate than the pinned bin dir's.
oracle-dra: venv binaries cluster ## toposched's DRA device pick against the real kube-scheduler: CASES=N SEED=S
	$(PY) -m testkit.oracle_dra --cases $(CASES) --seed $(SEED) --out .cluster/oracle-dra-$(SEED).json \
	  $(if $(DRA_HELPER),--helper $(DRA_HELPER)) || [ $$? -eq 1 ]

# BENCH_ARGS are passed on, e.g. BENCH_ARGS="--only scale --full" (python -m bench --help).
bench: venv cluster ## benchmarks on the local control plane; regenerates docs/benchmarks/report.md
	$(PY) -m bench $(BENCH_ARGS)

clean: ## remove the Python environment and the local cluster state
	-hack/cluster.sh down
	rm -rf $(VENV) .cluster .mypy_cache .ruff_cache .pytest_cache
