#!/usr/bin/env bash
# make interop (called from run.sh), or alone: faults_etcd.py, a
# confluent-kafka (librdkafka) suite driving the etcd mode's faults with
# HTTP alone, against `txncoord up --coordinators 3` (an embedded etcd, a
# 3 s lease, leaders 4.2,4.1) that this script starts and stops. Needs
# Debian's python3-confluent-kafka (run.sh installs it).
#
#	faults_etcd.sh [TXNCOORD_BINARY VERIFY_BINARY]   (built here when not given)
set -euo pipefail

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
ROOT=$(cd "$HERE/../.." && pwd)
WORK=$(mktemp -d -t txncoord-faults-etcd.XXXXXX)
TOPIC=interop-etcd-faults
PARTITIONS=4
UP_PID=""

log() { echo "interop faults_etcd: $*" >&2; }
fail() { log "FAIL: $*"; exit 1; }
# shellcheck source=lib.sh
. "$HERE/lib.sh"

cleanup() {
	local rc=$?
	stop_pid "$UP_PID"
	show_up_log "$rc"
	rm -rf "$WORK"
	exit "$rc"
}
trap cleanup EXIT

TXNCOORD=${1:-}
VERIFY=${2:-}
if [ -z "$TXNCOORD" ] || [ -z "$VERIFY" ]; then
	log "building txncoord and verify"
	(cd "$ROOT" && go build -o "$WORK/txncoord" ./cmd/txncoord && go build -o "$WORK/verify" ./integration/interop/verify)
	TXNCOORD=$WORK/txncoord VERIFY=$WORK/verify
fi
# 3 coordinators, 2 leaders, the embedded etcd's client and peer ports.
BASE=$("$VERIFY" freeport -n 7)
"$TXNCOORD" up --data-dir "$WORK/data" --listen "127.0.0.1:$BASE" --coordinators 3 --leaders 4.2,4.1 \
	--etcd-lease-ttl 3s --topics "$TOPIC:$PARTITIONS" --admin-listen 127.0.0.1:0 >"$WORK/up.out" 2>"$WORK/up.log" &
UP_PID=$!
for _ in $(seq 900); do
	grep -q '^txncoord ready ' "$WORK/up.out" 2>/dev/null && break
	kill -0 "$UP_PID" 2>/dev/null || fail "txncoord up --coordinators 3 exited before ready"
	sleep 0.1
done
READY=$(grep '^txncoord ready ' "$WORK/up.out") || fail "txncoord up --coordinators 3: no ready line in 90 s"
ADMIN=$(sed -n 's/.*admin=\([^ ]*\).*/\1/p' <<<"$READY")
log "$READY"
# Every coordinator is a bootstrap server: the paused one may be node 0.
BOOT="127.0.0.1:$BASE,127.0.0.1:$((BASE + 1)),127.0.0.1:$((BASE + 2))"
timeout 600 /usr/bin/python3 "$HERE/faults_etcd.py" "$BOOT" "$ADMIN" "$TOPIC" "$PARTITIONS" || fail "faults_etcd.py"
