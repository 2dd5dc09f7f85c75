"""crun, a torchrun-compatible elastic launcher, as a native program.

The wheel installs the `crun` executable in the environment's bin/ (on
Windows `crun.exe` in Scripts\\); this package finds it for `python -m
crun_launcher` and for the opt-in torchrun routing of crun_launcher.torchrun.
"""
import os
import shutil
import subprocess
import sys

EXE = "crun.exe" if os.name == "nt" else "crun"

__all__ = ["binary", "main"]


def binary():
    """The path of the crun executable this package installed."""
    try:
        from importlib.metadata import files
        for f in files("crun-launcher") or ():
            if f.name == EXE and f.parent.name.lower() in ("bin", "scripts"):
                p = str(f.locate())
                if os.access(p, os.X_OK):
                    return os.path.abspath(p)
    except Exception:  # metadata unreadable: fall back to the environment
        pass
    p = os.path.join(os.path.dirname(sys.executable), EXE)
    if os.access(p, os.X_OK):
        return p
    p = shutil.which("crun")
    if p:
        return p
    raise FileNotFoundError("crun_launcher: the crun executable is not installed "
                            "(pip install crun-launcher)")


def main(argv=None):
    """Run crun with argv (default sys.argv[1:]) in this process's place
    (on Windows, whose exec starts a new process and returns at once: as a
    child, exiting with its status)."""
    args = list(sys.argv[1:] if argv is None else argv)
    exe = binary()
    if os.name == "nt":
        sys.exit(subprocess.call([exe] + args))
    os.execv(exe, [exe] + args)
