#!/bin/bash
# bench-tls.sh [BIN] [ROUNDS] [REQUESTS]: herald bench --clients 64 creates, plain HTTP against
# HTTPS with a bearer token and RBAC, alternating rounds on fresh SQLite stores (ports 7101, 7102).
# Prints one line per run; the JSON summaries stay in /tmp/tlsbench.
set -u
BIN=${1:-herald}; ROUNDS=${2:-3}; REQ=${3:-100000}
W=/tmp/tlsbench; rm -rf $W; mkdir -p $W
echo "bench-token,bencher,7" > $W/tokens.csv
cat > $W/rbac.yaml <<'Y'
apiVersion: rbac.authorization.k8s.io/v1
kind: Role
metadata: {name: w, namespace: bench}
rules:
- apiGroups: [""]
  resources: [events]
  verbs: [create, list, watch, get]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: RoleBinding
metadata: {name: w, namespace: bench}
subjects: [{kind: User, name: bencher, apiGroup: rbac.authorization.k8s.io}]
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: Role, name: w}
Y
for r in $(seq 1 $ROUNDS); do
  for mode in plain tls; do
    d=$W/data-$mode-$r
    if [ $mode = plain ]; then
      $BIN serve --insecure-plain-http --data $d --listen 127.0.0.1:7101 > $W/serve-$mode-$r.log 2>&1 &
      pid=$!; sleep 3
      $BIN bench --server http://127.0.0.1:7101 --clients 64 --requests $REQ --namespace bench -o json > $W/bench-$mode-$r.json 2>$W/bench-$mode-$r.err
    else
      $BIN serve --data $d --listen 127.0.0.1:7102 --token-auth-file $W/tokens.csv --authorization-rbac-file $W/rbac.yaml > $W/serve-$mode-$r.log 2>&1 &
      pid=$!; sleep 3
      cat > $W/kc <<K
apiVersion: v1
kind: Config
clusters:
- name: h
  cluster: {server: "https://127.0.0.1:7102", certificate-authority: $d/pki/ca.crt}
contexts:
- name: h
  context: {cluster: h, user: bencher}
current-context: h
users:
- name: bencher
  user: {token: bench-token}
K
      $BIN bench --kubeconfig $W/kc --clients 64 --requests $REQ --namespace bench -o json > $W/bench-$mode-$r.json 2>$W/bench-$mode-$r.err
    fi
    kill $pid; wait $pid 2>/dev/null
    python3 -c "import json,sys; s=json.load(open('$W/bench-$mode-$r.json')); print('$mode', $r, 'ok', s['succeeded'], 'failed', s['failed'], 'per_s', round(s['throughput_per_second']), 'lat', s['latency_ms'])"
  done
done
