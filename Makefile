GO      ?= go
VERSION ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo dev)
COMMIT  ?= $(shell git rev-parse HEAD 2>/dev/null)
LDFLAGS := -s -w -X main.version=$(VERSION) -X main.commit=$(COMMIT)
PKGS    := ./...
STATICCHECK ?= $(GO) run honnef.co/go/tools/cmd/staticcheck@v0.8.2

.PHONY: build test fuzz lint fmt vet tidy demo bench clean

build:
	$(GO) build -trimpath -ldflags "$(LDFLAGS)" -o bin/tend ./cmd/tend

# Every test, end-to-end suites included, under the race detector
# (go test -short ./... skips the end-to-end suites for a fast loop).
test:
	$(GO) test -race -count=1 -timeout 15m $(PKGS)
	$(MAKE) fuzz

# Each fuzz target for FUZZTIME, from its seed corpus (f.Add and
# testdata/fuzz). A failure leaves the input in testdata/fuzz/NAME: fix it
# and commit the input, it stays a test.
FUZZTIME ?= 4s
FUZZ := ./manifest:FuzzLoad ./oci:FuzzExtract ./oci:FuzzLoadArtifact ./internal/confine:FuzzLocate \
	./gitsource:FuzzRedact ./gitsource:FuzzAdvertisement
fuzz:
	@set -e; for t in $(FUZZ); do \
		echo "fuzz $${t#*:} ($${t%%:*}, $(FUZZTIME))"; \
		$(GO) test -run '^$$' -fuzz "^$${t#*:}$$" -fuzztime $(FUZZTIME) -fuzzminimizetime 1s "$${t%%:*}"; \
	done

lint: vet
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

# Benchmarks, with ratios against the reference tools where they apply
# (git ls-remote; the oras CLI, installed here, for model pulls).
bench: build
	$(GO) install oras.land/oras/cmd/oras@v1.3.6
	$(GO) test -run '^$$' -bench . -benchmem $(PKGS)

clean:
	rm -rf bin .demo
