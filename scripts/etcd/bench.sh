#!/bin/bash
# bench.sh HERALD_BIN ETCD_PUT_BIN [RUNS]: issue 31's side-by-side measurement, on this machine
# in one run, for a 1-member and a 3-member etcd cluster (Debian's etcd-server, fsync on):
#   1. etcd's own durable write rate at 64 concurrent requests over one connection, with the
#      value size Herald stores for a `herald bench` event: plain puts, and the transaction
#      Herald's create sends (examples/etcd_put.rs);
#   2. `herald bench --clients 64` creates through `herald serve --store etcd` on that cluster;
#   3. a list of 100,000 events through herald, and etcd's own read of the same keys
#      (examples/etcd_range.rs, in herald's ranges and in one);
#   4. watch fan-out (100 watchers) through herald, as fast as the clients go and at a fixed
#      1,000 creates/s, and etcd's own delivery of the same creates at that rate to 1 and to
#      100 etcd watchers (examples/etcd_put.rs `watch`; a replica holds one);
#   5. the same watch fan-out on the SQLite store, for comparison.
# With each figure the CPU time etcd (all members) and herald spent on it, from /proc: on
# 2 cores they share, it says whose work the figure is.
# RUNS (default 3) of each; prints every run, take the medians.
# Build first: cargo build --release -p herald && cargo build --release -p herald-server --example etcd_put --example etcd_range
set -u
HERALD=$1; PUT=$2; RUNS=${3:-3}
RANGE=$(dirname "$PUT")/etcd_range
PORT=18643
WORK=$(mktemp -d /tmp/herald-etcd-bench-XXXX)
trap 'pkill -P $$ 2>/dev/null; rm -rf "$WORK"' EXIT

start_cluster() { # start_cluster N: members on 127.0.0.1:1{i}379 (clients) / 1{i}380 (peers)
  local n=$1 cluster="" i
  for i in $(seq 1 "$n"); do cluster+="${cluster:+,}m$i=http://127.0.0.1:1${i}380"; done
  ENDPOINTS=""
  for i in $(seq 1 "$n"); do
    etcd --name m$i --data-dir "$WORK/etcd-$n-m$i" \
      --listen-client-urls http://127.0.0.1:1${i}379 --advertise-client-urls http://127.0.0.1:1${i}379 \
      --listen-peer-urls http://127.0.0.1:1${i}380 --initial-advertise-peer-urls http://127.0.0.1:1${i}380 \
      --initial-cluster "$cluster" --initial-cluster-token "bench-$n-$$" \
      --quota-backend-bytes 8589934592 --logger zap --log-level error > "$WORK/etcd-$n-m$i.log" 2>&1 &
    ENDPOINTS+="${ENDPOINTS:+,}http://127.0.0.1:1${i}379"
  done
  for _ in $(seq 1 300); do
    ETCDCTL_API=3 etcdctl --endpoints "$ENDPOINTS" endpoint health >/dev/null 2>&1 && return 0
    sleep 0.1
  done
  echo "etcd did not start" >&2; exit 1
}

stop_cluster() { pkill -f "etcd --name m" ; sleep 1; }

# cpu PID...: the CPU time (user + system) of the processes so far, in ms.
cpu() { local t=0 p; for p in "$@"; do t=$((t + $(awk '{print $14+$15}' /proc/$p/stat))); done; echo $((t * 10)); }
etcd_pids() { pgrep -f "etcd --name m" | tr '\n' ' '; }

# measured WHAT COUNT CMD...: runs CMD, then prints the CPU etcd and herald spent per item
# (COUNT items; a COUNT of 0 reads it from CMD's `creates N sent` line).
measured() {
  local what=$1 count=$2; shift 2
  local e0 s0=0 out e1 s1=0
  e0=$(cpu $(etcd_pids)); [ -n "${SERVE:-}" ] && s0=$(cpu $SERVE)
  out=$("$@" 2>&1); echo "$out" | grep -E "^ *creates|lag|^put|^create|list|^range"
  e1=$(cpu $(etcd_pids)); [ -n "${SERVE:-}" ] && s1=$(cpu $SERVE)
  [ "$count" = 0 ] && count=$(echo "$out" | awk '/^ *creates/ {print $2}')
  [ -n "$count" ] && [ "$count" -gt 0 ] && \
    echo "  cpu per $what: etcd $(( (e1 - e0) * 1000 / count )) µs, herald $(( (s1 - s0) * 1000 / count )) µs"
}

serve() { # serve: herald on the cluster, waits for /readyz
  $HERALD serve --store etcd --etcd-servers "$ENDPOINTS" --listen 127.0.0.1:$PORT \
    --insecure-plain-http --event-ttl 1h > "$WORK/serve.log" 2>&1 &
  SERVE=$!
  for _ in $(seq 1 300); do curl -sf http://127.0.0.1:$PORT/readyz >/dev/null && return 0; sleep 0.1; done
  echo "herald serve did not become ready:" >&2; cat "$WORK/serve.log" >&2; exit 1
}

for members in 1 3; do
  echo "== $members member(s)"
  start_cluster $members
  # The value size herald stores for a bench event (kube-apiserver's protobuf, by default).
  serve
  $HERALD bench --server http://127.0.0.1:$PORT --clients 4 --duration 1s >/dev/null 2>&1
  key=$(ETCDCTL_API=3 etcdctl --endpoints "$ENDPOINTS" get --prefix /registry/events/ --keys-only --limit 1 | head -1)
  bytes=$(ETCDCTL_API=3 etcdctl --endpoints "$ENDPOINTS" get "$key" --print-value-only | head -c -1 | wc -c)
  kill $SERVE; wait $SERVE 2>/dev/null
  echo "value size of a bench event: $bytes bytes"
  for r in $(seq 1 "$RUNS"); do
    SERVE=
    measured put 30000 $PUT "$ENDPOINTS" 64 "$bytes" 30000 put
    measured create 30000 $PUT "$ENDPOINTS" 64 "$bytes" 30000 create
    serve
    measured create 0 $HERALD bench --server http://127.0.0.1:$PORT --clients 64 --duration 10s
    kill $SERVE; wait $SERVE 2>/dev/null
  done
  # A list of 100,000 events, and the watch fan-out, on one replica.
  serve
  count() { curl -s -A kubectl "http://127.0.0.1:$PORT/api/v1/namespaces/herald-bench/events" | python3 -c 'import json,sys; print(len(json.load(sys.stdin)["items"]))'; }
  n=$(count)
  for _ in $(seq 1 30); do
    [ "$n" -ge 100000 ] && break
    $HERALD bench --server http://127.0.0.1:$PORT --clients 64 --duration 10s > /dev/null 2>&1
    n=$(count)
  done
  echo "events stored in herald-bench: $n"
  for r in $(seq 1 "$RUNS"); do
    measured "list of 100,000" 1 curl -s -A kubectl -o /dev/null -w "list of 100,000: %{size_download} bytes in %{time_total} s\n" \
      "http://127.0.0.1:$PORT/api/v1/namespaces/herald-bench/events?limit=100000"
  done
  measured "range of the events" "$RUNS" $RANGE "$ENDPOINTS" /registry/events/herald-bench/ 25000 "$RUNS"
  measured "range of the events" "$RUNS" $RANGE "$ENDPOINTS" /registry/events/herald-bench/ 0 "$RUNS"
  for r in $(seq 1 "$RUNS"); do
    measured create 0 $HERALD bench --server http://127.0.0.1:$PORT --clients 64 --duration 10s --watchers 100 -n watch-$r
    measured create 0 $HERALD bench --server http://127.0.0.1:$PORT --clients 64 --duration 10s --rate 1000 --watchers 100 -n rate-$r
  done
  kill $SERVE; wait $SERVE 2>/dev/null; SERVE=
  for r in $(seq 1 "$RUNS"); do
    measured create 10000 $PUT "$ENDPOINTS" 64 "$bytes" 10000 watch 1000 1
    measured create 10000 $PUT "$ENDPOINTS" 64 "$bytes" 10000 watch 1000 100
  done
  stop_cluster
done

echo "== SQLite (--data), for the watch fan-out"
$HERALD serve --data "$WORK/sqlite" --listen 127.0.0.1:$PORT --insecure-plain-http --event-ttl 1h > "$WORK/serve.log" 2>&1 &
SERVE=$!
for _ in $(seq 1 300); do curl -sf http://127.0.0.1:$PORT/readyz >/dev/null && break; sleep 0.1; done
for r in $(seq 1 "$RUNS"); do
  $HERALD bench --server http://127.0.0.1:$PORT --clients 64 --duration 10s --watchers 100 -n watch-$r 2>&1 | grep -E "^ *creates |lag"
  $HERALD bench --server http://127.0.0.1:$PORT --clients 64 --duration 10s --rate 1000 --watchers 100 -n rate-$r 2>&1 | grep -E "^ *creates |lag"
done
kill $SERVE; wait $SERVE 2>/dev/null
