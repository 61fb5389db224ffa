#!/bin/bash
# create-ab.sh BIN TAG PORT: a fresh SQLite store, `herald serve`, then `herald bench`
# creates for 10 s with 64 clients (WATCHERS=N adds watch streams); output in TAG.txt.
#
# Also prints the server's CPU per create by thread kind (the SQLite writer
# `herald-sqlite-w`, its checkpointer `herald-sqlite-c`, the request threads), from
# /proc/PID/task/*/stat before and after the run. The writer's figure is the steadiest on
# a noisy VM: it does not depend on how the cores are shared between server and bench.
set -u
BIN=$1; TAG=$2; PORT=$3
D=$(mktemp -d /tmp/herald-ab-XXXX)
"$BIN" serve --data "$D" --listen "127.0.0.1:$PORT" --insecure-plain-http > "$TAG.serve.log" 2>&1 &
PID=$!
for _ in $(seq 1 100); do curl -sf "http://127.0.0.1:$PORT/readyz" >/dev/null && break; sleep 0.1; done
# CPU ticks (user + system) summed by thread name.
ticks() {
    for t in /proc/$PID/task/*; do
        echo "$(cat "$t/comm") $(awk '{print $14+$15}' "$t/stat")"
    done | awk '{a[$1]+=$2} END{for(k in a) print k, a[k]}' | sort
}
ticks > "$TAG.ticks0"
"$BIN" bench --server "http://127.0.0.1:$PORT" --clients 64 --duration 10s --watchers "${WATCHERS:-0}" > "$TAG.txt" 2>&1
ticks > "$TAG.ticks1"
kill $PID; wait $PID 2>/dev/null; rm -rf "$D"
grep -E "creates |lag" "$TAG.txt"
n=$(grep -E "creates " "$TAG.txt" | sed -E 's/.* ([0-9]+) ok.*/\1/')
if [ -z "$n" ] || [ "$n" = 0 ]; then
    echo "no creates succeeded; see $TAG.txt and $TAG.serve.log" >&2
    exit 1
fi
hz=$(getconf CLK_TCK)
echo "server CPU per create: $(join "$TAG.ticks0" "$TAG.ticks1" | awk -v n="$n" -v hz="$hz" \
    '{d=$3-$2; if (d>5) printf "%s %d µs  ", $1, d*1000000/hz/n}')" | tee -a "$TAG.txt"
