GO      ?= go
VERSION ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo dev)
COMMIT  ?= $(shell git rev-parse HEAD 2>/dev/null)
LDFLAGS := -s -w -X main.version=$(VERSION) -X main.commit=$(COMMIT)
PKGS    := ./...
STATICCHECK ?= $(GO) run honnef.co/go/tools/cmd/staticcheck@v0.8.2

# The build tags that leave the optional features out (internal/feature;
# DESIGN.md "Build tags").
OMIT_TAGS := tend_omit_containers tend_omit_notation tend_omit_cosign tend_omit_mqtt

# The build tags every build of tend takes (DESIGN.md "Build tags"; .ci/size
# and .ci/release read this line): grpcnotrace leaves out grpc's request
# tracing (golang.org/x/net/trace), which tend never serves and whose pages'
# html/template would make the linker keep every exported method of every
# type: 7 MB of the device binary.
TAGS := grpcnotrace

.PHONY: build build-minimal build-all release size test test-short fuzz lint fmt vet tidy demo demo-containers bench clean

# -v names each package as it is compiled: a first build, with a cold
# build cache, compiles every dependency (minutes on 2 cores); later ones
# list only what changed.
build:
	@echo "build bin/tend and bin/tend-hub (go build -v: each package compiled is listed; a first build takes minutes)"
	$(GO) build -v -trimpath -ldflags "$(LDFLAGS)" -tags "$(TAGS)" -o bin/tend ./cmd/tend
	$(GO) build -v -trimpath -ldflags "$(LDFLAGS)" -tags "$(TAGS)" -o bin/tend-hub ./cmd/tend-hub

# tend without any optional feature (every tag of OMIT_TAGS), stripped as
# the release is: bin/tend-minimal.
build-minimal:
	$(GO) build -trimpath -ldflags "$(LDFLAGS)" -tags "$(TAGS) $(OMIT_TAGS)" -o bin/tend-minimal ./cmd/tend

# The stripped sizes of tend (default and minimal) beside oras and crane
# built the same way (built once into $$TEND_TOOLS/size), and what each
# feature costs (.ci/size). Six builds of tend: about a minute with a warm
# build cache, on 2 cores.
size:
	GO=$(GO) LDFLAGS="$(LDFLAGS)" TAGS="$(TAGS)" OMIT_TAGS="$(OMIT_TAGS)" bash .ci/size

# cmd/tend and cmd/tend-hub for every system they are used on, without
# cgo; the binaries are thrown away. The node commands need Linux; the CI
# commands (validate, render, diff, schema, publish, notify) and the hub
# run on macOS and Windows too.
PLATFORMS := linux/amd64 linux/arm64 linux/arm darwin/amd64 darwin/arm64 windows/amd64
build-all:
	@set -e; for p in $(PLATFORMS); do \
		echo "build $$p"; \
		CGO_ENABLED=0 GOOS=$${p%/*} GOARCH=$${p#*/} $(GO) build -trimpath -tags "$(TAGS)" -o /dev/null ./cmd/tend; \
		CGO_ENABLED=0 GOOS=$${p%/*} GOARCH=$${p#*/} $(GO) build -trimpath -tags "$(TAGS)" -o /dev/null ./cmd/tend-hub; \
	done

# A release in dist/, published nowhere (.ci/release): for each platform of
# build-all, tend and tend-hub stamped with VERSION and COMMIT in
# PROG_VERSION_OS_ARCH.tar.gz (.zip for Windows) and its CycloneDX SBOM; the
# container image of each one's linux builds (PROG_VERSION_image.tar, an OCI
# layout; its digest in .digest); the
# release notes from CHANGELOG.md (tend_VERSION_notes.md);
# tend_VERSION_checksums.txt (SHA-256) and its cosign signature (.ci/sign):
# keyless (.sigstore.json) with an OIDC token (GitHub Actions), else .sig made
# with COSIGN_KEY, else with a key pair generated into dist/ (cosign.key,
# cosign.pub; empty password). About 3 min on 2 cores with a warm build cache.
release:
	VERSION=$(VERSION) COMMIT=$(COMMIT) PLATFORMS="$(PLATFORMS)" TAGS="$(TAGS)" GO=$(GO) bash .ci/release dist

# Every test, end-to-end suites included, under the race detector, then
# the fuzz targets (README "Developing": the time each takes).
test:
	$(GO) test -race -count=1 -timeout 15m $(PKGS)
	$(MAKE) fuzz

# The unit tests, for the edit loop: every package with -short, under the
# race detector. -short skips the end-to-end suites (cmd/tend/e2e, which
# builds tend and runs it) and every test that starts a server (PostgreSQL,
# Docker, sshd, mosquitto, docker-registry), drives Chromium, runs a built
# tend-hub, signs with cosign or pushes tens of megabytes through gzip;
# make test runs them. Results of unchanged packages come from go
# test's cache.
test-short:
	$(GO) test -short -race $(PKGS)

# Each fuzz target for a number of runs (about 4 s here), from its seed
# corpus (f.Add and testdata/fuzz). Counts, not durations: with a duration
# Go 1.26's coordinator can fail a clean run with "context deadline
# exceeded" at the deadline (golang/go#75804). A failure leaves the input in
# testdata/fuzz/NAME: fix it and commit the input, it stays a test.
# FUZZSCALE multiplies every count (make fuzz FUZZSCALE=20 for a long run).
FUZZSCALE ?= 1
FUZZ := ./manifest:FuzzLoad:40000 ./manifest:FuzzExpand:20000 ./manifest:FuzzAliases:5000 ./oci/extract:FuzzExtract:5000 ./oci/store:FuzzTreeMatchesExtract:2000 ./oci/modelkit:FuzzLoadArtifact:40000 \
	./internal/confine:FuzzLocate:100000 ./gitsource:FuzzRedact:30000 ./gitsource:FuzzAdvertisement:2000 ./api:FuzzParseVerdictQuery:40000 ./hub:FuzzDecodeReport:5000
fuzz:
	@set -e; for t in $(FUZZ); do \
		pkg=$${t%%:*}; rest=$${t#*:}; name=$${rest%%:*}; n=$$(( $${rest#*:} * $(FUZZSCALE) )); \
		echo "fuzz $$name ($$pkg, $${n} runs)"; \
		$(GO) test -run '^$$' -fuzz "^$$name$$" -fuzztime $${n}x -fuzzminimizetime 2000x "$$pkg"; \
	done

lint: vet build-all
	@out=$$(gofmt -l $$(git ls-files '*.go')); if [ -n "$$out" ]; then echo "gofmt needed:"; echo "$$out"; exit 1; fi
	$(STATICCHECK) $(PKGS)

fmt:
	gofmt -w $$(git ls-files '*.go')

vet:
	$(GO) vet $(PKGS)

tidy:
	$(GO) mod tidy

demo: build
	bash examples/demo.sh

# The service as a container, on a private dockerd (Debian's docker.io);
# run as root.
demo-containers: build
	bash examples/demo-containers.sh

# Benchmarks, with ratios against the reference tools where they apply
# (git ls-remote; the oras CLI, installed here, for model pulls).
bench: build
	$(GO) install oras.land/oras/cmd/oras@v1.3.6
	$(GO) test -run '^$$' -bench . -benchmem $(PKGS)

# The fleet simulation: AGENTS agents in one process against the git
# http-backend (a folder or a branch per device) and an OCI artifact on
# docker-registry, each with and without MQTT notify on mosquitto; prints
# the table of README "Fleet scale". INTERVAL is each agent's polling.
AGENTS ?= 100
INTERVAL ?= 10s
MODES ?=
PROFILE ?= false
fleet-sim:
	$(GO) test -run '^$$' -bench FleetSim -benchtime 1x -timeout 60m ./internal/testkit/fleetsim \
		-args -fleetsim.agents $(AGENTS) -fleetsim.interval $(INTERVAL) -fleetsim.modes "$(MODES)" -fleetsim.profile=$(PROFILE)

clean:
	rm -rf bin dist .demo .demo-containers
