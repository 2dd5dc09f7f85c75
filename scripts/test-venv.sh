#!/bin/sh
# Make, idempotently, the test virtual environment .venv/ at the repository
# root from tests/requirements.txt (PyTorch 2.13, next to Debian's 1.13) and
# tests/requirements-frameworks.txt (Lightning, accelerate, clang-format). Every
# package is pinned there and installed with --no-deps, then `pip check` makes
# sure the pins are complete. The stamp .venv/.requirements.sha256 holds the
# hash of the requirements the venv was made from, written once torch imported:
# when it matches, this is a no-op. Called by make test (and so make asan).
# TEST_VENV_PYTHON names the base interpreter (default /usr/bin/python3).
#
#   scripts/test-venv.sh [VENV REQUIREMENTS...]
#
# makes another venv the same way: make test-venv also makes .venv-214/ from
# tests/requirements-torch214.txt (the reference torchrun 2.14).
set -eu
cd "$(dirname "$0")/.."
VENV=.venv
REQ="tests/requirements.txt tests/requirements-frameworks.txt"
if [ $# -ge 2 ]; then
	VENV=$1
	shift
	REQ="$*"
fi
BASE=${TEST_VENV_PYTHON:-/usr/bin/python3}
STAMP=$VENV/.requirements.sha256
# shellcheck disable=SC2086
want=$(cat $REQ | sha256sum | cut -d' ' -f1)
[ -x "$VENV/bin/python" ] && [ "$(cat "$STAMP" 2>/dev/null)" = "$want" ] && exit 0
echo "test-venv: making $VENV from $REQ (base $BASE)"
rm -f "$STAMP"
if [ ! -x "$VENV/bin/python" ]; then
	"$BASE" -m venv "$VENV" || {
		echo "test-venv: '$BASE -m venv' failed (Debian: apt-get install python3-venv)" >&2
		exit 1
	}
fi
# shellcheck disable=SC2086
"$VENV/bin/python" -m pip install -q --no-deps --disable-pip-version-check $(printf -- '-r %s ' $REQ)
"$VENV/bin/python" -m pip check
"$VENV/bin/python" -c 'import torch.distributed; print("test-venv: torch", torch.__version__)'
echo "$want" >"$STAMP"
