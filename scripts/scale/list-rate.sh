#!/bin/bash
# list-rate.sh BIN DATA_DIR [RUNS] [PATH] [PORT]: serves a store (e.g. one gen-store.py wrote),
# times RUNS unpaged lists of PATH (default: the herald-bench namespace) with curl, and prints
# the CPU each server thread spent on each (in clock ticks, from /proc/PID/task/*/stat).
set -u
BIN=$1; DATA=$2; RUNS=${3:-2}; P=${4:-/api/v1/namespaces/herald-bench/events}; PORT=${5:-18643}
$BIN serve --data "$DATA" --listen 127.0.0.1:$PORT --insecure-plain-http --event-ttl 168h \
  --max-events 0 > serve.log 2>&1 &
PID=$!
for _ in $(seq 1 3000); do curl -sf http://127.0.0.1:$PORT/readyz >/dev/null && break; sleep 0.01; done
ticks() {
  for t in /proc/$PID/task/*; do echo "$(cat $t/comm)_$(basename $t) $(awk '{print $14+$15}' $t/stat)"; done | sort
}
for _ in $(seq 1 "$RUNS"); do
  ticks > /tmp/list-rate.a
  curl -s -A kubectl -o /dev/null \
    -w "$(basename $BIN) $P: %{size_download} bytes in %{time_total} s\n" "http://127.0.0.1:$PORT$P"
  ticks > /tmp/list-rate.b
  join /tmp/list-rate.a /tmp/list-rate.b | awk '{d=$3-$2; if (d>10) printf "%s=%d ", $1, d} END {print ""}'
done
grep -E "VmRSS|VmHWM" /proc/$PID/status | tr -s ' \t' ' ' | tr '\n' ' '; echo
kill $PID; wait $PID 2>/dev/null
