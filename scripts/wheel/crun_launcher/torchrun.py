"""torchrun routed to crun, for tools that call torch.distributed.run in
their own process (accelerate's multi_gpu_launcher, for one), where no
binary on PATH can take torchrun's place.

Opt-in only: with CRUN_TORCHRUN=1 in the environment, the crun_launcher.pth
hook that the wheel installs makes `import torch.distributed.run` give a
module whose run() and main() start crun with the same arguments (so does
the `torchrun` script, which calls main()). Without it, nothing of torch is
touched. `python -m torch.distributed.run` runs torch's own file as
__main__ and stays torchrun.

    CRUN_TORCHRUN=1 accelerate launch --multi_gpu --num_processes 2 train.py

crun runs as a child with the caller's environment (SIGTERM and SIGHUP sent
to the caller are passed on to it; Ctrl-C reaches it from the terminal); a
failure of the job ends the caller with crun's exit status (SystemExit), as
torchrun's ChildFailedError ends `torchrun`.
"""
import signal
import subprocess
import sys

from crun_launcher import binary

__all__ = ["argv_of", "install", "run", "main"]


def argv_of(args, parser):
    """The command line that gives `args` (a Namespace from torchrun's own
    parser, possibly edited by a tool) back: every option whose value is
    not its default, then the script and its arguments."""
    out = []
    for a in parser._actions:
        if not a.option_strings or a.dest in ("help", "training_script",
                                              "training_script_args"):
            continue
        v = getattr(args, a.dest, a.default)
        if v == a.default:
            continue
        opt = next((o for o in a.option_strings if o.startswith("--")),
                   a.option_strings[0])
        if a.nargs == 0:  # a flag (store_true, or torchrun's check_env)
            if v:
                out.append(opt)
            continue
        out.append("%s=%s" % (opt, v))
    return out + [args.training_script] + list(args.training_script_args)


def _crun(argv):
    """Run crun with argv; raise SystemExit with its status if it failed."""
    p = subprocess.Popen([binary()] + argv)
    # (Windows has no SIGHUP; its Ctrl-C reaches crun through the console)
    fwd = tuple(getattr(signal, n) for n in ("SIGTERM", "SIGHUP")
                if hasattr(signal, n))
    old = {}
    try:
        for s in fwd:
            old[s] = signal.signal(s, lambda sig, _f: p.send_signal(sig))
    except ValueError:  # not the main thread: nothing to pass on from here
        pass
    try:
        rc = p.wait()
    finally:
        for s, h in old.items():
            signal.signal(s, h)
    if rc != 0:
        raise SystemExit(rc if rc > 0 else 128 - rc)


def run(args, parser=None):
    """torch.distributed.run.run(args), by crun."""
    if parser is None:
        import torch.distributed.run as tdr
        parser = tdr.get_args_parser()
    _crun(argv_of(args, parser))


def main(args=None):
    """torch.distributed.run.main(argv), by crun: the arguments are not
    parsed here (crun reads every torchrun spelling itself)."""
    _crun(list(sys.argv[1:] if args is None else args))


def install(module):
    """Route a loaded torch.distributed.run module's run() and main(), with
    one line on stderr; without a crun executable, leave torch's alone."""
    try:
        exe = binary()
    except FileNotFoundError as e:
        sys.stderr.write("%s; CRUN_TORCHRUN=1 ignored, torchrun it is\n" % e)
        return
    module.run = lambda args: run(args, module.get_args_parser())
    module.main = main
    sys.stderr.write("crun_launcher: torch.distributed.run routed to %s "
                     "(CRUN_TORCHRUN=1)\n" % exe)
