#!/bin/bash
# initial-rate.sh BIN DATA_DIR [PORT]: serves a store (e.g. one gen-store.py wrote) and times
# what a new informer reads of it: an unpaged protobuf list of every event (client-go's
# protobuf `List` without a limit) and a watch's initial events up to the initial-events-end
# bookmark (`sendInitialEvents=true`, a watch-list informer); prints the server's peak RSS.
set -u
BIN=$1; DATA=$2; PORT=${3:-18643}
$BIN serve --data "$DATA" --listen 127.0.0.1:$PORT --insecure-plain-http --event-ttl 168h \
  --max-events 0 > serve.log 2>&1 &
PID=$!
for _ in $(seq 1 3000); do curl -sf http://127.0.0.1:$PORT/readyz >/dev/null && break; sleep 0.01; done
curl -s -A kubectl -H 'Accept: application/vnd.kubernetes.protobuf' -o /dev/null \
  -w "$(basename $BIN) protobuf list: HTTP %{http_code}, %{size_download} bytes in %{time_total} s\n" \
  "http://127.0.0.1:$PORT/api/v1/events"
grep -E "VmHWM" /proc/$PID/status | tr -s ' \t' ' '
# The watch goes on after the bookmark: the time is taken when grep has found it.
S=$(date +%s%N)
read -r N E < <(timeout 120 curl -s -N -A kubectl \
  "http://127.0.0.1:$PORT/api/v1/events?watch=1&sendInitialEvents=true&resourceVersionMatch=NotOlderThan&allowWatchBookmarks=true" \
  | { grep -m1 -n initial-events-end | cut -d: -f1 | tr '\n' ' '; date +%s%N; })
echo "$(basename $BIN) initial events: $((N - 1)) in $(( (E - S) / 1000000 )) ms"
grep -E "VmHWM" /proc/$PID/status | tr -s ' \t' ' '
kill $PID; wait $PID 2>/dev/null
