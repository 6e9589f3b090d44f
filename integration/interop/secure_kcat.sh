#!/usr/bin/env bash
# The kcat recipe `txncoord up --secure` prints, run as printed with the
# distribution's kcat: it must produce and consume over TLS + SASL.
# Usage: secure_kcat.sh TXNCOORD VERIFY WORKDIR. Exits non-zero on failure.
set -euo pipefail
TXNCOORD=$1 VERIFY=$2 WORK=$3
log() { echo "interop: $*" >&2; }
fail() { log "FAIL: $*"; exit 1; }

BASE=$("$VERIFY" freeport -n 2)
"$TXNCOORD" up --secure --data-dir "$WORK/secure-data" --listen "127.0.0.1:$BASE" --leaders 4.2 \
	--topics secure-kcat:1 --admin-listen 127.0.0.1:0 >"$WORK/secure-up.out" 2>"$WORK/secure-up.log" &
PID=$!
trap 'kill "$PID" 2>/dev/null || true; wait "$PID" 2>/dev/null || true' EXIT
for _ in $(seq 600); do
	grep -q '^txncoord ready ' "$WORK/secure-up.out" 2>/dev/null && break
	kill -0 "$PID" 2>/dev/null || fail "txncoord up --secure exited before ready"
	sleep 0.1
done
BOOT=$(sed -n 's/^txncoord ready .*bootstrap=\([^ ]*\).*/\1/p' "$WORK/secure-up.out")
[ -n "$BOOT" ] || fail "txncoord up --secure: no ready line"
RECIPE=$(sed -n 's/^kcat \/ librdkafka: //p' "$WORK/secure-up.log")
[ -n "$RECIPE" ] || fail "up --secure printed no kcat recipe"
# The recipe holds $(cat FILE) for the password: the shell expands it, as
# for a user pasting it.
printf 'secure-1\nsecure-2\n' | eval "timeout 60 kcat -P -b $BOOT -t secure-kcat -p 0 $RECIPE" \
	|| fail "kcat produce with the printed recipe: $RECIPE"
GOT=$(eval "timeout 60 kcat -C -b $BOOT -t secure-kcat -p 0 -o beginning -c 2 -e $RECIPE") \
	|| fail "kcat consume with the printed recipe"
[ "$GOT" = $'secure-1\nsecure-2' ] || fail "kcat read back $GOT"
log "up --secure: its printed kcat recipe produced and consumed over TLS + SASL ($(kcat -V 2>&1 | head -n 1))"
