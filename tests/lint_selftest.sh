#!/bin/sh
# Each check of tests/lint.py fails on a planted offender: a scratch tree
# that passes the lint, then one offence at a time (and an allowlist entry
# that offends nothing), each run expected to fail and to name the check
# and the file:line; the allowlist and the long-file marker must make the
# same offence pass.
set -u
LINT="python3 $(cd "$(dirname "$0")" && pwd)/lint.py"
T=$(mktemp -d "${TMPDIR:-/tmp}/lint-selftest.XXXXXX") || exit 1
trap 'rm -rf "$T"' EXIT INT TERM
fails=0
say() { printf 'lint self-test: %s\n' "$*"; }

# clean: a tree with a library module, an agent of two files, a launcher.
clean() {
	rm -rf "$T/tree" && mkdir -p "$T/tree/src" "$T/tree/include/crun" \
		"$T/tree/agent" "$T/tree/launcher" "$T/tree/tests"
	cd "$T/tree" || exit 1
	: >tests/lint.allow
	printf 'int a_get(void);\n' >include/crun/a.h
	printf 'int b_get(void);\n' >include/crun/b.h
	printf '#include "crun/a.h"\n#include "crun/b.h"\n\nint a_get(void)\n{\n\treturn b_get();\n}\n' >src/a.c
	printf '#include "crun/b.h"\n\nint b_get(void)\n{\n\treturn 1;\n}\n' >src/b.c
	printf 'int agent_run(void);\nint worker_go(int (*cb)(void));\n' >agent/agent.h
	printf 'int worker_go(int (*cb)(void));\n' >agent/worker.h
	printf '#include "agent.h"\n#include "worker.h"\n\nstatic int up(void)\n{\n\treturn 0;\n}\n\nint agent_run(void)\n{\n\treturn worker_go(up);\n}\n' >agent/agent.c
	printf '#include "worker.h"\n\nint worker_go(int (*cb)(void))\n{\n\treturn cb();\n}\n' >agent/worker.c
	printf 'int agent_run(void);\n\nint main(void)\n{\n\treturn agent_run();\n}\n' >launcher/main.c
}
# lines N: N numbered statement lines.
lines() {
	i=0
	while [ "$i" -lt "$1" ]; do i=$((i + 1)); printf '\tx += %d;\n' "$i"; done
}
# expect_pass WHAT / expect_fail WHAT PATTERN: run the lint on the tree.
expect_pass() {
	if $LINT --root "$T/tree" >"$T/out" 2>&1; then say "ok: $1 passes"
	else fails=$((fails + 1)); say "FAILED: $1 should pass:"; cat "$T/out"; fi
}
expect_fail() {
	if $LINT --root "$T/tree" >"$T/out" 2>&1; then
		fails=$((fails + 1)); say "FAILED: $1 passed the lint:"; cat "$T/out"
	elif grep -q "$2" "$T/out"; then say "ok: $1 fails ($(grep -m1 "$2" "$T/out"))"
	else fails=$((fails + 1)); say "FAILED: $1 failed without '$2':"; cat "$T/out"; fi
}

clean
expect_pass "the clean tree"

clean
printf '#include "../agent/agent.h"\n' >>launcher/main.c
expect_fail "launcher/ including ../agent/agent.h" "agent-header launcher/main.c:7:"
echo 'agent-header launcher/main.c  # planted' >tests/lint.allow
expect_pass "the same, allowlisted"

clean
printf '#include <agent/agent.h>\n' >>src/b.c
expect_fail "src/ including <agent/agent.h>" "agent-header src/b.c:7:"

clean
printf '# include "agent.h"\n' >>agent/worker.c
expect_fail "a leaf agent file including agent.h" "agent-header agent/worker.c:7:"

clean
printf '#include <stdio.h>\n\nvoid b_say(void)\n{\n\tfprintf(stderr, "x\\n");\n}\n' >>src/b.c
expect_fail "fprintf(stderr in src/" "stderr src/b.c:11:"

clean
printf '\nstatic void w_say(void)\n{\n\tfputs("x\\n", stderr);\n}\n' >>agent/worker.c
expect_fail "fputs(..., stderr) in agent/" "stderr agent/worker.c:10:"

clean
{ printf '#include "crun/b.h"\n'; lines 1200; } >src/b_big.c
expect_fail "a 1,201-line file" "long-file src/b_big.c:1:"
{ printf '/*\n * Why this file is long: a planted table.\n */\n'; lines 1200; } >src/b_big.c
expect_pass "the same file saying why at its top"

# long_function N: append a function of exactly N lines (signature to "}").
long_function() {
	{ printf '\nint b_long(void)\n{\n\tint x = 0;\n'; lines $(($1 - 5)); printf '\treturn x;\n}\n'; } >>src/b.c
}
clean
long_function 150
expect_pass "a 150-line function"
clean
long_function 151
expect_fail "a 151-line function" "long-function src/b.c:8: b_long is 151 lines"
echo 'long-function src/b.c:b_long  # planted' >tests/lint.allow
expect_pass "the same, allowlisted"

clean
printf '\nstatic int b_broken(void)\n{\n\treturn 0;\n' >>src/b.c
expect_fail "a body never closed" "parse src/b.c:"

clean
# b.c calls back into a.c through a.h: a <-> b.
printf '#include "crun/a.h"\n\nint b_back(void)\n{\n\treturn a_get();\n}\n' >>src/b.c
expect_fail "src/a.c <-> src/b.c" "include-circle src/b.c:7: depends on src/a.c"
expect_fail "src/a.c <-> src/b.c (the other way)" "include-circle src/a.c:2: depends on src/b.c"

clean
# Three files in a ring through one shared header (the cfg.c/cfg_ini.c way).
printf 'int c_one(void);\nint c_two(void);\nint c_three(void);\n' >include/crun/c.h
printf '#include "crun/c.h"\n\nint c_one(void)\n{\n\treturn c_two();\n}\n' >src/c.c
printf '#include "crun/c.h"\n\nint c_two(void)\n{\n\treturn c_three();\n}\n' >src/c_two.c
printf '#include "crun/c.h"\n\nint c_three(void)\n{\n\treturn c_one();\n}\n' >src/c_three.c
expect_fail "a ring of three through one header" "include-circle src/c_three.c:1: depends on src/c.c"
# ... and through a module__ helper of a module not in SPLIT_MODULES.
sed -i 's/c_one/c__one/g' include/crun/c.h src/c.c src/c_three.c
expect_fail "the same ring through a c__ helper" "include-circle src/c_three.c:1: depends on src/c.c"
# No module is exempt: the rendezvous' rdzv__ helpers are followed too.
sed -i "s/c__one/rdzv__one/g" include/crun/c.h src/c.c src/c_three.c
expect_fail "the same ring through a rdzv__ helper" "include-circle src/c_three.c:1: depends on src/c.c"

clean
# A part of the agent naming the agent's own struct.
printf '
struct agent;
int worker_of(struct agent *a);
' >>agent/worker.h
expect_fail "agent/worker.h naming struct agent" "agent-struct agent/worker.h:3:"
printf 'struct agent_stop;
' >agent/worker.h
expect_pass "struct agent_stop, another struct"

clean
# The agent calling a leaf that calls back up through agent.h.
printf '#include "agent.h"\n' >>agent/worker.c
printf '\nint worker_up(void)\n{\n\treturn agent_run();\n}\n' >>agent/worker.c
echo 'agent-header agent/worker.c  # planted' >tests/lint.allow
expect_fail "agent/agent.c <-> agent/worker.c" "include-circle agent/worker.c:7: depends on agent/agent.c"

clean
# A mention in a comment or a string is not a call.
printf '\n/* b_get() would loop: a_get() */\nint b_name(void)\n{\n\treturn (int)sizeof("a_get()");\n}\n' >>src/b.c
expect_pass "a_get named only in a comment and a string"

clean
printf '/* As decided in an earlier session. */\n' >>src/b.c
expect_fail "a comment about how the code was written" "history src/b.c:7:"
clean
printf '# see spec/store.md\n' >tests/notes.sh
expect_fail "a pointer to notes outside the tree" "history tests/notes.sh:1:"
clean
printf '/* a session of its own (setsid) */\n' >>src/b.c
expect_pass "a process session"

clean
: >leak-0123abcd
expect_fail "a libFuzzer artifact at the root" "artifact leak-0123abcd"

clean
echo 'stderr src/a.c  # offends nothing' >tests/lint.allow
expect_fail "an allowlist entry that offends nothing" "no longer offends"
echo 'stderr src/a.c' >tests/lint.allow
expect_fail "an allowlist entry without a reason" "want .check key"

[ "$fails" -eq 0 ] || { say "$fails FAILED"; exit 1; }
say "all checks fail on their planted offender"
