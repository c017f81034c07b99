GO      ?= go
VERSION ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo dev)
COMMIT  ?= $(shell git rev-parse HEAD 2>/dev/null)
LDFLAGS := -s -w -X main.version=$(VERSION) -X main.commit=$(COMMIT)
PKGS    := ./...
STATICCHECK ?= $(GO) run honnef.co/go/tools/cmd/staticcheck@v0.8.2

.PHONY: build test lint fmt vet tidy demo bench clean

build:
	$(GO) build -trimpath -ldflags "$(LDFLAGS)" -o bin/tend ./cmd/tend

# Every test, end-to-end suites included, under the race detector
# (go test -short ./... skips the end-to-end suites for a fast loop).
test:
	$(GO) test -race -count=1 -timeout 15m $(PKGS)

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
