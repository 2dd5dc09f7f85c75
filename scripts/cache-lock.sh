# Sourced by scripts/debian-source.sh and scripts/debian-sysroot.sh: their
# shared cache folder and its lock.
#
#   CACHE              $CRUN_SOURCES, else /var/cache/crun-sources as root,
#                      else ~/.cache/crun-sources
#   cached_or_lock DIR MARKER
#                      print DIR and exit 0 when DIR/MARKER says it is
#                      complete; else take the lock of DIR (held until the
#                      script exits: a second run waits, then finds it done)
if [ -n "${CRUN_SOURCES:-}" ]; then CACHE=$CRUN_SOURCES
elif [ "$(id -u)" -eq 0 ]; then CACHE=/var/cache/crun-sources
else CACHE=${XDG_CACHE_HOME:-$HOME/.cache}/crun-sources; fi

cached_or_lock() {
	[ -f "$1/$2" ] && { echo "$1"; exit 0; }
	mkdir -p "$CACHE"
	exec 9>"$CACHE/.$(basename "$1").lock"
	flock 9
	[ -f "$1/$2" ] && { echo "$1"; exit 0; }
	return 0
}
