#!/bin/bash
# measure-store.sh BIN DATA_DIR PORT: serves a large store (e.g. one gen-store.py wrote) and
# measures what issue 30 asks: ready time, RSS, `kubectl events --for`'s request, an
# unpaged (streamed) list, paged lists and creates. Needs curl and python3.
set -u
BIN=$1; DATA=$2; PORT=$3; HERE=$(dirname "$0")
t0=$(date +%s.%N)
$BIN serve --data "$DATA" --listen 127.0.0.1:$PORT --insecure-plain-http --event-ttl 168h --max-events 0 > serve.log 2>&1 &
PID=$!
for _ in $(seq 1 3000); do curl -sf http://127.0.0.1:$PORT/readyz >/dev/null && break; sleep 0.01; done
t1=$(date +%s.%N)
echo "ready after $(python3 -c "print(f'{$t1-$t0:.2f}')") s"
rss() { grep -E "VmRSS|VmHWM|RssAnon|RssFile" /proc/$PID/status | tr -s ' \t' ' ' | tr '\n' ' '; echo; }
echo "rss at ready: $(rss)"
python3 "$HERE/events-for.py" $PORT herald-bench 2000
echo "rss after events --for: $(rss)"
curl -s -A kubectl -o /dev/null -w "unpaged list (JSON, streamed): %{size_download} bytes in %{time_total} s\n" "http://127.0.0.1:$PORT/api/v1/namespaces/herald-bench/events"
echo "rss after the unpaged list: $(rss)"
python3 - $PORT <<'PY'
import http.client, time, re, sys
port=int(sys.argv[1]); c=http.client.HTTPConnection("127.0.0.1",port)
for limit in (500, 10000):
    t=time.perf_counter(); total=0; cont=None; pages=0
    while True:
        c.request("GET", f"/api/v1/namespaces/herald-bench/events?limit={limit}"+(f"&continue={cont}" if cont else ""))
        r=c.getresponse(); b=r.read(); assert r.status==200
        m=re.search(rb'"continue":"([^"]*)"',b[:2000]); total+=b.count(b'"kind":"Pod"'); pages+=1
        if not m or not m.group(1): break
        cont=m.group(1).decode()
    dt=time.perf_counter()-t
    print(f"paged list limit={limit}: {total} events in {pages} pages in {dt:.1f} s = {total/dt:,.0f} events/s", flush=True)
PY
echo "rss after paged lists: $(rss)"
$BIN bench --server http://127.0.0.1:$PORT --clients 64 --duration 20s 2>&1 | grep -E "creates|latency"
echo "rss after creates: $(rss)"
kill $PID; wait $PID 2>/dev/null
