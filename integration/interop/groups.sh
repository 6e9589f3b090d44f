#!/usr/bin/env bash
# make interop (called from run.sh): librdkafka consumer groups against
# txncoord's group coordinator, on the `txncoord up` run.sh started.
#
#	groups.sh BOOTSTRAP ADMIN_URL TXNCOORD_BIN
#
# 1. kcat -G: two kcat members join one group (the script waits until the
#    group is Stable with both assigned), then 2,000 numbered values are
#    written; the two read them exactly once between them and are stopped
#    with SIGTERM (kcat closes the consumer: librdkafka commits). Then 500
#    more values: a kcat member resumes from the committed offsets and
#    leaves after 200 (-c), another resumes after it and reads to EOF (-e):
#    exactly the 500 new values between them, none of the first 2,000.
#    After each phase `txncoord groups describe -o json` must show the
#    group's committed offset of every partition at its log end (as kcat -Q
#    reads it), lag 0 and no pending offsets.
# 2. confluent-kafka Python (confluent_eos.py): a consume-transform-produce
#    stage, subscribe() with isolation.level=read_committed and a
#    transactional producer (send_offsets_to_transaction +
#    commit_transaction), with one transaction deliberately aborted. Then
#    kcat read_committed must read every input value exactly once in the
#    output and nothing of the aborted attempt (which kcat read_uncommitted
#    must see: it did reach the log), and the group's committed offsets
#    must be the input's log end.
#
# Exits non-zero, saying why, on any difference.
set -euo pipefail

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
BOOT=${1:?bootstrap} ADMIN=${2:?admin url} TXNCOORD=${3:?txncoord binary}
WORK=$(mktemp -d -t txncoord-groups.XXXXXX)
PIDS=()
# Names of this run: run again against the same cluster, nothing left by an
# earlier run (committed offsets, a member not yet timed out) is reused.
RUN=-$(date +%s)

log() { echo "interop groups: $*" >&2; }
fail() { log "FAIL: $*"; exit 1; }

cleanup() {
	local rc=$? pid
	for pid in "${PIDS[@]}"; do kill -9 "$pid" 2>/dev/null || true; done
	if [ "$rc" -ne 0 ]; then
		for f in "$WORK"/*.err; do
			[ -s "$f" ] || continue
			log "--- $(basename "$f") (last 20 lines)"
			tail -n 20 "$f" >&2
		done
	fi
	rm -rf "$WORK"
	exit "$rc"
}
trap cleanup EXIT

create_topic() { # topic partitions
	"$TXNCOORD" topics create --admin "$ADMIN" --topic "$1" --partitions "$2" >/dev/null || fail "create topic $1"
}

# describe GROUP: the group as JSON in $WORK/GROUP.json.
describe() {
	"$TXNCOORD" groups describe --admin "$ADMIN" --group "$1" -o json >"$WORK/$1.json" 2>"$WORK/describe.err" \
		|| { cat "$WORK/describe.err" >&2; fail "txncoord groups describe --group $1"; }
}

# check_at_end GROUP TOPIC PARTITIONS: txncoord groups describe shows the
# group's committed offset of every partition of TOPIC equal to the log end
# kcat -Q reads (and to its own log_end_offset), lag 0, nothing pending.
check_at_end() {
	local group=$1 topic=$2 partitions=$3 p ends=()
	for ((p = 0; p < partitions; p++)); do
		ends+=("$(timeout 30 kcat -Q -b "$BOOT" -t "$topic:$p:-1" | awk -v t="$topic" '$1 == t { print $NF }')")
		[[ ${ends[$p]} =~ ^[0-9]+$ ]] || fail "kcat -Q $topic:$p: no log end offset"
	done
	describe "$group"
	/usr/bin/python3 - "$WORK/$group.json" "$topic" "${ends[@]}" <<-'EOF' || fail "group $group: committed offsets are not at the log end of $topic"
		import json, sys
		g = json.load(open(sys.argv[1]))
		topic, ends = sys.argv[2], [int(e) for e in sys.argv[3:]]
		rows = {o["partition"]: o for o in g["offsets"] if o["topic"] == topic}
		bad = []
		for p, end in enumerate(ends):
		    o = rows.get(p)
		    if o is None:
		        if end != 0:
		            bad.append(f"{topic}[{p}]: nothing committed, log end {end}")
		    elif (o["current_offset"], o["log_end_offset"], o["lag"]) != (end, end, 0):
		        bad.append(f"{topic}[{p}]: committed {o['current_offset']}, describe's log end {o['log_end_offset']} lag {o['lag']}, kcat -Q log end {end}")
		if g["pending_offsets"]:
		    bad.append(f"pending offsets: {g['pending_offsets']}")
		for b in bad:
		    print("  " + b, file=sys.stderr)
		sys.exit(1 if bad else 0)
	EOF
	log "group $group: committed offsets at the log end of $topic: ${ends[*]} (groups describe, lag 0)"
}

# produce TOPIC PARTITIONS FILE: line i of FILE to partition i mod
# PARTITIONS, so every partition (and so every member) has values; with no
# key librdkafka's sticky partitioner may put them all in one partition.
produce() {
	local p
	for ((p = 0; p < $2; p++)); do
		awk -v n="$2" -v p="$p" '(NR - 1) % n == p' "$3" | timeout 60 kcat -P -b "$BOOT" -t "$1" -p "$p" \
			|| fail "kcat -P $1 partition $p"
	done
}

# quiet NAME...: $WORK/NAME.err is empty: the kcat and Python clients print
# nothing on stderr (kcat -q; librdkafka's log) unless something went wrong:
# an error, a retried request, an offset reset.
quiet() {
	local n
	for n in "$@"; do
		[ -s "$WORK/$n.err" ] || continue
		head -n 20 "$WORK/$n.err" >&2
		fail "$n: librdkafka/kcat printed errors or warnings (above)"
	done
}

# exactly DESCRIPTION WANT GOT: file GOT holds each line of WANT exactly
# once and nothing else.
exactly() {
	local dups
	dups=$(sort "$3" | uniq -d | head -n 5 | tr '\n' ' ')
	[ -z "$dups" ] || fail "$1: duplicates: $dups"
	if ! diff <(sort "$2") <(sort "$3") >"$WORK/diff.out"; then
		log "$1: $(grep -c '^<' "$WORK/diff.out") values missing, $(grep -c '^>' "$WORK/diff.out") unexpected; first:"
		head -n 10 "$WORK/diff.out" >&2
		fail "$1: not exactly the values written"
	fi
}

# ======================= 1. kcat consumer groups =======================
TOPIC=interop-kcat-group$RUN
GROUP=interop-kcat-group$RUN
PARTS=4
N=2000
M=500
create_topic "$TOPIC" "$PARTS"
KCAT_G=(kcat -b "$BOOT" -G "$GROUP" -X auto.offset.reset=earliest -q -u -f '%s\n')

# Both members first, so no rebalance moves a partition while values are
# read (a rebalance may legitimately hand a partition over with values
# read past its last commit: at-least-once, not a coordinator fault).
"${KCAT_G[@]}" "$TOPIC" >"$WORK/member-a.out" 2>"$WORK/member-a.err" &
PIDS+=($!)
"${KCAT_G[@]}" "$TOPIC" >"$WORK/member-b.out" 2>"$WORK/member-b.err" &
PIDS+=($!)
for i in $(seq 300); do
	# Not found until the first member's JoinGroup.
	"$TXNCOORD" groups describe --admin "$ADMIN" --group "$GROUP" -o json >"$WORK/$GROUP.json" 2>"$WORK/describe.err" &&
		/usr/bin/python3 -c '
import json, sys
g = json.load(open(sys.argv[1]))
sys.exit(0 if g["state"] == "Stable" and len(g["members"]) == 2 and all(m["assignment"] for m in g["members"]) else 1)
' "$WORK/$GROUP.json" && break
	[ "$i" -lt 300 ] || fail "group $GROUP: not Stable with 2 assigned kcat members in 30 s: $(cat "$WORK/$GROUP.json" "$WORK/describe.err" 2>/dev/null)"
	sleep 0.1
done
log "group $GROUP: Stable, 2 kcat members, $PARTS partitions assigned between them"

seq -f 'kg-%g' 1 "$N" >"$WORK/want-1"
produce "$TOPIC" "$PARTS" "$WORK/want-1"
for i in $(seq 600); do
	[ "$(cat "$WORK/member-a.out" "$WORK/member-b.out" | wc -l)" -ge "$N" ] && break
	[ "$i" -lt 600 ] || fail "kcat members read $(cat "$WORK/member-a.out" "$WORK/member-b.out" | wc -l) of $N values in 60 s"
	sleep 0.1
done
# SIGTERM: kcat leaves its loop and closes the consumer, which commits the
# offsets of what it handed out (enable.auto.commit).
kill -TERM "${PIDS[@]}"
for pid in "${PIDS[@]}"; do
	wait "$pid" || fail "kcat member (pid $pid) exited with $? after SIGTERM"
done
PIDS=()
A=$(wc -l <"$WORK/member-a.out") B=$(wc -l <"$WORK/member-b.out")
[ "$A" -gt 0 ] && [ "$B" -gt 0 ] || fail "one kcat member read nothing (a: $A, b: $B)"
cat "$WORK/member-a.out" "$WORK/member-b.out" >"$WORK/got-1"
quiet member-a member-b
exactly "two kcat -G members" "$WORK/want-1" "$WORK/got-1"
log "kcat -G, 2 members together: $N values exactly once between them (a: $A, b: $B)"
check_at_end "$GROUP" "$TOPIC" "$PARTS"

# Resume: one member leaves after 200, the next reads on to EOF.
seq -f 'kg-%g' $((N + 1)) $((N + M)) >"$WORK/want-2"
produce "$TOPIC" "$PARTS" "$WORK/want-2"
timeout 60 "${KCAT_G[@]}" -c 200 "$TOPIC" >"$WORK/member-c.out" 2>"$WORK/member-c.err" \
	|| fail "kcat -G -c 200 (member c) failed or did not exit"
timeout 60 "${KCAT_G[@]}" -e "$TOPIC" >"$WORK/member-d.out" 2>"$WORK/member-d.err" \
	|| fail "kcat -G -e (member d) failed or did not exit at EOF"
C=$(wc -l <"$WORK/member-c.out") D=$(wc -l <"$WORK/member-d.out")
quiet member-c member-d
[ "$C" -eq 200 ] || fail "kcat -G -c 200 read $C values"
cat "$WORK/member-c.out" "$WORK/member-d.out" >"$WORK/got-2"
exactly "kcat -G resuming from committed offsets" "$WORK/want-2" "$WORK/got-2"
log "kcat -G, resuming one after another: $M new values exactly once (c: $C then left, d: $D to EOF), none of the first $N"
check_at_end "$GROUP" "$TOPIC" "$PARTS"

# ============ 2. confluent-kafka Python consume-transform-produce ============
IN=interop-py-eos-in$RUN
OUT=interop-py-eos-out$RUN
PYGROUP=interop-py-eos$RUN
PN=2000
create_topic "$IN" 4
create_topic "$OUT" 4
seq -f 'py-%g' 1 "$PN" >"$WORK/py-in"
produce "$IN" 4 "$WORK/py-in"
timeout 120 /usr/bin/python3 "$HERE/confluent_eos.py" "$BOOT" "$IN" "$OUT" "$PYGROUP" "interop-py-eos-tx$RUN" "$PN" \
	>"$WORK/py.out" 2>"$WORK/py.err" || fail "confluent_eos.py"
quiet py
log "confluent-kafka stage: $(cat "$WORK/py.out")"
ABORTED=$(sed -n 's/.*aborted=\([0-9]*\).*/\1/p' "$WORK/py.out")
[[ $ABORTED =~ ^[1-9][0-9]*$ ]] || fail "confluent_eos.py aborted no transaction"

# Its last commit returned once the Prepare was durable; a read_committed
# read to EOF stops at the last stable offset, before a transaction whose
# markers are still in flight: wait until they are written.
for i in $(seq 1 600); do
	"$TXNCOORD" txn describe --admin "$ADMIN" --transactional-id "interop-py-eos-tx$RUN" -o json \
		>"$WORK/py-txn.json" 2>"$WORK/py-txn.err" &&
		grep -Eq '"state": *"(CompleteCommit|CompleteAbort|Empty)"' "$WORK/py-txn.json" && break
	[ "$i" = 600 ] && fail "interop-py-eos-tx$RUN not complete 60 s after its last commit: $(cat "$WORK/py-txn.json" "$WORK/py-txn.err")"
	sleep 0.1
done
timeout 60 kcat -C -b "$BOOT" -t "$OUT" -e -q -f '%s\n' -X isolation.level=read_committed \
	>"$WORK/py-out" 2>"$WORK/kcat-rc.err" || fail "kcat -C read_committed $OUT"
if grep -q '^aborted-' "$WORK/py-out"; then
	fail "kcat read_committed read $(grep -c '^aborted-' "$WORK/py-out") values of the aborted transaction"
fi
sed 's/^/out-/' "$WORK/py-in" >"$WORK/py-want"
exactly "confluent-kafka stage output (read_committed)" "$WORK/py-want" "$WORK/py-out"
timeout 60 kcat -C -b "$BOOT" -t "$OUT" -e -q -f '%s\n' -X isolation.level=read_uncommitted \
	>"$WORK/py-out-all" 2>"$WORK/kcat-ru.err" || fail "kcat -C read_uncommitted $OUT"
quiet kcat-rc kcat-ru
SEEN=$(grep -c '^aborted-' "$WORK/py-out-all" || true)
[ "$SEEN" -eq "$ABORTED" ] || fail "kcat read_uncommitted sees $SEEN values of the aborted transaction, confluent_eos.py wrote $ABORTED"
log "kcat read_committed $OUT: $PN values exactly once, none of the aborted transaction ($ABORTED values, in the log: read_uncommitted sees them)"
check_at_end "$PYGROUP" "$IN" 4
log "PASS ($SECONDS s)"
