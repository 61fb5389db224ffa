#!/bin/bash
# create-ab.sh BIN TAG PORT: a fresh SQLite store, `herald serve`, then `herald bench`
# creates for 10 s with 64 clients (WATCHERS=N adds watch streams); output in TAG.txt.
set -u
BIN=$1; TAG=$2; PORT=$3
D=$(mktemp -d /tmp/herald-ab-XXXX)
$BIN serve --data "$D" --listen 127.0.0.1:$PORT --insecure-plain-http > "$TAG.serve.log" 2>&1 &
PID=$!
for _ in $(seq 1 100); do curl -sf http://127.0.0.1:$PORT/readyz >/dev/null && break; sleep 0.1; done
$BIN bench --server http://127.0.0.1:$PORT --clients 64 --duration 10s --watchers "${WATCHERS:-0}" > "$TAG.txt" 2>&1
kill $PID; wait $PID 2>/dev/null; rm -rf "$D"
grep -E "creates |lag" "$TAG.txt"
