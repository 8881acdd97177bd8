# The two commands a newcomer needs:  make demo   and   make test
# Both bootstrap what they need: a virtualenv with kfed installed, and the Go-built
# Kubernetes binaries (cached under ~/.cache/kfed, or $KFED_CACHE_DIR).

PYTHON ?= python3
VENV   ?= .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.kfed-installed
BENCH_STAMP := $(VENV)/.kfed-bench-installed

.PHONY: demo test lint unit integration binaries binaries-pinned binaries-newest browser realnode crds chart image kind bench-scheduler bench-scheduler-upstream bench-apiserver bench-federation bench-jobsets bench-multikueue clean

$(STAMP): pyproject.toml constraints.txt
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	$(BIN)/pip install --quiet -c constraints.txt -e '.[dev]'
	touch $@

# The benchmarks' extras: py-spy (profiles) and matplotlib (plots); the tests need neither.
$(BENCH_STAMP): $(STAMP)
	$(BIN)/pip install --quiet -c constraints.txt -e '.[dev,bench]'
	touch $@

## binaries: everything the bed's set of versions.env needs (BED_VERSIONS, $KFED_BED_VERSIONS):
## kube-apiserver, controller-manager, scheduler, kubectl, kubelet, etcd, kwok, the workers'
## operators and upstream Kueue of that set (build-set.sh), with promtool (the alert rule
## tests) and Helm (the chart's tests), once; the scripts run in parallel
BED_VERSIONS ?= $(or $(KFED_BED_VERSIONS),$(shell sed -n 's/^BED_VERSIONS=//p' e2e/binaries/versions.env))
binaries:
	@bash e2e/binaries/build-set.sh $(BED_VERSIONS) & bed=$$!; \
	bash e2e/binaries/build-promtool.sh >/dev/null & prom=$$!; \
	bash e2e/binaries/build-helm.sh >/dev/null & helm=$$!; \
	failed=0; wait $$bed || failed=1; wait $$prom || failed=1; wait $$helm || failed=1; \
	[ $$failed = 0 ] || { echo "make binaries: a build failed (see above)" >&2; exit 1; }

## binaries-pinned, binaries-newest: one set of versions.env, whichever the bed runs: the other
## set is for mixed-version fleets (`python -m e2e up --cluster-versions worker-1=pinned`) and
## interop with the other Kueue release; those tests run only where both sets are built. Not
## part of `make binaries`: a cold CI run stays inside its budget.
binaries-pinned binaries-newest:
	@bash e2e/binaries/build-set.sh $(@:binaries-%=%)

## browser: Debian's chromium, for the dashboard test (headless)
browser:
	command -v chromium >/dev/null || (apt-get update -qq && apt-get install -y --no-install-recommends chromium >/dev/null)

## realnode: what the real-node test needs (tests/integration/realnode): Debian's docker.io,
## containerd, runc and debootstrap (installed only when missing), containerd and dockerd
## started by hand (no systemd needed), kfed's image built (make image). Never fails the
## build: where a step cannot run, the test skips and says why.
realnode:
	@{ bash deploy/image/daemons.sh install && bash deploy/image/daemons.sh start && $(MAKE) --no-print-directory image; } \
	  || echo "make realnode: not ready (see above); tests/integration/realnode will skip and say why" >&2

## lint: ruff, mypy (strict), import-linter layer contracts
lint: $(STAMP)
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/mypy
	$(BIN)/lint-imports

## test: lint, then every test (unit + integration on real control planes) in
## TEST_PROCESSES processes, each bed started once in one of them (tests/conftest.py:
## bed_group); the log ends with the slowest 20 tests and the reason of every skip (the
## real-node test's included). TEST_PROCESSES=0 runs them all in this process.
TEST_PROCESSES ?= 3
test: $(STAMP) binaries browser realnode lint
	@# Every bed's kube-apiservers, operators and kubelets take inotify instances; the default
	@# 128 per user runs out with two test processes ("too many open files"). Root only.
	@[ "$$(cat /proc/sys/fs/inotify/max_user_instances 2>/dev/null || echo 1024)" -ge 1024 ] \
	  || sysctl -qw fs.inotify.max_user_instances=1024 2>/dev/null \
	  || echo "make test: could not raise fs.inotify.max_user_instances (not root?)" >&2
	$(BIN)/pytest --durations=20 -rs -n $(TEST_PROCESSES) --dist loadgroup --no-loadscope-reorder

unit: $(STAMP)
	$(BIN)/pytest tests/unit

integration: $(STAMP) binaries browser realnode
	$(BIN)/pytest tests/integration

## demo: a full local federation (manager + 2 GPU workers), shown, then stopped
demo: $(STAMP) binaries
	$(BIN)/python -m e2e.demo $(DEMO_ARGS)

## bench-scheduler: upstream Kueue's scheduler baseline on kfed (BENCH_ARGS="--variant large" for 50k)
bench-scheduler: $(STAMP) binaries
	$(BIN)/python -m e2e.bench.scheduler $(BENCH_ARGS)

## bench-scheduler-upstream: upstream Kueue's own harness (its runner and minimalkueue, built from
## sigs.k8s.io/kueue) on the same kube-apiserver and etcd, ~8 min; BENCH_ARGS="--compare": kfed's
## controllers under that same runner first, then minimalkueue, and the ratios (~18 min)
bench-scheduler-upstream: $(STAMP) binaries
	@bash e2e/binaries/build-kueue.sh harness >/dev/null
	$(BIN)/python -m e2e.bench.scheduler.upstream $(BENCH_ARGS)

## bench-apiserver: the raw create / status-patch rate of one local kube-apiserver
bench-apiserver: $(STAMP) binaries
	$(BIN)/python -m e2e.bench.apiserver $(BENCH_ARGS)

## bench-federation: dispatch (capacity-aware vs AllAtOnce) and partition drills, ~20 min
bench-federation: $(STAMP) binaries
	$(BIN)/python -m e2e.bench.federation $(BENCH_ARGS)

## bench-multikueue: upstream's MultiKueue gate shape (1,000 Jobs, 3 workers; capacity-aware and AllAtOnce), ~5 min
##   BENCH_ARGS="--against-upstream": then upstream Kueue (built by `binaries`) in the same shape, side by side, ~30 min
bench-multikueue: $(BENCH_STAMP) binaries
	$(BIN)/python -m e2e.bench.multikueue $(BENCH_ARGS)

## bench-jobsets: 5-pod JobSets through kfed on the real JobSet operator (latency, API requests), ~3 min
bench-jobsets: $(STAMP) binaries
	$(BIN)/python -m e2e.bench.jobsets $(BENCH_ARGS)

## crds: regenerate crds/ from the pydantic models (and the copies in deploy/ and the CRD chart)
crds: $(STAMP)
	$(BIN)/kfed crds --out-dir crds/
	$(BIN)/kfed crds --out-dir deploy/crds/
	$(BIN)/kfed crds --out-dir charts/kfed-crds/files/

## chart: regenerate charts/kfed's static templates from deploy/ (e2e/chartgen.py)
chart: $(STAMP)
	$(BIN)/python -m e2e.chartgen

IMAGE ?= kfed:0.1.0
## image: the container image (manager, worker shim, kfed CLI), with or without a registry:
## starts containerd and dockerd if no engine answers (deploy/image/daemons.sh), builds on the
## official Python base or, offline, on one built from Debian packages (deploy/image/build.sh);
## IMAGE_ARGS="--save kfed.tar" also writes a tarball for `ctr images import` / `docker load`
image:
	@IMAGE=$(IMAGE) bash deploy/image/build.sh $(IMAGE_ARGS)

## kind: the article and a drill on kind clusters (needs Docker and kind)
kind: $(STAMP)
	$(BIN)/python -m e2e.kind all

clean:
	rm -rf $(VENV) build *.egg-info .mypy_cache .ruff_cache .pytest_cache .hypothesis
