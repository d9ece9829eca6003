# nodemanager developer entry points. Everything installs into .venv and ~/.cache/nodemanager.
PYTHON ?= python3.11
VENV   := .venv
PY     := $(VENV)/bin/python
NM     := $(VENV)/bin/nodemanager
STAMP  := $(VENV)/.installed

.PHONY: all deps venv collections builds thirdparty demo docs docs-gen test test-unit test-integration test-cluster lint \
        controlplane dev-cluster dev-cluster-stop install run build release image bench clean e2e

all: venv collections

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -e '.[test]'
	touch $(STAMP)

venv: $(STAMP)

collections: venv
	$(PY) collections/install.py

# The README's first command: apply examples/demo.yaml on this host in local mode (writes only under /tmp/nodemanager-demo).
demo: venv collections
	$(NM) apply -f examples/demo.yaml

# System packages the tests use: etcd for the control plane, Debian's pacman for the real
# package-manager tests (and makepkg: repo-add, which builds the test repositories, sources its
# libraries; makepkg also builds the release's Arch package), bmake (FreeBSD's make) to read the
# release's port, openssl for certificates, debootstrap and systemd-nspawn for the real
# systemd and OpenRC service tests, acl for the differential suite's ACL cases, umoci for the
# controller image (deploy/image.py), lintian for the .deb; a C toolchain and libraries for apk and pkg
# (tests/thirdparty.py). Installed only when missing (needs root).
DEBS := etcd-server pacman-package-manager makepkg libarchive-tools zstd openssh-client iproute2 \
        openssl debootstrap systemd-container wireguard-tools acl bmake umoci lintian \
        build-essential libssl-dev zlib1g-dev libbsd-dev libarchive-dev m4
deps:
	@missing=$$(for p in $(DEBS); do dpkg -s $$p >/dev/null 2>&1 || echo $$p; done); \
	if [ -n "$$missing" ]; then \
	  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends $$missing >/dev/null; \
	fi

# The README's second command: the whole suite, including the real control plane tests; the
# fleet in a box (tests/e2e, mostly waiting) runs beside the rest (tests/parallel.py).
test: deps venv collections builds lint docs
	$(PY) -m tests.parallel

# The documentation site (docs/, mkdocs.yml) into build/site; --strict: a broken link or anchor,
# or a page left out of the nav, fails. docs-gen rewrites docs/reference/ from the CRDs, the
# click commands and the registered metrics (tests/unit/test_docs.py fails when it is stale).
docs: venv
	NO_MKDOCS_2_WARNING=1 $(VENV)/bin/mkdocs build --strict

docs-gen: venv
	$(PY) docs/gen.py

# The argspec tests read the modules' argument specs from the installed collections.
test-unit: venv collections
	$(PY) -m pytest tests/unit

test-integration: venv collections
	$(PY) -m pytest tests/integration

test-cluster: venv collections controlplane
	$(PY) -m pytest tests/cluster

# The fleet in a box (tests/e2e/README.md): three booted machines run the zipapp against a real
# control plane. `make test` runs it too.
e2e: deps venv collections controlplane
	$(PY) -m pytest tests/e2e

# ruff (lint + format, lines <= 100), mypy --strict on nodemanager/, import-linter layers.
lint: venv
	$(VENV)/bin/ruff check .
	$(VENV)/bin/ruff format --check .
	$(VENV)/bin/mypy
	$(VENV)/bin/lint-imports

# Build (or reuse from ~/.cache/nodemanager) kube-apiserver and kube-controller-manager (one
# `go build`; the CSR tests sign with it); etcd comes from Debian's etcd-server.
controlplane: deps venv
	$(PY) -m tests.controlplane build

# The real third parties the tests compare against (apk, pkg, upstream's agent), built from
# ../shared/vendor into ~/.cache/nodemanager, keyed by the archives' digests; absent sources
# are skipped with one line each.
thirdparty: deps venv
	$(PY) -m tests.thirdparty build

# Every cached build at once: kube-apiserver's and the third parties' share nothing.
builds: deps venv
	$(PY) -m tests.controlplane build & cp=$$!; \
	$(PY) -m tests.thirdparty build; tp=$$?; \
	wait $$cp && exit $$tp

dev-cluster: controlplane
	$(PY) -m tests.controlplane start

dev-cluster-stop: venv
	$(PY) -m tests.controlplane stop

install:
	kubectl apply -f crds/

run: venv collections
	$(NM) run --kubeconfig $${KUBECONFIG:-$$HOME/.kube/config}

# The speed benchmarks (bench/README.md); BENCH=enforce|idle|daemon|fanout|controller|start|first|upstream runs one.
bench: deps venv collections controlplane
	$(PY) bench/run.py $(BENCH)

# bin/nodemanager: one runnable file (zipapp) with every Python dependency, skeletons and collections.
build: venv collections
	$(PY) deploy/build.py bin/nodemanager

# dist/: sdist, wheel, the agent file for each platform, the .debs, the controller image,
# sbom.cdx.json and SHA256SUMS (deploy/release.py), the version stamped from git; the
# maintainer and home page from deploy/publisher.toml (required: it stops in one line without).
release: deps venv collections
	$(PY) deploy/release.py dist

# dist/ for this machine only: its agent file, .deb and the controller image
# (nodemanager-controller-<version>-<arch>.oci.tar, deploy/image.py), SBOM and SHA256SUMS.
image: deps venv collections
	$(PY) deploy/release.py dist $$(uname -m)-gnu

# Only what the build made: the project's own collection (nodemanager.core) is tracked source.
clean:
	rm -rf $(VENV) bin build demo dist nodemanager.egg-info
	find collections/ansible_collections -mindepth 1 -maxdepth 1 ! -name nodemanager -exec rm -rf {} +
