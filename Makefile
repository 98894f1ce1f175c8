# kdag Makefile. `make help` lists the targets.
#
# Every tool is pinned in a module under hack/tools/ and built from source into bin/, keyed by its
# version, so a version bump rebuilds exactly what changed and a warm checkout builds nothing.

SHELL := /usr/bin/env bash
.SHELLFLAGS := -euo pipefail -c
.DEFAULT_GOAL := help

ROOT := $(CURDIR)
BIN := $(ROOT)/bin
TOOLS := $(ROOT)/hack/tools

# Pinned versions, read from the tools modules so that go.mod stays the one source of truth.
modver = $(shell awk '$$1 == "require" { $$1 = ""; $$0 = $$0 } $$1 == "$(2)" && $$2 ~ /^v/ { print $$2; exit }' $(TOOLS)/$(1)/go.mod)
KUBE_VERSION := $(call modver,k8s,k8s.io/kubernetes)
# The oldest Kubernetes version kdag supports (README "Kubernetes versions"): its kube-apiserver
# runs the envtest suites in `make test-envtest-oldest`.
KUBE_OLDEST_VERSION := $(call modver,k8s-oldest,k8s.io/kubernetes)
ETCD_VERSION := $(call modver,etcd,go.etcd.io/etcd/server/v3)
KWOK_VERSION := $(call modver,kwok,sigs.k8s.io/kwok)
CONTROLLER_GEN_VERSION := $(call modver,dev,sigs.k8s.io/controller-tools)
KUSTOMIZE_VERSION := $(call modver,dev,sigs.k8s.io/kustomize/kustomize/v5)
HELM_VERSION := $(call modver,dev,helm.sh/helm/v3)
GOTESTSUM_VERSION := $(call modver,dev,gotest.tools/gotestsum)
BENCHSTAT_VERSION := $(call modver,dev,golang.org/x/perf)
GOLANGCI_LINT_VERSION := $(call modver,lint,github.com/golangci/golangci-lint/v2)
JAEGER_VERSION := $(call modver,jaeger,github.com/jaegertracing/jaeger)

# The control plane: one directory with every binary envtest and the local cluster need. It is
# what KUBEBUILDER_ASSETS points at (see pkg/localcluster.BinDir).
CLUSTER_BIN := $(BIN)/cluster
CLUSTER_BINARIES := kube-apiserver kube-controller-manager kube-scheduler kubectl etcd kwok kwokctl
KUBE_DIR := $(BIN)/k8s-$(KUBE_VERSION)
KUBE_OLDEST_DIR := $(BIN)/k8s-$(KUBE_OLDEST_VERSION)
# KUBEBUILDER_ASSETS of `make test-envtest-oldest`: the oldest kube-apiserver, etcd and kubectl of bin/cluster.
CLUSTER_OLDEST_BIN := $(BIN)/cluster-oldest
ETCD := $(BIN)/etcd-$(ETCD_VERSION)/etcd
KWOK_DIR := $(BIN)/kwok-$(KWOK_VERSION)

CONTROLLER_GEN := $(BIN)/controller-gen-$(CONTROLLER_GEN_VERSION)
KUSTOMIZE := $(BIN)/kustomize-$(KUSTOMIZE_VERSION)
HELM := $(BIN)/helm-$(HELM_VERSION)
GOTESTSUM := $(BIN)/gotestsum-$(GOTESTSUM_VERSION)
BENCHSTAT := $(BIN)/benchstat-$(BENCHSTAT_VERSION)
GOLANGCI_LINT := $(BIN)/golangci-lint-$(GOLANGCI_LINT_VERSION)
JAEGER := $(BIN)/jaeger-$(JAEGER_VERSION)/jaeger
JAEGER_CONFIG := $(ROOT)/hack/jaeger/config.yaml

# The version stamped into the binaries (main.version, `--version`), the image tag and the chart's
# appVersion: `git describe`, or "dev" when no tag reaches HEAD. Images take their times from
# SOURCE_DATE_EPOCH (the commit time), so a commit builds the same image bytes every time. See
# internal/release for the chart version (SemVer) made from it.
VERSION ?= $(shell git describe --tags --dirty 2>/dev/null || echo dev)
REVISION ?= $(shell git rev-parse HEAD 2>/dev/null)
SOURCE_DATE_EPOCH ?= $(shell git log -1 --format=%ct 2>/dev/null || echo 0)
LDFLAGS := -X main.version=$(VERSION)
# Where `make image` and `make release` write; PLATFORMS=linux/amd64 builds one image only.
IMAGE_DIR ?= $(BIN)/image
RELEASE_DIR ?= $(BIN)/release
PLATFORMS ?=
RELEASE_FLAGS = -version '$(VERSION)' -revision '$(REVISION)' -source-date-epoch '$(SOURCE_DATE_EPOCH)'

export KUBEBUILDER_ASSETS := $(CLUSTER_BIN)
export KWOK_KUBE_VERSION := $(KUBE_VERSION)

# The local cluster (kwokctl, binary runtime) that `make dev-cluster`, `make demo` and the e2e tests use.
CLUSTER_NAME ?= kdag
KUBECONFIG_DEV := $(BIN)/kubeconfig-$(CLUSTER_NAME)

GO_TEST_FLAGS ?= -race -count=1 -timeout 30m
# HELLO is the example operator, a Go module of its own (examples/hello/go.mod, kdag replaced by
# this checkout): the root module's ./... leaves it out, `make test-examples` builds and tests it.
HELLO := $(ROOT)/examples/hello
PKGS ?= ./...
# SLOW_TESTS are left out of `make test` and run alone by their own targets (which .ci/run calls):
# TestRollingRestart (`make test-rollout`) times Lease expiries, which the other packages' load
# beside it would stretch.
SLOW_TESTS ?= ^TestRollingRestart$$
# PURE_PKGS are the packages whose tests need no binary at all: the
# test target runs them first with KUBEBUILDER_ASSETS pointing nowhere, so an API-server test
# that slips into them fails.
PURE_PKGS := ./pkg/graph/ ./pkg/render/ ./pkg/resources/ ./pkg/rbac/ ./pkg/apis/... ./pkg/metrics/ ./pkg/tracing/ ./pkg/testing/latency/ ./pkg/testing/faults/ ./pkg/testing/leak/ ./pkg/controller/internal/intern/
# ENVTEST_PKGS are the packages whose tests start an API server with pkg/testing/envtest (their test
# binaries link it), less the pure ones and test/ (the local-cluster and reliability suites): what
# `make test-envtest-oldest` runs against the oldest supported kube-apiserver.
ENVTEST_PKGS ?= $(filter-out $(PURE_PKGS) ./test/%,$(shell go list -test \
	-f '{{if .ForTest}}{{.Dir}}{{range .Deps}} {{.}}{{end}}{{end}}' ./... | \
	awk '/ github\.com\/kdag-dev\/kdag\/pkg\/testing\/envtest( |$$)/ { print $$1 }' | sort -u | sed 's|^$(ROOT)|.|; s|$$|/|'))
# Benchmarks: BENCH selects them, BENCH_COUNT repeats each; they run one package at a time (-p 1)
# in the packages that have any (not the e2e ones, whose TestMain starts a cluster). The long
# SCALE_BENCH ones (BenchmarkScale, BenchmarkResync: a minute or more per run) run apart, once per
# SCALE_COUNT (`make bench SCALE_BENCH=` leaves them out).
BENCH ?= .
BENCH_COUNT ?= 6
BENCH_PKGS ?= $(sort $(patsubst %/,./%/,$(dir $(shell grep -rl --include='*_test.go' '^func Benchmark' apis cmd controllers pkg))))
SCALE_BENCH ?= BenchmarkScale|BenchmarkResync
SCALE_COUNT ?= 1

# $(call kube_ldflags,v1.37.1) stamps that version into Kubernetes binaries (else they report v0.0.0-master).
kube_semver = $(subst ., ,$(patsubst v%,%,$(1)))
kube_ldflags = -s -w $(foreach p,k8s.io/component-base/version k8s.io/client-go/pkg/version,\
	-X $(p).gitVersion=$(1) -X $(p).gitMajor=$(word 1,$(call kube_semver,$(1))) \
	-X $(p).gitMinor=$(word 2,$(call kube_semver,$(1))) -X $(p).gitTreeState=clean)

say = printf '\033[1m==> %s\033[0m\n' "$(1)"

##@ General

.PHONY: help
help: ## Show this help.
	@awk 'BEGIN { FS = ":.*##"; printf "Usage: make <target>\n" } \
	/^[a-zA-Z_-]+:.*?##/ { printf "  \033[36m%-20s\033[0m %s\n", $$1, $$2 } \
	/^##@/ { printf "\n\033[1m%s\033[0m\n", substr($$0, 5) }' $(MAKEFILE_LIST)

##@ Development

.PHONY: generate
generate: $(CONTROLLER_GEN) ## Generate deepcopy code from the API types (the examples' too).
	$(CONTROLLER_GEN) object:headerFile=hack/boilerplate.go.txt paths=./apis/... paths=./pkg/apis/... paths=./pkg/testing/...
	cd $(HELLO) && $(CONTROLLER_GEN) object:headerFile=$(ROOT)/hack/boilerplate.go.txt paths=./...

.PHONY: manifests
manifests: $(CONTROLLER_GEN) ## Generate CRDs and RBAC from the markers.
	$(CONTROLLER_GEN) crd rbac:roleName=kdag-manager paths=./apis/... paths=./controllers/... \
		output:crd:artifacts:config=config/crd/bases output:rbac:artifacts:config=config/rbac
	$(CONTROLLER_GEN) crd paths=./pkg/testing/testapi/... output:crd:artifacts:config=pkg/testing/testapi/crd
	rm -f charts/kdag/crds/*.yaml && cp config/crd/bases/*.yaml charts/kdag/crds/
	cp config/rbac/role.yaml charts/kdag/files/role.yaml
	cd $(HELLO) && $(CONTROLLER_GEN) crd rbac:roleName=hello-manager paths=./... \
		output:crd:artifacts:config=config/crd output:rbac:artifacts:config=config/rbac

.PHONY: fmt
fmt: ## Run gofmt on the code.
	gofmt -s -w $$(git ls-files '*.go')

.PHONY: verify
verify: generate manifests $(GOLANGCI_LINT) ## Check generated files are current, gofmt, go vet and golangci-lint.
	@$(call say,checking generated files are up to date)
	@git diff --exit-code -- apis config charts pkg examples || { echo "generated files changed: run 'make generate manifests' and commit"; exit 1; }
	@test -z "$$(git status --porcelain -- apis config charts pkg examples)" || { git status --porcelain -- apis config charts pkg examples; echo "untracked generated files: commit them"; exit 1; }
	@$(call say,gofmt)
	@out=$$(gofmt -s -l $$(git ls-files '*.go')); test -z "$$out" || { echo "gofmt needed: $$out"; exit 1; }
	@$(call say,go vet)
	go vet ./...
	cd $(HELLO) && go vet ./...
	@$(call say,golangci-lint)
	$(GOLANGCI_LINT) run ./...
	cd $(HELLO) && $(GOLANGCI_LINT) run --config $(ROOT)/.golangci.yml ./...

.PHONY: build
build: ## Build the manager and kubectl-kdag into bin/, VERSION (git describe, or dev) stamped in.
	go build -ldflags '$(LDFLAGS)' -o $(BIN)/manager .
	go build -ldflags '$(LDFLAGS)' -o $(BIN)/kubectl-kdag ./cmd/kubectl-kdag
	@$(BIN)/manager --version && $(BIN)/kubectl-kdag --version

.PHONY: test
test: test-pure test-examples tools-cluster $(JAEGER) $(KUSTOMIZE) $(HELM) ## Run unit, envtest, e2e and release tests and the examples' with -race (builds the control plane, Jaeger, kustomize and helm first).
	@$(call say,go test $(GO_TEST_FLAGS) $(PKGS) (less $(SLOW_TESTS)))
	go test $(GO_TEST_FLAGS) $(if $(SLOW_TESTS),-skip '$(SLOW_TESTS)') $(PKGS)

.PHONY: test-pure
test-pure: ## Run the tests that need no binary (pkg/graph, pkg/resources, ...) with no control plane in reach; the cache transform's also with apimachinery's fieldsv1string build tag.
	@$(call say,go test $(PURE_PKGS) without binaries)
	KUBEBUILDER_ASSETS=$(BIN)/none go test $(GO_TEST_FLAGS) $(PURE_PKGS)
	KUBEBUILDER_ASSETS=$(BIN)/none go test $(GO_TEST_FLAGS) -tags fieldsv1string ./pkg/controller/internal/intern/

.PHONY: test-examples
test-examples: tools-cluster ## Build, vet and test examples/hello with -race as its own module, as an operator outside this repository (replace to this checkout) is (~1.5-4 min on 2 cores).
	@$(call say,examples/hello: go build go vet go test $(GO_TEST_FLAGS) (module github.com/kdag-dev/kdag/examples/hello))
	cd $(HELLO) && go build ./... && go vet ./... && go test $(GO_TEST_FLAGS) ./...

.PHONY: test-envtest-oldest
test-envtest-oldest: tools-cluster tools-apiserver-oldest ## Run the envtest suites (ENVTEST_PKGS) against the oldest supported kube-apiserver (hack/tools/k8s-oldest), with -race.
	@$(call say,go test on kube-apiserver $(KUBE_OLDEST_VERSION): $(ENVTEST_PKGS))
	KUBEBUILDER_ASSETS=$(CLUSTER_OLDEST_BIN) go test $(GO_TEST_FLAGS) $(ENVTEST_PKGS)

# CRASH_PARALLEL is how many crash runs test-crash-every runs at once (Crashes.Parallel).
CRASH_PARALLEL ?= 4

.PHONY: test-crash
test-crash: tools-cluster ## Kill the reference operator at each of its writes in turn (test/crash: first deploy, upgrade, deletion with retained data, storage growth, deletionPolicy switches, cache off and on, a shard move; KDAG_CRASH_STRIDE=1 for every crash point), with -race.
	@$(call say,go test $(GO_TEST_FLAGS) ./test/crash/...)
	go test $(GO_TEST_FLAGS) ./test/crash/...

.PHONY: test-crash-every
test-crash-every: tools-cluster ## Every crash point of every test/crash scenario (KDAG_CRASH_STRIDE=1) without -race, four crash runs at once (KDAG_CRASH_PARALLEL): make test explores every fifth to sixteenth one with -race; .ci/run runs this after it (~12 min on 2 cores).
	@$(call say,KDAG_CRASH_STRIDE=1 KDAG_CRASH_PARALLEL=$(CRASH_PARALLEL) go test -count=1 -timeout 60m ./test/crash/...)
	KDAG_CRASH_STRIDE=1 KDAG_CRASH_PARALLEL=$(CRASH_PARALLEL) go test -count=1 -timeout 60m ./test/crash/...

.PHONY: test-rollout
test-rollout: tools-cluster ## Roll 3 replicas of --shards=auto to new IDs under 300 owners being deployed and deleted, on the local cluster (test/e2e/sharding TestRollingRestart, ~5-8 min), with -race.
	@$(call say,go test $(GO_TEST_FLAGS) -run '^TestRollingRestart$$' ./test/e2e/sharding/)
	go test $(GO_TEST_FLAGS) -run '^TestRollingRestart$$' ./test/e2e/sharding/

.PHONY: test-reliability
test-reliability: tools-cluster ## Run the reliability suite (API faults, restart, leader election, bad input, conflicts, secret leaks) with -race.
	@$(call say,go test $(GO_TEST_FLAGS) ./test/reliability/...)
	go test $(GO_TEST_FLAGS) ./test/reliability/...

.PHONY: test-controlplane
test-controlplane: tools-cluster ## Kill kube-apiserver, etcd, the operator's network and the operator under a fleet of Giteas (test/e2e/controlplane; KDAG_FAULT_GITEAS=100 for the full fleet), with -race.
	@$(call say,go test $(GO_TEST_FLAGS) ./test/e2e/controlplane/ ($${KDAG_FAULT_GITEAS:-20} Giteas per fault))
	go test $(GO_TEST_FLAGS) -v ./test/e2e/controlplane/

.PHONY: bench
bench: tools-cluster $(BENCHSTAT) ## Run the benchmarks (BENCH=regexp, BENCH_COUNT=n, SCALE_BENCH=, SCALE_COUNT=n) into bin/bench.txt and summarise with benchstat (see docs/benchmarks.md).
	go test -p 1 -run '^$$' -bench '$(BENCH)' -skip '$(SCALE_BENCH)' -benchmem -count $(BENCH_COUNT) -timeout 60m $(BENCH_PKGS) | tee $(BIN)/bench.txt
	$(if $(SCALE_BENCH),go test -run '^$$' -bench '$(SCALE_BENCH)' -benchtime 1x -count $(SCALE_COUNT) -timeout 60m ./pkg/controller/ | tee -a $(BIN)/bench.txt)
	$(BENCHSTAT) $(BIN)/bench.txt

# The archive `make bench-bundle` writes (xz: about 40 MB, small enough to carry to a lent machine).
BENCH_BUNDLE ?= $(BIN)/kdag-bench-linux-amd64.tar.xz

.PHONY: bench-bundle
bench-bundle: $(KUBE_DIR)/kube-apiserver $(ETCD) ## Write BENCH_BUNDLE: the benchmark test binaries, kube-apiserver, etcd and run.sh, for a Linux amd64 machine without Go or network (docs/benchmarks.md, "Many cores").
	@$(call say,bench bundle $(BENCH_BUNDLE))
	@stage=$$(mktemp -d) && trap 'rm -rf "$$stage"' EXIT && dir=$$stage/kdag-bench && mkdir -p $$dir/bin && \
	CGO_ENABLED=0 GOOS=linux GOARCH=amd64 go test -c -trimpath -ldflags '-s -w' -o $$dir/controller.test ./pkg/controller/ && \
	CGO_ENABLED=0 GOOS=linux GOARCH=amd64 go test -c -trimpath -ldflags '-s -w' -o $$dir/graph.test ./pkg/graph/ && \
	cp -L $(KUBE_DIR)/kube-apiserver $(ETCD) $$dir/bin/ && \
	if [ -x $(BIN)/benchstat ]; then cp -L $(BIN)/benchstat $$dir/bin/; else echo "no bin/benchstat (make tools-dev): the bundle writes no summaries"; fi && \
	cp hack/bench-bundle/run.sh $$dir/ && \
	echo "$(VERSION) $(REVISION) kube-apiserver $(KUBE_VERSION) etcd $(ETCD_VERSION)" > $$dir/VERSION && \
	mkdir -p $(dir $(BENCH_BUNDLE)) && tar -C $$stage -cf - kdag-bench | xz -T0 -6 > $(BENCH_BUNDLE).tmp && mv $(BENCH_BUNDLE).tmp $(BENCH_BUNDLE)
	@ls -l $(BENCH_BUNDLE)

##@ Release (no container runtime needed)

.PHONY: image
image: ## Build the operator image for linux/amd64 and linux/arm64 into bin/image: a docker-loadable tarball per platform and an OCI layout (PLATFORMS=linux/amd64 for one).
	@rm -rf $(IMAGE_DIR)/kdag-image_*
	go run ./hack/release image $(RELEASE_FLAGS) $(if $(PLATFORMS),-platforms '$(PLATFORMS)') -out $(IMAGE_DIR)

.PHONY: release
release: $(KUSTOMIZE) $(HELM) ## Write bin/release: install.yaml, the chart package, the image tarballs, kubectl-kdag for linux/darwin x amd64/arm64, SHA256SUMS.
	@rm -rf $(addprefix $(RELEASE_DIR)/,install.yaml SHA256SUMS kdag-*.tgz kdag-image_* kubectl-kdag_*)
	go run ./hack/release release $(RELEASE_FLAGS) -kustomize $(KUSTOMIZE) -helm $(HELM) -out $(RELEASE_DIR)

##@ Local cluster

.PHONY: dev-cluster
dev-cluster: tools-cluster ## Start (or reuse) the local kwok cluster; writes bin/kubeconfig-kdag.
	@go run ./hack/devcluster -name $(CLUSTER_NAME) -kubeconfig $(KUBECONFIG_DEV) up

.PHONY: dev-cluster-delete
dev-cluster-delete: tools-cluster ## Delete the local kwok cluster.
	@go run ./hack/devcluster -name $(CLUSTER_NAME) -kubeconfig $(KUBECONFIG_DEV) down

.PHONY: install
install: manifests tools-cluster ## Install the CRDs into the cluster of the current kube context.
	$(CLUSTER_BIN)/kubectl apply --server-side -f config/crd/bases

.PHONY: run
run: install ## Run the manager against the current kube context (CRDs installed first).
	go run -ldflags '$(LDFLAGS)' . --health-probe-bind-address=:8081 --metrics-bind-address=:8080

# DEMO_ARGS passes flags to the demo: `make demo DEMO_ARGS=-exit-when-ready` exits once the sample is
# Ready (non-zero if it is not within -timeout, default 10m), as CI runs it; `go run ./hack/demo -h`.
DEMO_ARGS ?=

.PHONY: demo
demo: tools-cluster ## Deploy the reference app on the local cluster: cluster, CRDs, operator, sample; Ctrl-C stops (DEMO_ARGS=-exit-when-ready exits once Ready).
	@go run ./hack/demo -name $(CLUSTER_NAME) -kubeconfig $(KUBECONFIG_DEV) -version '$(VERSION)' $(DEMO_ARGS)

##@ Tools (built from source into bin/, keyed by version)

.PHONY: tools
tools: tools-cluster tools-dev tools-jaeger ## Build every pinned tool (cold: ~10 min on 2 cores; warm: nothing to do).

.PHONY: tools-cluster
tools-cluster: $(KUBE_DIR)/kube-apiserver $(ETCD) $(KWOK_DIR)/kwokctl ## Build the control plane into bin/cluster (cold: ~10 min).
	@mkdir -p $(CLUSTER_BIN)
	@for b in kube-apiserver kube-controller-manager kube-scheduler kubectl; do ln -sfn ../$(notdir $(KUBE_DIR))/$$b $(CLUSTER_BIN)/$$b; done
	@ln -sfn ../etcd-$(ETCD_VERSION)/etcd $(CLUSTER_BIN)/etcd
	@for b in kwok kwokctl; do ln -sfn ../$(notdir $(KWOK_DIR))/$$b $(CLUSTER_BIN)/$$b; done

.PHONY: tools-apiserver-oldest
tools-apiserver-oldest: $(KUBE_OLDEST_DIR)/kube-apiserver $(ETCD) $(KUBE_DIR)/kube-apiserver ## Build the oldest supported kube-apiserver into bin/cluster-oldest, with etcd and kubectl of bin/cluster (cold: ~7-12 min).
	@mkdir -p $(CLUSTER_OLDEST_BIN)
	@ln -sfn ../$(notdir $(KUBE_OLDEST_DIR))/kube-apiserver $(CLUSTER_OLDEST_BIN)/kube-apiserver
	@ln -sfn ../$(notdir $(KUBE_DIR))/kubectl $(CLUSTER_OLDEST_BIN)/kubectl
	@ln -sfn ../etcd-$(ETCD_VERSION)/etcd $(CLUSTER_OLDEST_BIN)/etcd

.PHONY: tools-dev
tools-dev: $(CONTROLLER_GEN) $(KUSTOMIZE) $(HELM) $(GOTESTSUM) $(BENCHSTAT) $(GOLANGCI_LINT) ## Build the developer tools.

$(KUBE_DIR)/kube-apiserver:
	@$(call say,building kube-apiserver kube-controller-manager kube-scheduler kubectl $(KUBE_VERSION) (cold: ~8 min on 2 cores))
	cd $(TOOLS)/k8s && CGO_ENABLED=0 go build -trimpath -ldflags '$(call kube_ldflags,$(KUBE_VERSION))' -o $(KUBE_DIR).tmp/ \
		k8s.io/kubernetes/cmd/kube-apiserver k8s.io/kubernetes/cmd/kube-controller-manager \
		k8s.io/kubernetes/cmd/kube-scheduler k8s.io/kubernetes/cmd/kubectl
	rm -rf $(KUBE_DIR) && mv $(KUBE_DIR).tmp $(KUBE_DIR)

$(KUBE_OLDEST_DIR)/kube-apiserver:
	@$(call say,building kube-apiserver $(KUBE_OLDEST_VERSION) (cold: ~7 min idle; ~12 min on a busy 2-core machine))
	cd $(TOOLS)/k8s-oldest && CGO_ENABLED=0 go build -trimpath -ldflags '$(call kube_ldflags,$(KUBE_OLDEST_VERSION))' \
		-o $(KUBE_OLDEST_DIR).tmp/ k8s.io/kubernetes/cmd/kube-apiserver
	rm -rf $(KUBE_OLDEST_DIR) && mv $(KUBE_OLDEST_DIR).tmp $(KUBE_OLDEST_DIR)

$(ETCD):
	@$(call say,building etcd $(ETCD_VERSION) (cold: ~1.5 min))
	mkdir -p $(dir $@)
	cd $(TOOLS)/etcd && CGO_ENABLED=0 go build -trimpath -ldflags '-s -w' -o $@.tmp . && mv $@.tmp $@

$(KWOK_DIR)/kwokctl:
	@$(call say,building kwok kwokctl $(KWOK_VERSION) (cold: ~2.5 min))
	cd $(TOOLS)/kwok && CGO_ENABLED=0 go build -trimpath -ldflags '-s -w -X sigs.k8s.io/kwok/pkg/consts.Version=$(KWOK_VERSION:v%=%) -X sigs.k8s.io/kwok/pkg/consts.KubeVersion=$(KUBE_VERSION:v%=%)' \
		-o $(KWOK_DIR).tmp/ sigs.k8s.io/kwok/cmd/kwok sigs.k8s.io/kwok/cmd/kwokctl
	rm -rf $(KWOK_DIR) && mv $(KWOK_DIR).tmp $(KWOK_DIR)

# devtool builds one tool of hack/tools/dev or hack/tools/lint as bin/<name>-<version>.
define devtool
$(1):
	@$$(call say,building $(notdir $(1)))
	mkdir -p $(BIN)
	cd $(TOOLS)/$(2) && CGO_ENABLED=0 go build -trimpath -ldflags '-s -w' -o $$@.tmp $(3) && mv $$@.tmp $$@
	ln -sfn $$(notdir $$@) $(BIN)/$(4)
endef
$(eval $(call devtool,$(CONTROLLER_GEN),dev,sigs.k8s.io/controller-tools/cmd/controller-gen,controller-gen))
$(eval $(call devtool,$(KUSTOMIZE),dev,sigs.k8s.io/kustomize/kustomize/v5,kustomize))
$(eval $(call devtool,$(HELM),dev,helm.sh/helm/v3/cmd/helm,helm))
$(eval $(call devtool,$(GOTESTSUM),dev,gotest.tools/gotestsum,gotestsum))
$(eval $(call devtool,$(BENCHSTAT),dev,golang.org/x/perf/cmd/benchstat,benchstat))
$(eval $(call devtool,$(GOLANGCI_LINT),lint,github.com/golangci/golangci-lint/v2/cmd/golangci-lint,golangci-lint))

$(JAEGER):
	@$(call say,building jaeger $(JAEGER_VERSION) (cold: ~3 min idle; ~11 min on a busy 2-core machine))
	mkdir -p $(dir $@)
	cd $(TOOLS)/jaeger && CGO_ENABLED=0 go build -trimpath -ldflags '-s -w' -o $@.tmp github.com/jaegertracing/jaeger/cmd/jaeger && mv $@.tmp $@

##@ Observability

.PHONY: tools-jaeger
tools-jaeger: $(JAEGER) ## Build Jaeger into bin/ (cold: ~3 min idle).

.PHONY: jaeger
jaeger: $(JAEGER) ## Run Jaeger in the foreground (in-memory storage, loopback only); Ctrl-C stops it.
	@$(call say,Jaeger $(JAEGER_VERSION): in another shell export)
	@echo '  export OTEL_EXPORTER_OTLP_ENDPOINT=http://127.0.0.1:4318 OTEL_SERVICE_NAME=kdag'
	@echo '  (or OTEL_EXPORTER_OTLP_ENDPOINT=http://127.0.0.1:4317 OTEL_EXPORTER_OTLP_PROTOCOL=grpc)'
	@echo 'traces: curl -s "http://127.0.0.1:16686/api/traces?service=kdag"   (HTTP API only: no UI in a Go build)'
	exec $(JAEGER) --config $(JAEGER_CONFIG)

.PHONY: clean
clean: ## Remove built binaries (bin/); the local cluster is left alone.
	rm -rf $(BIN)
