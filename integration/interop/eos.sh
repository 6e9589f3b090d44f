#!/usr/bin/env bash
# make interop (called from run.sh): KafkaJS 2.2.4 in an exactly-once
# consume-transform-produce chain against `txncoord up` (leaders 4.2, 4.1):
# an input topic of 1,000 numbered values, two stages of three KafkaJS
# members each (consumer group + transaction.sendOffsets, TV1) that leave,
# join and are SIGKILLed while the chain runs, and `txncoord up` itself
# SIGKILLed and started again on the same ports and data dir twice while
# the chain runs (at 30% and 60% of the values committed in the output)
# and once after the members stopped, before the final reads; eosrun
# (package integration/eos) drives them (it runs `eos.sh --bounce` for
# each bounce) and checks every value once in the read_committed output,
# nothing from an aborted attempt, group offsets at the end. Needs node
# and kafkajs in node_modules here (run.sh installs it). Exits non-zero on
# any failure or anomaly.
#
#	eos.sh              the chain
#	eos.sh --bounce     (eosrun runs it) SIGKILL `txncoord up`, start it
#	                    again, return once it is ready; EOS_WORK, EOS_BASE
#	                    and EOS_TOPICS name the run
set -euo pipefail

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
ROOT=$(cd "$HERE/../.." && pwd)
PREFIX=eos-kafkajs
PARTITIONS=6
VALUES=${EOS_VALUES:-1000}

log() { echo "interop eos: $*" >&2; }
fail() { log "FAIL: $*"; exit 1; }
# shellcheck source=lib.sh
. "$HERE/lib.sh"


# start_up starts `txncoord up` on $BASE.. with the data dir in $WORK,
# records its pid in $WORK/up.pid and waits for its ready line.
start_up() {
	"$WORK/txncoord" up --data-dir "$WORK/data" --listen "127.0.0.1:$BASE" --leaders 4.2,4.1 \
		--topics "$TOPICS" --admin-listen 127.0.0.1:0 >"$WORK/up.out" 2>>"$WORK/up.log" &
	local pid=$!
	echo "$pid" >"$WORK/up.pid"
	for _ in $(seq 600); do
		grep -q '^txncoord ready ' "$WORK/up.out" 2>/dev/null && return 0
		alive "$pid" || fail "txncoord up exited before ready"
		sleep 0.1
	done
	fail "txncoord up: no ready line in 60 s"
}

if [ "${1:-}" = "--bounce" ]; then
	WORK=${EOS_WORK:?} BASE=${EOS_BASE:?} TOPICS=${EOS_TOPICS:?}
	PID=$(cat "$WORK/up.pid")
	START=$(date +%s%N)
	kill -KILL "$PID" 2>/dev/null || true
	for _ in $(seq 300); do alive "$PID" || break; sleep 0.05; done
	alive "$PID" && fail "txncoord up (pid $PID) still alive 15 s after SIGKILL"
	start_up
	log "SIGKILLed txncoord up (pid $PID), started again (pid $(cat "$WORK/up.pid")), ready after $((($(date +%s%N) - START) / 1000000)) ms"
	exit 0
fi

WORK=$(mktemp -d -t txncoord-eos-interop.XXXXXX)

cleanup() {
	local rc=$?
	stop_pid "$(cat "$WORK/up.pid" 2>/dev/null || true)"
	show_up_log "$rc"
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
start_up
READY=$(grep '^txncoord ready ' "$WORK/up.out")
BOOT=$(sed -n 's/.*bootstrap=\([^ ]*\).*/\1/p' <<<"$READY")
log "$READY"

# NODE_PATH lets the member script find kafkajs wherever it is run from.
export EOS_WORK="$WORK" EOS_BASE="$BASE" EOS_TOPICS="$TOPICS"
NODE_PATH="$HERE/node_modules" "$WORK/eosrun" -bootstrap "$BOOT" -client kafkajs -topics "$PREFIX" \
	-partitions "$PARTITIONS" -values "$VALUES" -member-bin node -member-arg "$HERE/eos_kafkajs.js" \
	-bounce-at 0.3,0.6 -bounce-cmd "bash '$HERE/eos.sh' --bounce" -bounce-after-stop \
	-dir "$WORK/chain" -timeout 5m || {
	for f in "$WORK"/chain/s*.log; do log "--- $(basename "$f")"; tail -c 1500 "$f" >&2; done
	fail "kafkajs exactly-once chain"
}
log "PASS"
