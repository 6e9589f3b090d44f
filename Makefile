# txncoord — the two commands that matter: `make run` and `make test`.
GO        ?= go
PKGS      ?= ./...
FUZZTIME  ?= 1000000x
DATA_DIR  ?= ./txncoord-data
# `txncoord version` reports these (builds may carry no VCS stamp: -buildvcs=false).
VERSION   ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo dev)
COMMIT    ?= $(shell git rev-parse HEAD 2>/dev/null)
LDFLAGS   ?= -X main.version=$(VERSION) -X main.commit=$(COMMIT)

.PHONY: all build run test vet deps fuzz bench soak interop conformance clean

all: build

deps:
	$(GO) mod download

build: deps
	$(GO) build -ldflags "$(LDFLAGS)" -o bin/txncoord ./cmd/txncoord

# Runs the service: coordinator + leaders in one process (txncoord up).
run: build
	./bin/txncoord up --data-dir $(DATA_DIR)

vet: deps
	$(GO) vet $(PKGS)

# Everything CI runs: modules, vet, and all tests with the race detector.
test: vet
	$(GO) test -race -count=1 -timeout 20m $(PKGS)

# Each fuzz target for FUZZTIME (go test runs one -fuzz target at a time).
# A count of executions by default: with a duration, Go 1.26's fuzz
# coordinator can fail a target with a bare "context deadline exceeded" at
# the deadline and no crasher (golang/go#75804, fixed in Go 1.27).
fuzz: deps
	$(GO) test ./wire -run '^$$' -fuzz '^FuzzParseRequest$$' -fuzztime $(FUZZTIME)
	$(GO) test ./txnlog -run '^$$' -fuzz '^FuzzDecodeTxn$$' -fuzztime $(FUZZTIME)
	$(GO) test ./wal -run '^$$' -fuzz '^FuzzOpen$$' -fuzztime $(FUZZTIME)
	$(GO) test ./txnlog -run '^$$' -fuzz '^FuzzDecodeBatch$$' -fuzztime $(FUZZTIME)
	$(GO) test ./leaderstub -run '^$$' -fuzz '^FuzzDecodePersistOp$$' -fuzztime $(FUZZTIME)

# The standard benchmark: txncoord against franz-go kfake (in memory and
# with SyncWrites), side by side in one run; report in results/<time>/.
# The storage redesign's goals are medians of at least 3 rounds: 3 rounds x
# 3 producer counts x 4 targets = 36 cells of 10 s, ~7 minutes in all.
BENCH_FLAGS ?= --producers 1,16,64 --duration 10s --rounds 3 --targets txncoord,kfake,kfake-sync,txncoord-nosync
bench: build
	$(GO) build -o bin/txncoord-bench ./cmd/txncoord-bench
	./bin/txncoord-bench --txncoord-bin bin/txncoord $(BENCH_FLAGS) --out results

# The long history-checked run: 100,000 values in transactions of up to 750,
# about 1/3 aborted, SIGKILL bounces of the coordinator and the leaders as
# separate processes; prints the checker's table. Then the exactly-once
# chains (TestEOSTxncoord, TestEOSSoak: kgo, sarama, confluent-kafka-go,
# 20,000 values each with four coordinator SIGKILL bounces, separate
# processes and txncoord up; each prints the chain checker's table).
soak: deps
	TXNCOORD_SOAK=1 $(GO) test -race -count=1 -timeout 60m -run '^(TestSoak|TestEOSTxncoord|TestEOSSoak)$$' -v ./integration

# Clients that are not Go modules: kcat (librdkafka, Debian) and KafkaJS
# (npm) against txncoord up, and the console's tests in headless Chromium
# (Debian's chromium); installs them itself (apt-get as root, npm).
interop: deps
	bash integration/interop/run.sh

# franz-go's own integration tests (pkg/kgo, the 36 that read KGO_SEEDS),
# unmodified, from the module cache at go.mod's version: each against a
# fresh `txncoord up` and against kfake (the control); prints a table and
# N/36 passed; fails on a txncoord failure outside
# integration/conformance/expected.go. CONFORMANCE_FLAGS: e.g.
# --run TestTxnEtl --targets txncoord --parallel 2 (see --help).
CONFORMANCE_FLAGS ?=
conformance: build
	$(GO) build -o bin/conformance ./integration/conformance
	KGO_DIR="$$($(GO) list -m -f '{{.Dir}}' github.com/twmb/franz-go)/pkg/kgo" && \
	  (cd "$$KGO_DIR" && GOWORK=off GOFLAGS="-mod=mod $$GOFLAGS" $(GO) test -c -o "$(CURDIR)/bin/kgo.test" .) && \
	  ./bin/conformance --kgo-dir "$$KGO_DIR" --kgo-test bin/kgo.test --txncoord bin/txncoord $(CONFORMANCE_FLAGS)

clean:
	rm -rf bin $(DATA_DIR)
