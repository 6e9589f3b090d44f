#!/usr/bin/env bash
# make interop: clients that are not Go modules — kcat (librdkafka 2.0.2,
# Debian) and KafkaJS 2.2.4 (npm) — commit and abort against `txncoord up`
# (leaders 4.2 and 4.1), checked by a franz-go read_committed read
# (verify/). Installs what it needs: apt-get install kcat (as root), npm
# install kafkajs into this directory. Exits non-zero on any failure.
#
# kcat has no way to abort a transaction: it commits at EOF. Its abort case
# is a kcat SIGKILLed inside its transaction; the next kcat with the same
# transactional.id fences it (InitProducerId), which makes the coordinator
# abort the open transaction.
set -euo pipefail

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
ROOT=$(cd "$HERE/../.." && pwd)
WORK=$(mktemp -d -t txncoord-interop.XXXXXX)
TOPIC=interop
PARTITIONS=4
UP_PID=""
KCAT_PID=""

log() { echo "interop: $*" >&2; }
fail() { log "FAIL: $*"; exit 1; }

cleanup() {
	local rc=$?
	[ -n "$KCAT_PID" ] && kill -9 "$KCAT_PID" 2>/dev/null || true
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

# --- install -----------------------------------------------------------
if ! command -v kcat >/dev/null 2>&1; then
	[ "$(id -u)" -eq 0 ] || fail "kcat is missing; install it (apt-get install -y kcat) or run as root"
	log "installing kcat (apt-get)"
	DEBIAN_FRONTEND=noninteractive apt-get update -qq
	DEBIAN_FRONTEND=noninteractive apt-get install -y -qq kcat >/dev/null
fi
command -v node >/dev/null 2>&1 || fail "node is missing"
if [ ! -f "$HERE/node_modules/kafkajs/package.json" ]; then
	log "installing kafkajs@2.2.4 (npm) into $HERE/node_modules"
	(cd "$HERE" && npm install --no-audit --no-fund --no-package-lock --loglevel=error >/dev/null)
fi
log "kcat: $(kcat -V 2>&1 | head -n 1); kafkajs: $(node -p "require('$HERE/node_modules/kafkajs/package.json').version")"

# --- build and start txncoord up ---------------------------------------
log "building txncoord and verify"
(cd "$ROOT" && go build -o "$WORK/txncoord" ./cmd/txncoord && go build -o "$WORK/verify" ./integration/interop/verify)
VERIFY="$WORK/verify"
BASE=$("$VERIFY" freeport -n 3)
"$WORK/txncoord" up --data-dir "$WORK/data" --listen "127.0.0.1:$BASE" --leaders 4.2,4.1 \
	--topics "$TOPIC:$PARTITIONS" --admin-listen 127.0.0.1:0 >"$WORK/up.out" 2>"$WORK/up.log" &
UP_PID=$!
for _ in $(seq 600); do
	grep -q '^txncoord ready ' "$WORK/up.out" 2>/dev/null && break
	kill -0 "$UP_PID" 2>/dev/null || fail "txncoord up exited before ready"
	sleep 0.1
done
READY=$(grep '^txncoord ready ' "$WORK/up.out") || fail "txncoord up: no ready line in 60 s"
BOOT=$(sed -n 's/.*bootstrap=\([^ ]*\).*/\1/p' <<<"$READY")
log "$READY"

# --- kcat: commit at EOF -----------------------------------------------
printf 'kcat-commit-1\nkcat-commit-2\n' | timeout 60 kcat -P -b "$BOOT" -t "$TOPIC" -p 0 -X transactional.id=kcat-interop \
	|| fail "kcat commit"
log "kcat: committed 2 values"

# --- kcat: abort by fencing a killed producer --------------------------
mkfifo "$WORK/kcat.in"
kcat -P -b "$BOOT" -t "$TOPIC" -p 1 -X transactional.id=kcat-interop -X linger.ms=0 <"$WORK/kcat.in" 2>"$WORK/kcat.log" &
KCAT_PID=$!
exec 3>"$WORK/kcat.in"
# kcat reads stdin in large buffered chunks: write enough to make it
# produce, then wait until the first value is in the log.
seq -f 'kcat-abort-%g' 1 3000 >&3
"$VERIFY" wait-written -bootstrap "$BOOT" -topic "$TOPIC" -values kcat-abort-1 -timeout 60s \
	|| fail "kcat's open transaction never reached the log"
kill -9 "$KCAT_PID"
wait "$KCAT_PID" 2>/dev/null || true
KCAT_PID=""
exec 3>&-
printf 'kcat-after-fence-1\n' | timeout 60 kcat -P -b "$BOOT" -t "$TOPIC" -p 1 -X transactional.id=kcat-interop \
	|| fail "kcat after fence"
log "kcat: SIGKILLed inside a transaction (its values are in the log); the next kcat fenced it and committed 1"

# --- KafkaJS ------------------------------------------------------------
# Unpatched KafkaJS: it reuses the seed broker's ApiVersions for every
# broker, which works because every node advertises every API.
(cd "$HERE" && timeout 120 node kafkajs.js "$BOOT" "$TOPIC" kafkajs-interop kafkajs 2>"$WORK/kafkajs.log") \
	|| { cat "$WORK/kafkajs.log" >&2; fail "kafkajs"; }

# --- check with kgo read_committed --------------------------------------
"$VERIFY" check -bootstrap "$BOOT" -topic "$TOPIC" -partitions "$PARTITIONS" \
	-want "kcat-commit-1,kcat-commit-2,kcat-after-fence-1,kafkajs-commit-1,kafkajs-commit-2,kafkajs-idempotent-1" \
	-absent "kafkajs-abort-1,kafkajs-abort-2" -absent-prefix kcat-abort- \
	|| fail "read_committed check"
log "PASS"
