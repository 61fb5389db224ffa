# events-for.py PORT NAMESPACE N [STORED]: N requests as `kubectl events --for pod/bench-C-S` sends them
# (namespace + involvedObject field selector, limit=500) to a store gen-store.py or
# `herald bench` filled (STORED: how many events it holds, default 10,000,000, to pick pods
# that exist); prints p50/p99/max.
import http.client, time, json, re, sys, random
port=int(sys.argv[1]); ns=sys.argv[2]; n=int(sys.argv[3])
per_client=(int(sys.argv[4]) if len(sys.argv)>4 else 10_000_000)//64
c=http.client.HTTPConnection("127.0.0.1",port)
def get(path):
    c.request("GET",path); r=c.getresponse(); b=r.read(); return r.status,b
# kubectl events --for pod/X: namespace + involvedObject kind/apiVersion/name, limit=500
lat=[]
for i in range(n):
    client=random.randrange(64); seq=random.randrange(per_client)
    path=f"/api/v1/namespaces/{ns}/events?fieldSelector=involvedObject.kind%3DPod%2CinvolvedObject.apiVersion%3Dv1%2CinvolvedObject.name%3Dbench-{client}-{seq}&limit=500"
    t=time.perf_counter(); s,b=get(path); lat.append(time.perf_counter()-t)
    assert s==200,(s,b[:200])
lat.sort()
print(f"events --for: {n} requests p50 {lat[len(lat)//2]*1000:.2f} ms p99 {lat[int(len(lat)*0.99)]*1000:.2f} ms max {lat[-1]*1000:.2f} ms")
