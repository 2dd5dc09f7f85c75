#!/bin/sh
# A terminal resize reaches workers that write to a terminal: crun gets
# SIGWINCH from its own terminal, gives each worker's pty the new size and
# signals the worker, which then sees the new size on its stdout, as it
# would under torchrun (where workers share the launcher's terminal).
. tests/integration/lib.sh

cat >"$T/w.py" <<'EOF2'
import os, signal, sys, time
got = []
signal.signal(signal.SIGWINCH, lambda s, f: got.append(1))
c, r = os.get_terminal_size(1)
print("rank %s start %dx%d" % (os.environ["RANK"], c, r), flush=True)
deadline = time.time() + 30
while not got and time.time() < deadline:
    time.sleep(0.05)
c, r = os.get_terminal_size(1)
print("rank %s %s %dx%d" % (os.environ["RANK"], "winch" if got else "no-winch", c, r), flush=True)
EOF2

# The driver gives crun a terminal of 80x24, waits for both workers to
# start, resizes it to 132x40 (the kernel sends crun SIGWINCH) and collects
# everything crun writes until it exits.
cat >"$T/drive.py" <<'EOF2'
import fcntl, os, pty, struct, sys, termios, time
def setsize(fd, cols, rows):
    fcntl.ioctl(fd, termios.TIOCSWINSZ, struct.pack("HHHH", rows, cols, 0, 0))
pid, fd = pty.fork()
if pid == 0:
    os.execvp(sys.argv[1], sys.argv[1:])
setsize(fd, 80, 24)
out, resized = b"", False
deadline = time.time() + 60
while time.time() < deadline:
    try:
        b = os.read(fd, 4096)
    except OSError:
        break
    if not b:
        break
    out += b
    if not resized and out.count(b" start ") >= 2:
        setsize(fd, 132, 40)
        resized = True
_, st = os.waitpid(pid, 0)
sys.stdout.write(out.decode(errors="replace").replace("\r", ""))
sys.exit(os.waitstatus_to_exitcode(st))
EOF2

"$PYTHON" "$T/drive.py" "$CRUN" --standalone --nproc_per_node=2 --no_python "$PYTHON" "$T/w.py" >"$T/out" 2>&1 ||
	fail "crun under a terminal failed: $(tail -n 20 "$T/out")"
for r in 0 1; do
	expect_grep "rank $r started at the first size" "rank $r start 80x24" "$T/out"
	expect_grep "rank $r got SIGWINCH and the new size" "rank $r winch 132x40" "$T/out"
done
exit 0
