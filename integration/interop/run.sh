#!/usr/bin/env bash
# make interop: clients that are not Go modules — kcat (librdkafka 2.0.2,
# Debian) and KafkaJS 2.2.4 (npm) — commit and abort against `txncoord up`
# (leaders 4.2 and 4.1), checked by a franz-go read_committed read
# (verify/); then librdkafka consumers read it back read_committed to
# partition EOF: kcat -C -e (must exit by itself) and a confluent-kafka
# Python consumer (Debian's python3-confluent-kafka, assign()). Installs
# what it needs: apt-get install kcat python3-confluent-kafka chromium (as
# root), npm install kafkajs into this directory. Then faults.py (Python,
# standard library only) injects a fault over HTTP that kcat must see,
# faults_etcd.sh pauses a coordinator of `up --coordinators 3` under a
# confluent-kafka transactional producer (faults_etcd.py), and
# last the web console's browser tests (console/browser_test.go) run in
# headless Chromium. Exits non-zero on any failure.
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
# shellcheck source=lib.sh
. "$HERE/lib.sh"

cleanup() {
	local rc=$?
	[ -n "$KCAT_PID" ] && kill -9 "$KCAT_PID" 2>/dev/null || true
	stop_pid "$UP_PID"
	show_up_log "$rc"
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
if ! /usr/bin/python3 -c 'import confluent_kafka' 2>/dev/null; then
	[ "$(id -u)" -eq 0 ] || fail "python3-confluent-kafka is missing; install it (apt-get install -y python3-confluent-kafka) or run as root"
	log "installing python3-confluent-kafka (apt-get)"
	DEBIAN_FRONTEND=noninteractive apt-get update -qq
	DEBIAN_FRONTEND=noninteractive apt-get install -y -qq python3-confluent-kafka >/dev/null
fi
if ! command -v chromium >/dev/null 2>&1; then
	[ "$(id -u)" -eq 0 ] || fail "chromium is missing; install it (apt-get install -y chromium) or run as root"
	log "installing chromium (apt-get)"
	DEBIAN_FRONTEND=noninteractive apt-get update -qq
	DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium >/dev/null
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

# --- kcat: compressed produce (gzip, snappy, lz4, zstd) ------------------
# librdkafka turns a codec on only when the broker's Produce range holds the
# exact versions it checks, v0 among them (librdkafka #4956, KAFKA-18659):
# while txncoord advertised Produce from v3, kcat -z gzip logged "Broker does
# not support compression type gzip: not compressing batch" and sent every
# batch uncompressed. Leaders advertise Produce from v0 as Kafka 4.x does
# (and refuse v0-v2). Each codec goes to its own partition of a new topic;
# librdkafka's debug log names the codec of the batch the producer sent and
# of the batch the consumer fetched; the values read back are those written.
# The values compress well: librdkafka sends a batch that does not shrink
# uncompressed.
ADMIN=$(sed -n 's/.*admin=\([^ ]*\).*/\1/p' <<<"$READY")
CTOPIC=interop-compressed
"$WORK/txncoord" topics create --admin "$ADMIN" --topic "$CTOPIC" --partitions 4 >/dev/null || fail "create topic $CTOPIC"
CPART=0
for CODEC in gzip snappy lz4 zstd; do
	for i in 1 2 3; do printf 'kcat-%s-%d-%s\n' "$CODEC" "$i" "$(printf '%0300d' 0)"; done >"$WORK/kcat-$CODEC.in"
	timeout 60 kcat -P -b "$BOOT" -t "$CTOPIC" -p "$CPART" -z "$CODEC" -d msg <"$WORK/kcat-$CODEC.in" 2>"$WORK/kcat-$CODEC.perr" \
		|| { cat "$WORK/kcat-$CODEC.perr" >&2; fail "kcat -P -z $CODEC"; }
	if grep -q 'does not support compression' "$WORK/kcat-$CODEC.perr"; then
		grep 'does not support compression' "$WORK/kcat-$CODEC.perr" >&2
		fail "kcat -z $CODEC: librdkafka disabled $CODEC for this broker"
	fi
	grep -q "Produce MessageSet with .*, $CODEC)\$" "$WORK/kcat-$CODEC.perr" || fail "kcat -z $CODEC: no $CODEC batch sent"
	timeout 60 kcat -C -b "$BOOT" -t "$CTOPIC" -p "$CPART" -o beginning -e -q -f '%s\n' -d msg \
		>"$WORK/kcat-$CODEC.out" 2>"$WORK/kcat-$CODEC.cerr" || { cat "$WORK/kcat-$CODEC.cerr" >&2; fail "kcat -C ($CODEC)"; }
	cmp -s "$WORK/kcat-$CODEC.in" "$WORK/kcat-$CODEC.out" || fail "kcat -z $CODEC: values read back differ from those written"
	grep -q "fetch queue .*, $CODEC)\$" "$WORK/kcat-$CODEC.cerr" || fail "kcat -z $CODEC: the consumer fetched no $CODEC batch"
	CPART=$((CPART + 1))
done
log "kcat -z gzip/snappy/lz4/zstd: each batch sent and fetched compressed (librdkafka debug log), values read back intact"

# --- KafkaJS ------------------------------------------------------------
# Unpatched KafkaJS: it reuses the seed broker's ApiVersions for every
# broker, which works because every node advertises every API.
(cd "$HERE" && timeout 120 node kafkajs.js "$BOOT" "$TOPIC" kafkajs-interop kafkajs 2>"$WORK/kafkajs.log") \
	|| { cat "$WORK/kafkajs.log" >&2; fail "kafkajs"; }
# KafkaJS admin: createTopics (with a config), fetchTopicMetadata, describeConfigs, deleteTopics.
(cd "$HERE" && timeout 120 node kafkajs_admin.js "$BOOT" interop-kafkajs-admin 2>"$WORK/kafkajs-admin.log") \
	|| { cat "$WORK/kafkajs-admin.log" >&2; fail "kafkajs admin"; }

# --- check with kgo read_committed --------------------------------------
"$VERIFY" check -bootstrap "$BOOT" -topic "$TOPIC" -partitions "$PARTITIONS" \
	-want "kcat-commit-1,kcat-commit-2,kcat-after-fence-1,kafkajs-commit-1,kafkajs-commit-2,kafkajs-idempotent-1" \
	-absent "kafkajs-abort-1,kafkajs-abort-2" -absent-prefix kcat-abort- \
	|| fail "read_committed check"

# --- librdkafka consumers: read_committed to partition EOF ---------------
# Both must reach EOF on every partition by themselves, with no protocol
# error: a Fetch answer with a null record set for an empty partition made
# librdkafka log "Protocol parse failure for Fetch v11 ... invalid
# MessageSetSize -1" every 0.5 s, never report EOF, and kcat -e never exit.
COMMITTED="kcat-commit-1 kcat-commit-2 kcat-after-fence-1 kafkajs-commit-1 kafkajs-commit-2 kafkajs-idempotent-1"
check_consumed() { # name file
	local v
	for v in $COMMITTED; do grep -qx "$v" "$2" || fail "$1: committed value $v not read"; done
	if grep -q -e '^kafkajs-abort-' -e '^kcat-abort-' "$2"; then fail "$1: read an aborted value"; fi
	if grep -q -e 'Protocol parse failure' -e 'PROTOERR' "$WORK/$1.err"; then
		cat "$WORK/$1.err" >&2
		fail "$1: librdkafka protocol error"
	fi
}
timeout 60 kcat -C -b "$BOOT" -t "$TOPIC" -e -q -f '%s\n' -X isolation.level=read_committed \
	>"$WORK/kcat-consumer.out" 2>"$WORK/kcat-consumer.err" \
	|| { cat "$WORK/kcat-consumer.err" >&2; fail "kcat -C -e did not exit by itself at EOF (or failed)"; }
check_consumed kcat-consumer "$WORK/kcat-consumer.out"
log "kcat -C -e read_committed: exited at EOF, $(wc -l <"$WORK/kcat-consumer.out") values, no protocol error"
timeout 90 /usr/bin/python3 "$HERE/confluent_consumer.py" "$BOOT" "$TOPIC" "$PARTITIONS" \
	>"$WORK/confluent-consumer.out" 2>"$WORK/confluent-consumer.err" \
	|| { cat "$WORK/confluent-consumer.err" >&2; fail "confluent-kafka consumer"; }
check_consumed confluent-consumer "$WORK/confluent-consumer.out"
log "confluent-kafka assign() read_committed: EOF on every partition, $(wc -l <"$WORK/confluent-consumer.out") values"
# Consumer groups: kcat -G members, a confluent-kafka Python transactional stage.
bash "$HERE/groups.sh" "$BOOT" "$ADMIN" "$WORK/txncoord" || fail "consumer groups (groups.sh)"
# KafkaJS in an exactly-once consume-transform-produce chain (its own txncoord up).
bash "$HERE/eos.sh" || fail "kafkajs exactly-once chain (eos.sh)"
# --- faults on demand over HTTP (Python, standard library only) ----------
# faults.py injects TOPIC_AUTHORIZATION_FAILED (29) for the next Produce at
# each leader; kcat (librdkafka) must fail its delivery with that error; the
# fault list then shows the fault that acted gone, and after a clear the
# same produce goes through.
FTOPIC=interop-faults
"$WORK/txncoord" topics create --admin "$ADMIN" --topic "$FTOPIC" --partitions 1 >/dev/null || fail "create topic $FTOPIC"
for LEADER in 1 2; do
	/usr/bin/python3 "$HERE/faults.py" "$ADMIN" add "{\"kind\": \"error\", \"node\": $LEADER, \"api_key\": 0, \"error_code\": 29, \"count\": 1}" >/dev/null \
		|| fail "faults.py add"
done
if printf 'refused\n' | timeout 60 kcat -P -b "$BOOT" -t "$FTOPIC" -p 0 2>"$WORK/kcat-fault.err"; then
	fail "kcat produced through an injected TOPIC_AUTHORIZATION_FAILED"
fi
grep -q 'Topic authorization failed' "$WORK/kcat-fault.err" || { cat "$WORK/kcat-fault.err" >&2; fail "kcat did not report the injected error"; }
[ "$(/usr/bin/python3 "$HERE/faults.py" "$ADMIN" list | python3 -c 'import json,sys; print(len(json.load(sys.stdin)["faults"]))')" = 1 ] \
	|| fail "the fault that acted is still listed"
/usr/bin/python3 "$HERE/faults.py" "$ADMIN" clear >/dev/null || fail "faults.py clear"
printf 'accepted\n' | timeout 60 kcat -P -b "$BOOT" -t "$FTOPIC" -p 0 || fail "kcat produce after the faults were cleared"
log "faults over HTTP (faults.py): kcat saw the injected TOPIC_AUTHORIZATION_FAILED, then produced once cleared"
# The etcd mode's faults from confluent-kafka (its own up --coordinators 3):
# a paused coordinator, the producer's commit through its successor.
bash "$HERE/faults_etcd.sh" "$WORK/txncoord" "$VERIFY" || fail "etcd-mode faults from confluent-kafka (faults_etcd.sh)"

# --- up --secure: the kcat recipe it prints, run as printed --------------
bash "$HERE/secure_kcat.sh" "$WORK/txncoord" "$VERIFY" "$WORK" || fail "the printed --secure kcat recipe"

# The web console in headless Chromium (chromedp): its views against an
# embedded cluster with kgo transactions, Abort, the login with a token.
(cd "$ROOT" && TXNCOORD_BROWSER_TESTS=1 go test -race -count=1 -run '^TestBrowser' ./console) \
	|| fail "console browser tests"
log "console: browser tests passed ($(chromium --version 2>/dev/null | head -n 1))"
log "PASS"
