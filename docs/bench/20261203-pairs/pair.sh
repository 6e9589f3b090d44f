#!/bin/bash
# Paired windows: kfake (in memory, its own process) and `txncoord up` run
# at once, idle in turn, and the same drive alternates between them in
# windows of SECS seconds (the order flips every pair). Each window prints
# txn/s, commit p50 and the server's CPU per 1,000 transactions (/proc),
# and each pair the ratios txncoord / kfake.
#
# usage: pair.sh TXNCOORD_BIN [sync|nosync] [PRODUCERS] [PAIRS] [SECS]
# env:   BENCH (txncoord-bench binary), WORK (scratch dir, default /tmp),
#        IDS=same (every window reuses its server's transactional ids,
#        the default) or IDS=fresh (new ids every window).
bin=$1; mode=$2; np=${3:-64}; pairs=${4:-8}; secs=${5:-5}
bench=${BENCH:-txncoord-bench}; work=${WORK:-/tmp}; ids=${IDS:-same}
"$bench" serve-kfake > "$work/pair-kf.log" 2>&1 & kpid=$!
rm -rf "$work/d-pair"; extra=""; [ "$mode" = nosync ] && extra="--unsafe-no-fsync"
"$bin" up --data-dir "$work/d-pair" --listen 127.0.0.1:19192 --leaders 4.2,4.2 --admin-listen 127.0.0.1:19744 \
  --topics bench:6 $extra > "$work/pair-tc.log" 2>&1 & tpid=$!
sleep 2; kboot=$(grep -o 'bootstrap=[^ ]*' "$work/pair-kf.log" | cut -d= -f2)
cpu() { awk '{print $14+$15}' /proc/$1/stat; }
window() { # pid bootstrap prefix -> txn/s p50 cpu/1k
  local prefix=$3; [ "$ids" = same ] && prefix=${3%%[0-9]*}
  c0=$(cpu $1)
  out=$("$bench" drive --bootstrap $2 --producers $np --duration ${secs}s --txn-prefix $prefix 2>&1)
  c1=$(cpu $1)
  tps=$(echo "$out" | grep -o '[0-9]* txn/s' | cut -d' ' -f1); p50=$(echo "$out" | grep -o 'commit p50 [0-9.]*' | cut -d' ' -f3)
  echo "$tps $p50 $(echo "($c1-$c0)*10*1000/($tps*$secs)" | bc -l | cut -c1-6)"
}
for i in $(seq 1 $pairs); do
  if [ $((i % 2)) = 1 ]; then a=($(window $tpid 127.0.0.1:19192 t$i)); b=($(window $kpid $kboot k$i))
  else b=($(window $kpid $kboot k$i)); a=($(window $tpid 127.0.0.1:19192 t$i)); fi
  echo "pair $i txncoord ${a[0]} txn/s p50 ${a[1]} ms cpu ${a[2]} | kfake ${b[0]} p50 ${b[1]} cpu ${b[2]} |" \
    "txn/s $(echo "${a[0]}/${b[0]}" | bc -l | cut -c1-4)x p50 $(echo "${a[1]}/${b[1]}" | bc -l | cut -c1-4)x cpu $(echo "${a[2]}/${b[2]}" | bc -l | cut -c1-4)x"
done
kill $kpid $tpid; wait $kpid $tpid 2>/dev/null
