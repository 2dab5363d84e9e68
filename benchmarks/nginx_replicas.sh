#!/usr/bin/env bash
# benchmarks/serving.py through nginx (deploy/nginx/graphrt.conf) in front of N replicas.
#
#   bash benchmarks/nginx_replicas.sh N [serving.py args...]      e.g. N=1 or 2, --rounds 3
#   PIN=1 bash benchmarks/nginx_replicas.sh 2 --rounds 3
#
# Replicas: `graphrt serve` on 127.0.0.1:8101.. with the benchmark's own server flags (the
# default GGUF, or $MODEL). PIN=1 binds replica i to core i-1 with one inference thread: the
# one-replica-per-NUMA-node layout in miniature. nginx (Debian's package) listens on
# 127.0.0.1:8100 with the deploy file's example upstream replaced by these replicas; the
# benchmark compares the whole path against the engine driven directly, in the same run.
# Everything is stopped at the end; logs and nginx's files are in $OUT.
set -euo pipefail
cd "$(dirname "$0")/.."
N=${1:?usage: nginx_replicas.sh REPLICAS [serving.py args...]}
shift
PYTHON=${PYTHON:-python3}
MODEL=${MODEL:-$("$PYTHON" -m graphrt.serving.default_model)}
OUT=${OUT:-$(mktemp -d /tmp/graphrt-nginx-XXXXXX)}
NGINX=${NGINX:-$(command -v nginx || echo /usr/sbin/nginx)}
mkdir -p "$OUT"/{client_body,proxy,fastcgi,uwsgi,scgi}

pids=()
cleanup() {
    [ -f "$OUT/nginx.pid" ] && kill -QUIT "$(cat "$OUT/nginx.pid")" 2>/dev/null || true
    for pid in "${pids[@]}"; do kill -TERM "$pid" 2>/dev/null || true; done
    for pid in "${pids[@]}"; do wait "$pid" 2>/dev/null || true; done
}
trap cleanup EXIT

servers=""
for i in $(seq 1 "$N"); do
    port=$((8100 + i))
    pin=()
    extra=()
    if [ "${PIN:-0}" = 1 ]; then
        pin=(taskset -c $((i - 1)))
        extra=(--plugin_config '{"INFERENCE_NUM_THREADS": 1}')
    fi
    "${pin[@]}" "$PYTHON" -m graphrt.cli.main serve --rest_port "$port" \
        --model_path "$MODEL" --model_name bench --cache_size 0 --max_num_batched_tokens 256 \
        --target_device CPU "${extra[@]}" >"$OUT/replica$i.log" 2>&1 &
    pids+=($!)
    servers+="    server 127.0.0.1:$port max_fails=1 fail_timeout=10s;\n"
done

# The deploy file with its two example replicas replaced by ours, listening on 8100.
sed -e '/^    server 127\.0\.0\.1:800[12] /d' -e "s|^    least_conn;|    least_conn;\n${servers%\\n}|" \
    -e 's|^    listen 8000;|    listen 127.0.0.1:8100;|' deploy/nginx/graphrt.conf >"$OUT/graphrt.conf"
cat >"$OUT/nginx.conf" <<EOF
daemon on;
$([ "$(id -u)" = 0 ] && echo "user root;")
worker_processes 1;
pid $OUT/nginx.pid;
error_log $OUT/error.log warn;
events { worker_connections 1024; }
http {
    access_log off;
    client_body_temp_path $OUT/client_body; proxy_temp_path $OUT/proxy;
    fastcgi_temp_path $OUT/fastcgi; uwsgi_temp_path $OUT/uwsgi; scgi_temp_path $OUT/scgi;
    include $OUT/graphrt.conf;
}
EOF
"$NGINX" -p "$OUT" -c "$OUT/nginx.conf" -e "$OUT/error.log"

ready() {
    "$PYTHON" -c "import sys, urllib.request; urllib.request.urlopen(sys.argv[1], timeout=2)" \
        "$1/v2/health/ready" 2>/dev/null
}
for i in $(seq 1 "$N"); do
    until ready "http://127.0.0.1:$((8100 + i))"; do
        kill -0 "${pids[$((i - 1))]}" 2>/dev/null || { cat "$OUT/replica$i.log"; exit 1; }
        sleep 0.5
    done
done
ready http://127.0.0.1:8100
echo "replicas ${pids[*]} behind nginx on :8100 (logs in $OUT)"
"$PYTHON" benchmarks/serving.py --server-url http://127.0.0.1:8100 --server-pids "${pids[@]}" \
    --model "$MODEL" --model-name bench --quiet "$@"
