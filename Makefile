# txncoord — the two commands that matter: `make run` and `make test`.
GO        ?= go
PKGS      ?= ./...
FUZZTIME  ?= 60s
DATA_DIR  ?= ./txncoord-data

.PHONY: all build run test vet deps fuzz bench soak interop clean

all: build

deps:
	$(GO) mod download

build: deps
	$(GO) build -o bin/txncoord ./cmd/txncoord

# Runs the service: coordinator + leaders in one process (txncoord up).
run: build
	./bin/txncoord up --data-dir $(DATA_DIR)

vet: deps
	$(GO) vet $(PKGS)

# Everything CI runs: modules, vet, and all tests with the race detector.
test: vet
	$(GO) test -race -count=1 -timeout 20m $(PKGS)

# Each fuzz target for FUZZTIME (go test runs one -fuzz target at a time).
fuzz: deps
	$(GO) test ./wire -run '^$$' -fuzz '^FuzzParseRequest$$' -fuzztime $(FUZZTIME)
	$(GO) test ./txnlog -run '^$$' -fuzz '^FuzzDecodeTxn$$' -fuzztime $(FUZZTIME)

# The standard benchmark: txncoord against franz-go kfake (in memory and
# with SyncWrites), side by side in one run; report in results/<time>/.
BENCH_FLAGS ?= --producers 1,16,64 --duration 10s --rounds 2 --targets txncoord,kfake,kfake-sync,txncoord-nosync
bench: build
	$(GO) build -o bin/txncoord-bench ./cmd/txncoord-bench
	./bin/txncoord-bench --txncoord-bin bin/txncoord $(BENCH_FLAGS) --out results

soak:
	@echo "make soak: not implemented yet" >&2; exit 1

interop:
	@echo "make interop: not implemented yet" >&2; exit 1

clean:
	rm -rf bin $(DATA_DIR)
