#!/bin/sh
# /healthz and /metrics: two agents of a loopback c10d job
# (--nnodes=1:2, two workers each, --max_restarts=1) serve metrics on ports
# of their choosing (--metrics_port=0), which they print and log as an
# event. A real Prometheus scrapes both, and its HTTP API must show what
# happened:
#   generation 0: rank 3 exits 7 while the others ignore SIGTERM, so both
#     agents sit in "failed" until SIGKILL (--shutdown_timeout): /healthz
#     must answer 503 there, with the state in its JSON;
#   generation 1 (one restart spent): world size 4, group ranks 0 and 1,
#     restarts 1 and 0 left, the failure's exit code 7 on one node only,
#     workers running, the store host's operations counted; /healthz 200;
#     promtool check metrics accepts both agents' output;
#   hostile clients: 200 connections to one agent, idle or sending garbage
#     or oversized headers; the agent holds at most --metrics_max_conns of
#     them, closes the idle ones after --metrics_idle_timeout, /healthz
#     answers again while the flood's sockets are still open, and the job
#     is untouched (same generation, no node lost); 32 clients that dribble
#     one header byte a second are closed after --metrics_idle_timeout all
#     the same, and /healthz answers;
#   generation 2: agent b is killed (-9); a re-forms alone without spending
#     a restart: a node loss, group world size 1.
. tests/integration/lib.sh

command -v prometheus >/dev/null || skip "no prometheus (apt install prometheus)"
command -v promtool >/dev/null || skip "no promtool (apt install prometheus)"

# --- the option's spellings, the job-file key and bad values -------------
metrics_line() { grep -qs '^crun: metrics on http://127\.0\.0\.1:[0-9]*/metrics, health on http://127\.0\.0\.1:[0-9]*/healthz$' "$1"; }
"$CRUN" --metrics-port=0 --metrics_addr=127.0.0.1 "$FAKE_WORKER" exit 0 >"$T/dash.out" 2>&1 ||
	fail "--metrics-port: $(cat "$T/dash.out")"
metrics_line "$T/dash.out" || fail "--metrics-port printed no URL: $(cat "$T/dash.out")"
CRUN_METRICS_PORT=0 CRUN_METRICS_ADDR=127.0.0.1 "$CRUN" "$FAKE_WORKER" exit 0 >"$T/env.out" 2>&1 ||
	fail "CRUN_METRICS_PORT: $(cat "$T/env.out")"
metrics_line "$T/env.out" || fail "CRUN_METRICS_PORT printed no URL: $(cat "$T/env.out")"
printf '[job]\nentrypoint = %s\nargs = exit 0\n[logs]\nmetrics_port = 0\nmetrics_addr = 127.0.0.1\n' \
	"$FAKE_WORKER" >"$T/job.ini"
"$CRUN" "$T/job.ini" >"$T/ini.out" 2>&1 || fail "job file: $(cat "$T/ini.out")"
metrics_line "$T/ini.out" || fail "the job file's metrics_port printed no URL: $(cat "$T/ini.out")"
"$CRUN" "$FAKE_WORKER" exit 0 >"$T/off.out" 2>&1 || fail "no metrics: $(cat "$T/off.out")"
expect_nogrep "metrics off by default" 'metrics on' "$T/off.out"
for bad in "--metrics_port=x" "--metrics_port=65536" "--metrics_addr=localhost" \
	"--metrics_max_conns=0" "--metrics_idle_timeout=0"; do
	"$CRUN" --metrics_port=0 $bad "$FAKE_WORKER" exit 0 >"$T/bad.out" 2>&1
	expect_eq "exit status of $bad" "$?" 2
	expect_grep "$bad named" "argument ${bad%%=*}: invalid value" "$T/bad.out"
done
# A port that is taken: one line naming it, exit 1, no worker started.
BUSY=$(free_port)
"$PYTHON" -c 'import socket, sys, time
s = socket.socket(); s.bind(("127.0.0.1", int(sys.argv[1]))); s.listen(1)
open(sys.argv[2], "w").close(); time.sleep(30)' "$BUSY" "$T/busy.ready" &
HOLD=$!
at_exit "kill -9 $HOLD 2>/dev/null"
wait_for 10 test -f "$T/busy.ready" || fail "cannot hold a port"
"$CRUN" --metrics_port=$BUSY --metrics_addr=127.0.0.1 "$FAKE_WORKER" append "$T/ran" x exit 0 >"$T/busy.out" 2>&1
expect_eq "exit status with the metrics port taken" "$?" 1
expect_grep "busy port named" "cannot serve metrics on '127.0.0.1:$BUSY': Address already in use" "$T/busy.out"
[ ! -e "$T/ran" ] || fail "a worker ran although the metrics port was taken"
kill -9 $HOLD 2>/dev/null
note "options: --metrics-port, CRUN_METRICS_PORT, [logs] metrics_port, bad values, a busy port"

PORT=$(free_port)
# Every rank ignores SIGTERM before rank 3 fails (the pids file is their
# barrier): a rank not yet there would die at once and leave no stop window.
W="$FAKE_WORKER ignore TERM pid $T/pids wait-lines $T/pids 4 fail-if 3 0 7 hang-if-attempt 0 trap $T/trap hang"
agent() { # NAME
	"$CRUN" --nnodes=1:2 --nproc_per_node=2 --max_restarts=1 --rdzv_backend=c10d \
		--rdzv_endpoint=127.0.0.1:$PORT --rdzv_id=met$$ \
		--rdzv_conf=last_call_timeout=20,join_timeout=60 --shutdown_timeout=8 \
		--metrics_port=0 --metrics_addr=127.0.0.1 --metrics_idle_timeout=2 \
		--event_log="$T/ev.$1" $W >"$T/$1.out" 2>&1 &
	eval "pid_$1=\$!"
}
at_exit 'kill -9 $pid_a $pid_b 2>/dev/null; [ -f $T/pids ] && kill -9 $(cat $T/pids) 2>/dev/null'
# The one line each agent prints, with the port it chose.
url_of() { sed -n 's|^crun: metrics on \(http://[^ ]*\)/metrics, .*|\1|p' "$T/$1.out" | head -n 1; }
# code URL: the status of a GET (000: no answer), its body in $T/body.
code() {
	"$PYTHON" -c 'import sys, urllib.request, urllib.error
try:
    r = urllib.request.urlopen(sys.argv[1], timeout=5)
    c, b = r.status, r.read()
except urllib.error.HTTPError as e:
    c, b = e.code, e.read()
except Exception:
    c, b = 0, b""
open(sys.argv[2], "wb").write(b)
print("%03d" % c)' "$1" "$T/body" 2>/dev/null
}
is_code() { [ "$(code "$1")" = "$2" ]; }

agent a
wait_for 10 listening "$PORT" || { cat "$T/a.out"; fail "no store host"; }
wait_for 10 grep -qs 'crun: metrics on http' "$T/a.out" || { cat "$T/a.out"; fail "a never said where its metrics are"; }
UA=$(url_of a)
# Alone, a waits in the rendezvous (last_call_timeout=20 s): healthy.
expect_eq "healthz code of a in the rendezvous" "$(code "$UA/healthz")" 200
grep -q '"status":"rendezvous","healthy":true' "$T/body" || fail "rendezvous body: $(cat "$T/body")"
agent b
wait_for 10 grep -qs 'crun: metrics on http' "$T/b.out" || { cat "$T/b.out"; fail "b never said where its metrics are"; }
UB=$(url_of b)
note "agent a: $UA, agent b: $UB; healthz 200 in the rendezvous"
for n in a b; do
	expect_grep "metrics event of $n" '"name":"crun.metrics.listening"' "$T/ev.$n"
done

# --- generation 0: both agents "failed" while the workers ignore SIGTERM ---
# Both stop at once, for the same shutdown_timeout: each is asked in turn
# until each has answered 503 (one after the other could miss the second's
# window on a slow machine), keeping the body of that answer.
stopping() {
	for _x in a b; do
		[ -f "$T/503.$_x" ] && continue
		eval "_u=\$U$(echo $_x | tr ab AB)"
		is_code "$_u/healthz" 503 && cp "$T/body" "$T/503.$_x"
	done
	[ -f "$T/503.a" ] && [ -f "$T/503.b" ]
}
wait_for 30 stopping || { cat "$T"/*.out; fail "healthz never answered 503 while stopping (a: $([ -f "$T/503.a" ] && echo yes || echo no), b: $([ -f "$T/503.b" ] && echo yes || echo no))"; }
for x in a b; do
	grep -q '"status":"failed","healthy":false,"reason":"worker failed"' "$T/503.$x" ||
		{ cat "$T"/*.out "$T"/ev.*; fail "503 body of $x: $(cat "$T/503.$x")"; }
done
note "healthz 503 on both agents while the failed group stops"

# --- generation 1: running again ------------------------------------------
gen1() { code "$1/healthz" >/dev/null; grep -q '"status":"running","healthy":true.*"generation":1' "$T/body"; }
for u in "$UA" "$UB"; do
	wait_for 40 gen1 "$u" || { cat "$T"/*.out; fail "$u never reported generation 1 running"; }
	expect_eq "healthz code running" "$(code "$u/healthz")" 200
done

# promtool lints the exposition of each agent.
for u in "$UA" "$UB"; do
	expect_eq "scrape of $u" "$(code "$u/metrics")" 200
	cp "$T/body" "$T/scrape"
	promtool check metrics <"$T/scrape" >"$T/lint" 2>&1 || { cat "$T/lint"; fail "promtool check metrics on $u"; }
	grep -q '^crun_world_size 4$' "$T/scrape" || fail "$u: no crun_world_size 4"
done
note "promtool check metrics: both agents clean"

# --- a real Prometheus scraping both --------------------------------------
mkdir -p "$T/tsdb"
cat >"$T/prom.yml" <<EOF
global:
  scrape_interval: 1s
  scrape_timeout: 1s
scrape_configs:
  - job_name: a
    static_configs: [{targets: ['${UA#http://}']}]
  - job_name: b
    static_configs: [{targets: ['${UB#http://}']}]
EOF
PP="" PROM=""
prom_ready() { is_code "http://127.0.0.1:$1/-/ready" 200 || ! kill -0 $PROM 2>/dev/null; }
for try in 1 2 3 4 5; do
	p=$(( 20000 + $(od -An -N2 -tu2 /dev/urandom) % 12000 ))
	listening "$p" && continue
	prometheus --config.file="$T/prom.yml" --storage.tsdb.path="$T/tsdb" \
		--web.listen-address="127.0.0.1:$p" >"$T/prom.log" 2>&1 &
	PROM=$!
	at_exit "kill -9 $PROM 2>/dev/null"
	if wait_for 30 prom_ready "$p"
	then
		kill -0 $PROM 2>/dev/null && { PP=$p; break; }
	fi
	kill -9 $PROM 2>/dev/null; wait $PROM 2>/dev/null
	grep -q 'address already in use' "$T/prom.log" || { tail "$T/prom.log"; fail "prometheus did not start"; }
done
[ -n "$PP" ] || fail "no free port for prometheus after 5 tries"
note "prometheus on 127.0.0.1:$PP"

# q QUERY: the instant vector as sorted "job=value" words.
q() {
	"$PYTHON" -c 'import json, sys, urllib.parse, urllib.request
u = sys.argv[1] + "/api/v1/query?" + urllib.parse.urlencode({"query": sys.argv[2]})
r = json.load(urllib.request.urlopen(u, timeout=5))["data"]["result"]
print(" ".join(sorted(x["metric"].get("job", "") + "=" + x["value"][1] for x in r)))' \
		"http://127.0.0.1:$PP" "$1" 2>/dev/null
}
# check WHAT QUERY PATTERN: Prometheus's answer matches the (case) PATTERN
# within 20 s (scrapes land every second).
QLAST=""
check() {
	_i=0
	while [ $_i -lt 100 ]; do
		QLAST=$(q "$2")
		case "$QLAST" in $3) return 0 ;; esac
		sleep 0.2; _i=$((_i+1))
	done
	fail "$1: prometheus says '$QLAST' for $2, want '$3'"
}
check "both scraped" 'up' "a=1 b=1"
check "world size" 'crun_world_size' "a=4 b=4"
check "group world size" 'crun_group_world_size' "a=2 b=2"
check "group ranks 0 and 1" 'sum(crun_group_rank)' "=1"
check "group rank 0" 'count(crun_group_rank == 0)' "=1"
check "group rank 1" 'count(crun_group_rank == 1)' "=1"
check "generation" 'crun_rdzv_generation' "a=1 b=1"
check "restarts used" 'crun_restarts_total' "a=1 b=1"
check "restarts left" 'crun_restarts_left' "a=0 b=0"
check "running workers" 'crun_workers{state="running"}' "a=2 b=2"
check "healthy" 'crun_agent_healthy' "a=1 b=1"
check "state" 'crun_agent_state{state="running"}' "a=1 b=1"
check "one node saw the failure" 'sum(crun_worker_failures_total)' "=1"
check "its exit code, known on both nodes" 'crun_last_failure_exit_code' "a=7 b=7"
check "a recent failure" 'max(crun_last_failure_age_seconds) < bool 120' "=1"
check "no node lost" 'crun_node_losses_total' "a=0 b=0"
check "the store host is a" 'count by (job) (crun_store_keys{store="rendezvous"})' "a=1"
check "its operations counted" 'sum(crun_store_operations_total{store="rendezvous"}) > bool 10' "=1"
check "compare_set among them" 'crun_store_operations_total{store="rendezvous",op="compare_set"} > bool 0' "a=1"
check "the workers' store on group rank 0" 'crun_group_rank and on(job) crun_store_keys{store="workers"}' "[ab]=0"
note "prometheus: world size, ranks, restarts, failure and store series as expected"

# --- hostile clients --------------------------------------------------------
HA=${UA#http://}
fds() { ls /proc/$pid_a/fd 2>/dev/null | wc -l; }
FD0=$(fds)
"$PYTHON" - "${HA%:*}" "${HA##*:}" "$T" >"$T/flood.out" 2>&1 <<'PY' &
import socket, sys, time
host, port, T = sys.argv[1], int(sys.argv[2]), sys.argv[3]
socks = []
for i in range(200):
    s = socket.socket()
    s.settimeout(5)
    try:
        s.connect((host, port))
    except OSError as e:
        print("connect", i, e); continue
    try:
        if i % 4 == 1:
            s.sendall(b"\x00\xff garbage \r\n\r\n")
        elif i % 4 == 2:
            s.sendall(b"GET /metrics HTTP/1.1\r\nX: " + b"A" * 65536 + b"\r\n\r\n")
        elif i % 4 == 3:
            s.sendall(b"GET /metrics HTTP/1.1\r\nHost: x\r\n")  # never ends
    except OSError:
        pass
    socks.append(s)
open(T + "/flood.ready", "w").close()
# Hold every socket open until the test is done (bounded).
end = time.time() + 60
while time.time() < end and not __import__("os").path.exists(T + "/flood.done"):
    time.sleep(0.1)
# Then wait (bounded) for the server to have closed every one of them.
def closed_count():
    n = 0
    for s in socks:
        s.setblocking(False)
        try:
            while True:
                d = s.recv(1 << 20)
                if d == b"":
                    n += 1
                    break
        except BlockingIOError:
            pass
        except OSError:
            n += 1
    return n
t0 = time.time()
while time.time() < t0 + 40 and closed_count() < len(socks):
    time.sleep(0.2)
print("held", len(socks), "closed by the server", closed_count(),
      "in %.1f s" % (time.time() - t0))
PY
FLOOD=$!
at_exit "touch $T/flood.done; kill -9 $FLOOD 2>/dev/null"
wait_for 30 test -f "$T/flood.ready" || { cat "$T/flood.out"; fail "the flood never connected"; }
FDMAX=$(fds)
T0=$(now_ms)
wait_for 20 is_code "$UA/healthz" 200 || fail "healthz of a never answered during the flood"
note "healthz answered $(( $(now_ms) - T0 )) ms after the flood connected (idle timeout 2 s)"
[ "$FDMAX" -le $(( FD0 + 32 + 8 )) ] || fail "agent a holds $FDMAX fds with the flood (was $FD0; limit 32 connections)"
note "agent a's fds: $FD0 before, $FDMAX with 200 hostile connections"
kill -0 "$pid_a" || fail "agent a died"
kill -0 "$pid_b" || fail "agent b died"
check "job untouched by the flood" 'crun_rdzv_generation' "a=1 b=1"
check "no node lost in the flood" 'crun_node_losses_total' "a=0 b=0"
check "workers still running" 'crun_workers{state="running"}' "a=2 b=2"
touch "$T/flood.done"
wait_pid 60 "$FLOOD" "$T/flood.out"
note "$(tail -n 1 "$T/flood.out")"
grep -q 'held 200 closed by the server 200 ' "$T/flood.out" || fail "flood: $(tail -n 3 "$T/flood.out")"

# --- dribblers: 32 clients (the default cap), one header byte
# a second each, which restarts libmicrohttpd's own timeout every time: each
# must be closed once its request has not come in whole in idle_timeout
# (2 s), and /healthz must answer again.
"$PYTHON" - "${HA%:*}" "${HA##*:}" >"$T/dribble.out" 2>&1 <<'PY'
import socket, sys, time
host, port = sys.argv[1], int(sys.argv[2])
req = b"GET /healthz HTTP/1.1\r\nX-Slow: " + b"a" * 64
socks = [socket.create_connection((host, port), timeout=5) for _ in range(32)]
for s in socks:
    s.setblocking(False)
t0, sent, open_ = time.time(), 0, list(socks)
while open_ and time.time() < t0 + 12:
    still = []
    for s in open_:
        try:
            if s.recv(4096) == b"":
                continue
        except BlockingIOError:
            pass
        except OSError:
            continue
        try:
            s.send(req[sent:sent + 1])
        except OSError:
            continue
        still.append(s)
    open_, sent = still, sent + 1
    time.sleep(1)
print("dribblers 32 closed by the server %d in %.1f s" % (32 - len(open_), time.time() - t0))
PY
note "$(tail -n 1 "$T/dribble.out")"
grep -q 'dribblers 32 closed by the server 32 ' "$T/dribble.out" || fail "dribblers: $(tail -n 3 "$T/dribble.out")"
wait_for 10 is_code "$UA/healthz" 200 || fail "healthz of a unreachable after the dribblers"

# --- a node loss: b killed, a re-forms alone ------------------------------
kill -9 "$pid_b"
wait $pid_b 2>/dev/null
check "node loss counted" 'crun_node_losses_total{job="a"}' "a=1"
check "a alone" 'crun_group_world_size{job="a"}' "a=1"
check "a's world" 'crun_world_size{job="a"}' "a=2"
check "a's generation" 'crun_rdzv_generation{job="a"}' "a=2"
check "no restart spent" 'crun_restarts_total{job="a"}' "a=1"
check "b is down" 'up{job="b"}' "b=0"
note "prometheus: node loss on a, group of one"

kill -TERM "$pid_a"
wait_pid 30 "$pid_a" "$T/a.out" || true
exited "$pid_a" || fail "agent a did not exit"
# Nothing serves after the agent is gone.
is_code "$UA/healthz" 000 || fail "a's metrics port still answers after exit"
