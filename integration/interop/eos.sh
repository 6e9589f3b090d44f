#!/usr/bin/env bash
# make interop (called from run.sh): KafkaJS 2.2.4 in an exactly-once
# consume-transform-produce chain against `txncoord up` (leaders 4.2, 4.1):
# an input topic of 1,000 numbered values, two stages of three KafkaJS
# members each (consumer group + transaction.sendOffsets, TV1) that leave,
# join and are SIGKILLed while the chain runs; eosrun (package
# integration/eos) drives them and checks every value once in the
# read_committed output, nothing from an aborted attempt, group offsets at
# the end. Needs node and kafkajs in node_modules here (run.sh installs it).
# Exits non-zero on any failure or anomaly.
set -euo pipefail

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
ROOT=$(cd "$HERE/../.." && pwd)
WORK=$(mktemp -d -t txncoord-eos-interop.XXXXXX)
PREFIX=eos-kafkajs
PARTITIONS=6
VALUES=${EOS_VALUES:-1000}
UP_PID=""

log() { echo "interop eos: $*" >&2; }
fail() { log "FAIL: $*"; exit 1; }

cleanup() {
	local rc=$?
	if [ -n "$UP_PID" ] && kill -0 "$UP_PID" 2>/dev/null; then
		kill -TERM "$UP_PID" 2>/dev/null || true
		for _ in $(seq 150); do kill -0 "$UP_PID" 2>/dev/null || break; sleep 0.1; done
		kill -9 "$UP_PID" 2>/dev/null || true
	fi
	if [ "$rc" -ne 0 ] && [ -f "$WORK/up.log" ]; then
		log "txncoord log (last 40 lines):"
		tail -n 40 "$WORK/up.log" >&2 || true
	fi
	rm -rf "$WORK"
	exit "$rc"
}
trap cleanup EXIT

command -v node >/dev/null 2>&1 || fail "node is missing"
if [ ! -f "$HERE/node_modules/kafkajs/package.json" ]; then
	log "installing kafkajs@2.2.4 (npm) into $HERE/node_modules"
	(cd "$HERE" && npm install --no-audit --no-fund --no-package-lock --loglevel=error >/dev/null)
fi

log "building txncoord and eosrun"
(cd "$ROOT" && go build -o "$WORK/txncoord" ./cmd/txncoord && go build -o "$WORK/eosrun" ./integration/eos/eosrun)
BASE=$("$WORK/eosrun" freeport 3)
TOPICS="$PREFIX-in:$PARTITIONS,$PREFIX-mid:$PARTITIONS,$PREFIX-out:$PARTITIONS"
"$WORK/txncoord" up --data-dir "$WORK/data" --listen "127.0.0.1:$BASE" --leaders 4.2,4.1 \
	--topics "$TOPICS" --admin-listen 127.0.0.1:0 >"$WORK/up.out" 2>"$WORK/up.log" &
UP_PID=$!
for _ in $(seq 600); do
	grep -q '^txncoord ready ' "$WORK/up.out" 2>/dev/null && break
	kill -0 "$UP_PID" 2>/dev/null || fail "txncoord up exited before ready"
	sleep 0.1
done
READY=$(grep '^txncoord ready ' "$WORK/up.out") || fail "txncoord up: no ready line in 60 s"
BOOT=$(sed -n 's/.*bootstrap=\([^ ]*\).*/\1/p' <<<"$READY")
log "$READY"

# NODE_PATH lets the member script find kafkajs wherever it is run from.
NODE_PATH="$HERE/node_modules" "$WORK/eosrun" -bootstrap "$BOOT" -client kafkajs -topics "$PREFIX" \
	-partitions "$PARTITIONS" -values "$VALUES" -member-bin node -member-arg "$HERE/eos_kafkajs.js" \
	-dir "$WORK/chain" -timeout 5m || {
	for f in "$WORK"/chain/s*.log; do log "--- $(basename "$f")"; tail -c 1500 "$f" >&2; done
	fail "kafkajs exactly-once chain"
}
log "PASS"
