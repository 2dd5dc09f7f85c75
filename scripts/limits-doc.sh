#!/bin/sh
# The limits tables of docs/crun.1 and README.md are generated from crun's
# option tables (src/cfg/cfg_opts.h) by `crun --print-limits=man|markdown`, between
# marker lines. `sh scripts/limits-doc.sh` rewrites both blocks (make
# limits-doc); `sh scripts/limits-doc.sh --check` changes nothing and fails,
# showing the difference, when a committed block is not what the binary
# prints (tests/integration/limits_doc.sh, in make test).
set -eu
CRUN=${CRUN:-${BUILD:-build}/crun}
check=0
[ "${1:-}" = "--check" ] && check=1
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
status=0

# block FILE BEGIN-MARKER END-MARKER FORMAT
block() {
	"$CRUN" --print-limits="$4" >"$tmp/gen"
	grep -qxF -- "$2" "$1" || { echo "$1: no line '$2'" >&2; exit 1; }
	grep -qxF -- "$3" "$1" || { echo "$1: no line '$3'" >&2; exit 1; }
	# The markers through the environment: awk -v would read "\"" as '"'.
	B=$2 E=$3 GEN=$tmp/gen awk '
		$0 == ENVIRON["E"] { skip = 0 }
		!skip { print }
		$0 == ENVIRON["B"] {
			while ((getline l < ENVIRON["GEN"]) > 0) print l
			skip = 1
		}
	' "$1" >"$tmp/new"
	if cmp -s "$1" "$tmp/new"; then
		return 0
	fi
	if [ $check = 1 ]; then
		echo "$1: the limits block differs from '$CRUN --print-limits=$4'" \
			"(run make limits-doc):" >&2
		diff -u "$1" "$tmp/new" >&2 || true
		status=1
	else
		cat "$tmp/new" >"$1"
		echo "updated the limits block of $1"
	fi
}

block docs/crun.1 '.\" limits:begin' '.\" limits:end' man
block README.md '<!-- limits:begin -->' '<!-- limits:end -->' markdown
exit $status
