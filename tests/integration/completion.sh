#!/bin/sh
# crun --print-completion bash|zsh|tcsh (torchrun 2.14's flag) prints a
# completion script made from crun's option tables. Each script is loaded by
# the real shell: bash completes every option crun's --help lists (both
# spellings) and `crun status` / `crun store` options after those words,
# files elsewhere; zsh runs its script with compadd and _files recorded
# (the words offered for a prefix); tcsh accepts its `complete` line. No
# word is offered that crun does not accept, and a shell crun does not know
# is a usage error (exit 2).
. tests/integration/lib.sh
command -v bash >/dev/null && command -v zsh >/dev/null && command -v tcsh >/dev/null ||
	skip "needs bash, zsh and tcsh (scripts/install-deps.sh installs them)"

for sh in bash zsh tcsh; do
	"$CRUN" --print-completion "$sh" >"$T/$sh" || fail "--print-completion $sh exited $?"
done
"$CRUN" --print_completion=bash | cmp -s - "$T/bash" || fail "--print_completion=bash differs from --print-completion bash"
set +e
"$CRUN" --print-completion fish >"$T/fish.out" 2>"$T/fish.err"
rc=$?
set -e
expect_eq "unknown shell: exit status" "$rc" 2
expect_grep "unknown shell: names the choices" "invalid choice 'fish' (choose from bash, zsh, tcsh)" "$T/fish.err"

# The options crun's --help lists, in every spelling it accepts.
"$CRUN" --help | grep -o -- '--[a-z][a-z0-9_-]*' | sort -u >"$T/help"
while read -r o; do
	echo "$o"
	echo "$o" | tr _ -
	echo "$o" | sed 's/^--//; s/-/_/g; s/^/--/'
done <"$T/help" | sort -u >"$T/want"

# bash: COMPREPLY for a word, after the given earlier words.
complete_bash() {
	bash -c '. "$1"; shift; COMP_WORDS=("$@"); COMP_CWORD=$(($# - 1)); _crun
		printf "%s\n" "${COMPREPLY[@]}"' _ "$T/bash" "$@"
}
bash -n "$T/bash" || fail "bash: the script does not parse"
complete_bash crun -- | sort -u >"$T/bash.all"
# (--help names a few options of crun status and crun store too.)
{ cat "$T/bash.all"; complete_bash crun status --; complete_bash crun store --; } |
	sort -u >"$T/bash.any"
comm -23 "$T/want" "$T/bash.any" | grep '^--[a-z]' >"$T/missing" || true
[ ! -s "$T/missing" ] || fail "bash: options of --help not completed: $(tr '\n' ' ' <"$T/missing")"
n=$(wc -l <"$T/bash.all")
# Every word offered is an option crun knows (its value may be refused).
while read -r o; do
	"$CRUN" --print-config "$o" 1 /bin/true >/dev/null 2>"$T/e" || true
	! grep -q -e "unrecognized argument" -e "ambiguous argument" "$T/e" ||
		fail "bash offers $o, which crun does not know: $(head -n 1 "$T/e")"
done <"$T/bash.all"
complete_bash crun --nproc | grep -qx -- --nproc_per_node || fail "bash: --nproc does not complete to --nproc_per_node"
complete_bash crun --nproc | grep -qx -- --nproc-per-node || fail "bash: --nproc does not complete to --nproc-per-node"
complete_bash crun status --stac | sort | tr '\n' ' ' >"$T/st"
expect_eq "bash: crun status --stac" "$(cat "$T/st")" "--stacks --stacks-wait --stacks_wait "
complete_bash crun store --secr | grep -qx -- --secret-file || fail "bash: crun store --secr"
complete_bash crun store --nproc | grep -q . && fail "bash: crun store offers crun's own --nproc_per_node"
complete_bash crun sta | grep -qx status || fail "bash: crun sta does not complete to status"
mkdir "$T/d" && : >"$T/d/train.py"
(cd "$T/d" && complete_bash crun --nnodes=2 tra) | grep -qx train.py || fail "bash: the script is not completed as a file"

# zsh: the script runs with compadd (keeping, as zsh does, the words that
# start with the word being completed) and _files recording what is offered.
complete_zsh() {
	zsh -f -c 'compadd() { [ "$1" = -- ] && shift
			for w; do [[ $w == ${PREFIX}* ]] && print -r -- $w; done; true; }
		_files() { print -- "<files>"; }
		f=$1; shift; words=("$@"); CURRENT=$#; PREFIX=${words[-1]}
		source "$f"' _ "$T/zsh" "$@"
}
zsh -n "$T/zsh" || fail "zsh: the script does not parse"
head -n 1 "$T/zsh" | grep -qx '#compdef crun' || fail "zsh: no #compdef line"
complete_zsh crun -- | sort -u >"$T/zsh.all"
cmp -s "$T/zsh.all" "$T/bash.all" || fail "zsh offers other options than bash: $(diff "$T/bash.all" "$T/zsh.all" | head -n 4 | tr '\n' ' ')"
complete_zsh crun status --js | grep -qx -- --json || fail "zsh: crun status --js"
complete_zsh crun status --nproc | grep -q -- --nproc && fail "zsh: crun status offers crun's own --nproc_per_node"
complete_zsh crun --nnodes=2 tra | grep -qx '<files>' || fail "zsh: the script is not completed as a file"

# tcsh: the complete line is accepted and lists every option.
tcsh -f -c "source $T/tcsh; complete crun" >"$T/tcsh.out" 2>&1 || fail "tcsh: $(head -n 2 "$T/tcsh.out")"
grep -q -- "--nproc_per_node" "$T/tcsh.out" || fail "tcsh: --nproc_per_node not in: $(head -c 200 "$T/tcsh.out")"
for o in $(cat "$T/bash.all"); do
	grep -q -e " $o[ )]" -e "($o " "$T/tcsh" || fail "tcsh: $o missing"
done
note "$n words (bash, zsh, tcsh) from crun's option tables; each known to crun"
exit 0
