# gen-store.py DIR N: writes a schema-3 Herald SQLite store of N events shaped exactly as
# `herald bench --workload unique` stores them (same JSON, keys, index terms, TTL deadline),
# without going through HTTP: rows in revision order, then the indexes built by sorting.
import sqlite3, sys, os, time, uuid
d, n = sys.argv[1], int(sys.argv[2])
os.makedirs(d, exist_ok=True)
path = os.path.join(d, "herald.db")
c = sqlite3.connect(path, isolation_level=None)
c.execute("PRAGMA auto_vacuum=INCREMENTAL"); c.execute("PRAGMA journal_mode=OFF")
c.execute("PRAGMA synchronous=OFF"); c.execute("PRAGMA cache_size=-1048576"); c.execute("PRAGMA temp_store=FILE")
c.executescript("""
CREATE TABLE meta (name TEXT PRIMARY KEY, value INTEGER NOT NULL) WITHOUT ROWID;
CREATE TABLE versions (
    rev        INTEGER PRIMARY KEY,
    key        TEXT NOT NULL,
    value      BLOB,
    create_rev INTEGER NOT NULL,
    prev_rev   INTEGER,
    expires_at INTEGER,
    next_rev   INTEGER,
    t0 INTEGER, t1 INTEGER, t2 INTEGER, t3 INTEGER, t4 INTEGER, t5 INTEGER
);""")
M = (1 << 64) - 1
def term(s):
    h = 0xcbf29ce484222325
    for b in s.encode():
        h = ((h ^ b) * 0x100000001b3) & M
    return h - (1 << 64) if h >= (1 << 63) else h
run = "gen10m00"
ts = "2026-11-29T08:30:00Z"
exp = 1796545800000  # +168h in ms
tmpl = ('{"metadata":{"annotations":{"herald.dev/bench-sent":"%s:%d"},"creationTimestamp":"%s","managedFields":[{"apiVersion":"v1","fieldsType":"FieldsV1","fieldsV1":{"f:count":{},"f:firstTimestamp":{},"f:involvedObject":{},"f:lastTimestamp":{},"f:message":{},"f:metadata":{"f:annotations":{".":{},"f:herald.dev/bench-sent":{}}},"f:reason":{},"f:source":{"f:component":{}},"f:type":{}},"manager":"unknown","operation":"Update","time":"%s"}],"name":"bench-%s-%d-%d","namespace":"herald-bench","uid":"%s"},"involvedObject":{"apiVersion":"v1","kind":"Pod","name":"bench-%d-%d","namespace":"herald-bench"},"reason":"BenchCreated","message":"bench event %d from client %d","source":{"component":"herald-bench"},"firstTimestamp":"%s","lastTimestamp":"%s","count":1,"type":"Normal","eventTime":null,"reportingComponent":"","reportingInstance":""}')
t2, t3, t4 = term("BenchCreated"), term("Normal"), term("herald-bench")
t0 = time.time()
rev = 1
def rows():
    global rev
    for seq in range(n // 64 + 1):
        for client in range(64):
            if rev > n: return
            rev += 1
            v = tmpl % (run, 1795939424459358448 + rev, ts, ts, run, client, seq, uuid.uuid4(), client, seq, seq, client, ts, ts)
            yield (rev, f"/events/herald-bench/bench-{run}-{client}-{seq}", v.encode(), rev, exp, term(f"bench-{client}-{seq}"), t2, t3, t4)
c.execute("BEGIN")
c.executemany("INSERT INTO versions(rev,key,value,create_rev,prev_rev,expires_at,next_rev,t0,t1,t2,t3,t4,t5) VALUES (?,?,?,?,NULL,?,NULL,?,NULL,?,?,?,NULL)", rows())
c.execute("COMMIT")
print(f"rows: {n} in {time.time()-t0:.0f} s", flush=True)
for sql in ["CREATE INDEX versions_key ON versions(key, next_rev)",
            "CREATE INDEX versions_t0 ON versions(t0) WHERE t0 IS NOT NULL",
            "CREATE INDEX versions_t1 ON versions(t1) WHERE t1 IS NOT NULL",
            "CREATE INDEX versions_t2 ON versions(t2) WHERE t2 IS NOT NULL",
            "CREATE INDEX versions_t3 ON versions(t3) WHERE t3 IS NOT NULL",
            "CREATE INDEX versions_t4 ON versions(t4) WHERE t4 IS NOT NULL",
            "CREATE INDEX versions_t5 ON versions(t5) WHERE t5 IS NOT NULL",
            "CREATE INDEX versions_expiry ON versions(expires_at) WHERE next_rev IS NULL AND expires_at IS NOT NULL",
            "CREATE INDEX versions_replaced ON versions(next_rev) WHERE next_rev IS NOT NULL"]:
    c.execute(sql); print(f"{sql.split()[2]} at {time.time()-t0:.0f} s", flush=True)
c.executescript(f"""INSERT INTO meta(name, value) VALUES ('revision', 1), ('compacted', 0), ('schema', 3), ('indexed_from', 0), ('live', {n});""")
c.execute("PRAGMA journal_mode=WAL")
print(f"done in {time.time()-t0:.0f} s", flush=True)
