"""Print torchrun's command-line flags as "NAMES|switch-or-value|SAMPLE|STATE".

usage: torchrun_flags.py run RUN_PY    flags of an installed torch/distributed/run.py,
                                       read from get_args_parser()'s add_argument
                                       calls with ast (torch is not imported)
       torchrun_flags.py list FILE     flags written down in tests/data/torchrun-2.x-flags.txt
"""
import ast, sys

# Sample values for flags whose torchrun default is not a usable value.
SAMPLES = {"--rdzv_endpoint": "127.0.0.1:29400", "--rdzv_conf": "join_timeout=5",
           "--log_dir": "/tmp", "--rdzv_id": "job", "--local_addr": "127.0.0.1"}


def from_run_py(path):
    tree = ast.parse(open(path).read())
    n = 0
    for node in ast.walk(tree):
        if not (isinstance(node, ast.Call) and getattr(node.func, "attr", "") == "add_argument"):
            continue
        names = [a.value for a in node.args if isinstance(a, ast.Constant) and str(a.value).startswith("-")]
        if not names:
            continue  # positional: training_script, training_script_args
        kw = {k.arg: k.value for k in node.keywords}
        action = ast.unparse(kw["action"]) if "action" in kw else ""
        switch = action in ("check_env", "'store_true'")
        sample = ""
        if not switch:
            long = [x for x in names if x.startswith("--")][-1]
            sample = SAMPLES.get(long.replace("-", "_").replace("__", "--", 1), "")
            if not sample and "choices" in kw:
                sample = str(ast.literal_eval(kw["choices"])[0])
            if not sample and "default" in kw:
                try:
                    d = ast.literal_eval(kw["default"])
                except ValueError:
                    d = None
                sample = "" if d is None else str(d)
            if not sample:
                sys.exit("no sample value for %s: add one to SAMPLES" % long)
        print("%s|%s|%s|" % (" ".join(names), "switch" if switch else "value", sample))
        n += 1
    if n < 15:
        sys.exit("only %d flags found in %s: not torchrun's run.py?" % (n, path))


def from_list(path):
    for line in open(path):
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        f = [x.strip() for x in line.split("|")] + ["", ""]
        print("%s|%s|%s|%s" % (f[0], f[1], f[2], f[3]))


if sys.argv[1] == "run":
    from_run_py(sys.argv[2])
else:
    from_list(sys.argv[2])
