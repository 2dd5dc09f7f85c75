#!/bin/sh
# The real binary's command line: help, version, and every kind of bad input
# exits 2 with one error line naming the flag and the value.
. tests/integration/lib.sh

"$CRUN" --help >"$T/help" || fail "--help exited $?"
for g in "Worker/node size:" "Rendezvous:" "User-code launch:" "Logs:" "Lifecycle and signals:"; do
	expect_grep "help group $g" "^$g" "$T/help"
done
expect_grep "run_path says crun starts a fresh process" "always starts a fresh process" "$T/help"
"$CRUN" --version | grep -q '^crun [0-9]' || fail "--version"
# Unique prefixes are accepted, as argparse does.
"$CRUN" --vers | grep -q '^crun [0-9]' || fail "--vers"
"$CRUN" --he | grep -q '^usage: crun' || fail "--he"

# bad ARGS... EXPECTED-SUBSTRING
bad() {
	want=$1; shift
	"$CRUN" "$@" >"$T/o" 2>"$T/e"; rc=$?
	expect_eq "status of crun $*" "$rc" 2
	expect_eq "error lines of crun $*" "$(grep -c '^crun: error:' "$T/e")" 1
	grep -qF -- "$want" "$T/e" || fail "crun $*: '$want' not in: $(cat "$T/e")"
	[ ! -s "$T/o" ] || fail "crun $*: wrote to stdout"
}
bad "unrecognized argument '--bogus'" --bogus /bin/true
bad "argument --nnodes: invalid value '0'" --nnodes=0 /bin/true
bad "argument --nnodes: invalid value '3:2'" --nnodes=3:2 /bin/true
bad "argument --nnodes: invalid value '1:2:3'" --nnodes 1:2:3 /bin/true
bad "argument --nproc_per_node: invalid value 'x'" --nproc-per-node=x /bin/true
bad "argument -r/--redirects: invalid value '0:5'" -r 0:5 /bin/true
bad "argument --tee: invalid value 'a:1'" --tee=a:1 /bin/true
bad "argument --max_restarts: invalid value '-1'" --max_restarts=-1 /bin/true
bad "argument --rdzv_endpoint: invalid value 'host:99999'" --rdzv_backend=c10d --rdzv_endpoint=host:99999 /bin/true
bad "rdzv_conf: invalid value 'x' for 'join_timeout'" --rdzv_conf=colour=blue,join_timeout=x /bin/true
bad "argument --signals_to_handle: invalid value 'SIGKILL'" --signals_to_handle=SIGKILL /bin/true
PET_NNODES=zero bad "PET_NNODES: invalid value 'zero'" /bin/true
bad "training_script" --nproc_per_node=2
bad "training_script 'no-such-program-here': command not found" no-such-program-here
bad "training_script 'missing.py': no such file" missing.py
bad "not allowed with --no_python" -m --no_python mod
bad "argument --nproc_per_node: expected one value" --nproc_per_node
# The job's keys are named after --rdzv_id: 200 bytes at most, refused (not
# cut) beyond, from the command line, the environment and `crun status`.
ID200=$(printf '%0200d' 7)
bad "argument --rdzv_id: invalid value '000" --rdzv_backend=c10d --rdzv_endpoint=127.0.0.1:0 --rdzv_id="${ID200}8" /bin/true
expect_grep "length and bound named" "(201 bytes): at most 200 bytes" "$T/e"
PET_RDZV_ID="${ID200}8" bad "PET_RDZV_ID: invalid value '000" --rdzv_backend=c10d --rdzv_endpoint=127.0.0.1:0 /bin/true
"$CRUN" status --rdzv_endpoint=127.0.0.1:1 --rdzv_id="${ID200}8" >"$T/o" 2>"$T/e"
expect_eq "status of crun status with a 201-byte id" $? 2
expect_grep "crun status names the bound" "invalid --rdzv_id .* (201 bytes): at most 200 bytes" "$T/e"
# ... and an id of 200 bytes runs, whole.
"$CRUN" --nnodes=1 --nproc_per_node=1 --rdzv_backend=c10d --rdzv_endpoint=127.0.0.1:0 \
	--rdzv_id="$ID200" sh -c 'echo "$TORCHELASTIC_RUN_ID" >"$0"' "$T/runid" >"$T/o" 2>"$T/e" ||
	fail "a 200-byte --rdzv_id did not run (status $?): $(cat "$T/e")"
expect_eq "the worker's TORCHELASTIC_RUN_ID" "$(cat "$T/runid")" "$ID200"
# Where torchrun 2.x refuses a name (a log-spec plugin or an event handler it
# does not have), crun refuses it too, and before any worker starts.
bad "argument --logs_specs: invalid value 'custom'" --logs_specs=custom sh -c "touch '$T/ran'"
bad "argument --event_log_handler: invalid value 'file'" --event-log-handler=file sh -c "touch '$T/ran'"
[ ! -e "$T/ran" ] || fail "a worker started despite a refused name"

# Where torchrun is lenient, crun is: an rdzv_conf key its handlers do not
# read runs, with one line naming each such key.
"$CRUN" --standalone --rdzv_conf=colour=blue,join_timeout=30,shade=2,colour=red \
	--logs_specs=default sh -c "touch '$T/ran'" >"$T/o" 2>"$T/e" ||
	fail "unknown rdzv_conf keys refused (status $?): $(cat "$T/e")"
[ -e "$T/ran" ] || fail "the worker did not run"
expect_eq "one line per unknown key" "$(grep -c 'unknown rdzv_conf key' "$T/e")" 2
expect_grep "colour named" "argument --rdzv_conf: unknown rdzv_conf key 'colour' ignored" "$T/e"
expect_grep "shade named" "unknown rdzv_conf key 'shade' ignored" "$T/e"
exit 0
