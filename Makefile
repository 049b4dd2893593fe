# tally: build, test and demo targets. Run `make help` for the list.

SHELL := bash
.SHELLFLAGS := -eu -o pipefail -c
.DEFAULT_GOAL := help

KUBE_VERSION ?= v1.37.0
# The control plane (etcd, kube-apiserver, kube-controller-manager,
# kube-scheduler, kubectl) and kwok/kwokctl, built from the Go module proxy.
TOOLS ?= $(HOME)/.cache/tally/tools-$(KUBE_VERSION)
TOOL_BINARIES := etcd kube-apiserver kube-controller-manager kube-scheduler kubectl kwok kwokctl training-operator

GO ?= go
BIN := $(CURDIR)/bin/tally
# The e2e package builds the operators it has not built before in the
# background while its tests run: about 40 minutes in all on a cold 2-core
# machine, so its bound leaves room.
TEST_TIMEOUT ?= 75m
E2E_TIMEOUT ?= 75m
# One test binary at a time: the envtest and e2e suites each run a control
# plane, and two of them at once on a small machine make timings meaningless.
TEST_PARALLEL ?= 1

# Fuzz targets as PACKAGE:FuzzName, found in the *_test.go files; override to
# pick some. Each runs for FUZZTIME.
FUZZ_TARGETS ?= $(shell grep -rE --include='*_test.go' '^func Fuzz[A-Za-z0-9_]*[[:space:]]*.f \*testing[.]F' . 2>/dev/null \
	| sed -E 's|^(.*)/[^/]*_test[.]go:func (Fuzz[A-Za-z0-9_]*).*|\1:\2|' | sort -u)
FUZZTIME ?= 10m
# How long the fuzzer may spend shrinking each new input; go's default (60s)
# would take up a short run.
FUZZ_MINIMIZE ?= 60s
# How long `make test` runs each fuzz target, after the tests.
# An execution count, not a duration: with a duration, Go 1.26's fuzzing
# coordinator can fail a target with a bare "context deadline exceeded" at
# the deadline (go.dev/issue/75804), with nothing found.
FUZZ_SMOKE ?= 5000x

# bin/tally and the image are static and built with -trimpath; vet, the
# tests and go run are too (STATIC and -trimpath), so that all of them
# share the compiled dependencies in Go's build cache.
STATIC := CGO_ENABLED=0
TEST_ENV := $(STATIC) KUBEBUILDER_ASSETS=$(TOOLS) TALLY_TOOLS=$(TOOLS) TALLY_BIN=$(BIN)

.PHONY: help
help: ## Show the targets.
	@grep -hE '^[a-z0-9-]+:.*## ' $(MAKEFILE_LIST) | awk -F':.*## ' '{printf "  %-11s %s\n", $$1, $$2}'

.PHONY: toolchain
toolchain: ## Build the pinned control plane and kwok into $(TOOLS) (skipped when present).
	@missing=0; for b in $(TOOL_BINARIES); do [ -x "$(TOOLS)/$$b" ] || missing=1; done; \
	if [ $$missing = 0 ]; then echo "toolchain: present in $(TOOLS)"; \
	else KUBE_VERSION=$(KUBE_VERSION) bash e2e/toolchain/build.sh "$(TOOLS)"; fi

# Debian's chromium renders the dashboard page in the e2e tests; apt-get
# runs as root, or through sudo.
SUDO := $(shell [ "$$(id -u)" = 0 ] || echo sudo)

.PHONY: chromium
chromium: ## Install Debian's chromium for the dashboard test (skipped when present).
	@command -v chromium >/dev/null || { echo "chromium: installing Debian's package (a few minutes)"; \
		$(SUDO) apt-get update -qq && DEBIAN_FRONTEND=noninteractive $(SUDO) apt-get install -y -qq chromium >/dev/null; }

# The commit tally version reports (go's own VCS stamp may be off, as
# with GOFLAGS=-buildvcs=false).
COMMIT ?= $(shell git describe --always --dirty 2>/dev/null)
LDFLAGS = -s -w -X main.commit=$(COMMIT)

.PHONY: build
build: ## Build bin/tally (static, as in the image, so the two share the build cache).
	CGO_ENABLED=0 $(GO) build -trimpath -ldflags "$(LDFLAGS)" -o $(BIN) .

# The container image: its name, the architecture it is built for, the
# static binary it holds and the OCI archive `make image` writes it to.
# make image untags the previous build of IMAGE in buildah's storage first,
# so that rebuilds do not pile up unnamed images there.
IMAGE ?= tally:dev
IMAGE_ARCH ?= $(shell $(GO) env GOARCH)
IMAGE_BIN = $(CURDIR)/bin/tally-linux-$(IMAGE_ARCH)
IMAGE_ARCHIVE ?= $(CURDIR)/bin/tally-image.tar
BUILDAH ?= buildah
# Global buildah flags, e.g. BUILDAH_FLAGS="--storage-driver vfs" where
# overlay mounts are not allowed.
BUILDAH_FLAGS ?=
BUILDAH_CMD = $(strip $(BUILDAH) $(BUILDAH_FLAGS))

.PHONY: image
image: ## Build the container image (IMAGE, default tally:dev; the static binary on scratch) with buildah into bin/tally-image.tar, an OCI archive.
	@command -v $(BUILDAH) >/dev/null || { echo "make image: $(BUILDAH) not found; install it (Debian, Ubuntu: apt-get install buildah; Fedora: dnf install buildah)" >&2; exit 1; }
	CGO_ENABLED=0 GOOS=linux GOARCH=$(IMAGE_ARCH) $(GO) build -trimpath -ldflags "$(LDFLAGS)" -o $(IMAGE_BIN) .
	@$(BUILDAH_CMD) rmi $(IMAGE) >/dev/null 2>&1 || true
	$(BUILDAH_CMD) bud --format oci --platform linux/$(IMAGE_ARCH) -f Dockerfile -t $(IMAGE) .
	@rm -f $(IMAGE_ARCHIVE)
	$(BUILDAH_CMD) push $(IMAGE) oci-archive:$(IMAGE_ARCHIVE):$(IMAGE_REF)
	@echo "image: $(IMAGE) in $(IMAGE_ARCHIVE) as $(IMAGE_REF), $$(du -h $(IMAGE_ARCHIVE) | cut -f1)"

# The name the archive gives the image: IMAGE as containerd and kubelet
# normalize it (tally:dev is docker.io/library/tally:dev), so that an image
# loaded with ctr import or kind load image-archive is found by the
# Deployment's image: tally:dev.
IMAGE_REF = $(shell r='$(IMAGE)'; first=$${r%%/*}; \
	if [[ $$r != */* ]]; then r=docker.io/library/$$r; \
	elif [[ $$first != *.* && $$first != *:* && $$first != localhost ]]; then r=docker.io/$$r; fi; \
	if [[ $$r != *@* && $${r##*/} != *:* ]]; then r=$$r:latest; fi; \
	echo "$$r")

.PHONY: image-test
image-test: image ## Build the image and check it (e2e/image): entrypoint, non-root user, static binary, and the binary run from its layer.
	$(STATIC) TALLY_IMAGE=$(IMAGE_ARCHIVE) TALLY_IMAGE_REF=$(IMAGE_REF) $(GO) test -trimpath ./e2e/image -count=1 -v

# helm and kubectl (kubectl kustomize renders deploy/ for the comparison)
# are built into TOOLS by e2e/toolchain/build.sh when missing; helm is not
# in TOOL_BINARIES.
HELM_CHART := deploy/helm/tally

.PHONY: helm-check
helm-check: ## Lint and render the Helm chart deploy/helm/tally in both certModes and check it against deploy/ (e2e/helmchart); builds helm if missing.
	@missing=; for b in helm kubectl; do [ -x "$(TOOLS)/$$b" ] || missing="$$missing $$b"; done; \
	if [ -n "$$missing" ]; then KUBE_VERSION=$(KUBE_VERSION) bash e2e/toolchain/build.sh "$(TOOLS)" $$missing; fi
	$(TOOLS)/helm lint $(HELM_CHART)
	$(TOOLS)/helm lint $(HELM_CHART) --set certMode=cert-manager
	@for mode in builtin cert-manager; do \
		echo "helm template tally $(HELM_CHART) -n tally-system --set certMode=$$mode"; \
		$(TOOLS)/helm template tally $(HELM_CHART) -n tally-system --set certMode=$$mode >/dev/null; done
	$(TEST_ENV) $(GO) test -trimpath ./e2e/helmchart -count=1 -v

.PHONY: manifests
manifests: ## Write the webhook configurations and RBAC objects of deploy/base and the Helm chart from the code (hack/manifests); make test fails when they differ.
	$(GO) run ./hack/manifests

# Where `make install` puts tally, as kubectl-tally (a kubectl plugin).
PREFIX ?= $(HOME)/.local
.PHONY: install
install: build ## Install bin/tally as $(PREFIX)/bin/kubectl-tally (PREFIX, default ~/.local), so that `kubectl tally ...` runs it.
	install -d $(PREFIX)/bin
	install -m 0755 $(BIN) $(PREFIX)/bin/kubectl-tally

.PHONY: fmt-check
fmt-check: ## Fail if any Go file is not gofmt-ed.
	@out=$$(gofmt -l $$(git ls-files -co --exclude-standard '*.go' 2>/dev/null || find . -name '*.go' -not -path './.*')); \
	if [ -n "$$out" ]; then echo "gofmt needed on:"; echo "$$out"; exit 1; fi

.PHONY: vet
vet: ## Run go vet.
	$(STATIC) $(GO) vet -trimpath ./...

.PHONY: test
test: toolchain chromium build fmt-check vet ## All tests: unit, envtest and e2e, then each fuzz target for FUZZ_SMOKE and each Go benchmark once (builds missing tools first).
	$(TEST_ENV) $(GO) test -trimpath ./... -count=1 -p $(TEST_PARALLEL) -timeout $(TEST_TIMEOUT)
	@$(MAKE) --no-print-directory fuzz-smoke
	@$(MAKE) --no-print-directory bench-smoke

.PHONY: test-unit
test-unit: ## Unit tests only (the envtest and e2e suites skip themselves).
	env -u KUBEBUILDER_ASSETS -u TALLY_TOOLS -u TALLY_BIN $(STATIC) $(GO) test -trimpath ./... -count=1

.PHONY: test-e2e
test-e2e: toolchain chromium build ## The e2e suite against a local kwok cluster.
	$(TEST_ENV) $(GO) test -trimpath ./e2e/... -count=1 -v -timeout $(E2E_TIMEOUT)

# How long `make soak` injects faults (TALLY_CHAOS of e2e/chaos_test.go).
SOAK_DURATION ?= 30m
# The go test timeout of `make soak`: the faults, then a drain of up to the
# same length plus 5m, and setup (raise it with SOAK_DURATION).
SOAK_TIMEOUT ?= 90m

.PHONY: soak
soak: toolchain build ## The chaos soak: two replicas, killed leaders, an API server restart, config reloads, unbinding, deletions, checked by e2e/auditor (SOAK_DURATION, default 30m; not in make test).
	$(TEST_ENV) TALLY_CHAOS=$(SOAK_DURATION) $(GO) test -trimpath ./e2e -run '^TestChaosSoak$$' -count=1 -v -timeout $(SOAK_TIMEOUT)

# The benchmark scenario `make bench` runs: bench/$(BENCH_SCENARIO).yaml.
BENCH_SCENARIO ?= baseline
# What `make bench` runs: both (tally, then the replay reference), tally or replay.
BENCH_MODE ?= both
# Extra flags for the bench command, e.g. BENCH_FLAGS=-profile.
BENCH_FLAGS ?=

.PHONY: bench
bench: toolchain build ## Run a benchmark (BENCH_SCENARIO, default baseline): tally, then the replay reference (BENCH_MODE), vs an ideal scheduler; summary in .bench/.
	$(TEST_ENV) $(GO) run -trimpath ./e2e/perf/cmd/bench -scenario bench/$(BENCH_SCENARIO).yaml -mode $(BENCH_MODE) -out .bench $(BENCH_FLAGS)

# Kueue's scheduler-performance runner and minimalkueue (and
# minimalkueue-qps500, at tally's client budget), built into
# $(TOOLS)/kueue-perf-$(KUEUE_VERSION) by e2e/toolchain/build.sh on first
# use, for the release KUEUE_VERSION names.
KUEUE_VERSION ?= v0.19.2
BENCH_ROUNDS ?= 3
.PHONY: bench-kueue
bench-kueue: toolchain build ## Compare tally and Kueue's own scheduler-performance runner with minimalkueue (KUEUE_VERSION, default v0.19.2) on BENCH_SCENARIO: BENCH_ROUNDS runs each of tally, tally with the Jobs' pods, tally at Kueue's client budget, Kueue, Kueue at tally's budget, in turn (not in make test).
	@[ -x "$(TOOLS)/kueue-perf-$(KUEUE_VERSION)/minimalkueue-qps500" ] || KUBE_VERSION=$(KUBE_VERSION) KUEUE_VERSION=$(KUEUE_VERSION) bash e2e/toolchain/build.sh "$(TOOLS)" kueue-perf
	$(TEST_ENV) $(GO) run -trimpath ./e2e/perf/cmd/bench -scenario bench/$(BENCH_SCENARIO).yaml -out .bench -kueue $(TOOLS)/kueue-perf-$(KUEUE_VERSION) -rounds $(BENCH_ROUNDS) -tally-version "$$(git describe --always --dirty 2>/dev/null)" $(BENCH_FLAGS)

.PHONY: bench-large
bench-large: ## The 50,000-Job scenario, bench/large.yaml.
	@$(MAKE) --no-print-directory bench BENCH_SCENARIO=large

.PHONY: demo
demo: toolchain build ## Start (or restart) the local demo cluster with tally and sample Jobs (KARPENTER=1: the GPU training example, a PyTorchJob, on nodes Karpenter makes).
	TOOLS=$(TOOLS) TALLY_BIN=$(BIN) KARPENTER=$(KARPENTER) bash e2e/demo/demo.sh

.PHONY: demo-down
demo-down: ## Stop tally and delete the demo cluster.
	TOOLS=$(TOOLS) bash e2e/demo/down.sh

.PHONY: fuzz
fuzz: ## Run every fuzz target (FUZZ_TARGETS) for FUZZTIME each.
	@if [ -z "$(strip $(FUZZ_TARGETS))" ]; then echo "fuzz: no fuzz targets yet"; exit 0; fi; \
	for t in $(FUZZ_TARGETS); do \
		pkg=$${t%%:*}; name=$${t##*:}; \
		echo "fuzz: $$pkg $$name for $(FUZZTIME)"; \
		$(GO) test "$$pkg" -run '^$$' -fuzz "^$$name\$$" -fuzztime $(FUZZTIME) -fuzzminimizetime $(FUZZ_MINIMIZE); \
	done

.PHONY: bench-smoke
bench-smoke: ## Run every Go benchmark once, as a test that they still run (make test does; measure with -count and benchstat instead).
	$(TEST_ENV) $(GO) test -trimpath $$(grep -rl --include='*_test.go' '^func Benchmark' . | xargs -n1 dirname | sort -u) -run '^$$' -bench . -benchtime 1x -count=1 -timeout 15m

.PHONY: fuzz-smoke
fuzz-smoke: ## Run every fuzz target for FUZZ_SMOKE each (make test does).
	@$(MAKE) --no-print-directory fuzz FUZZTIME=$(FUZZ_SMOKE) FUZZ_MINIMIZE=1s

.PHONY: clean
clean: ## Remove build outputs (not the toolchain cache, not a running demo).
	rm -rf bin .bench cover.out coverage.out *.coverprofile
	find . -name '*.test' -type f -delete
