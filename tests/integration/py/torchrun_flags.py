"""Print the command-line flags of the torchrun that runs this file (the
installed torch.distributed.run), read from its own argument parser, as
"NAMES|switch-or-value|SAMPLE" lines, one per flag:

    $PYTHON tests/integration/py/torchrun_flags.py
"""
import sys

from torch.distributed.run import get_args_parser

# Sample values for flags whose torchrun default is not a usable value.
SAMPLES = {"--rdzv_endpoint": "127.0.0.1:29400", "--rdzv_conf": "join_timeout=5",
           "--log_dir": "/tmp", "--rdzv_id": "job", "--local_addr": "127.0.0.1",
           "--logs_specs": "default", "--master_addr": "127.0.0.1",
           "--local_ranks_filter": "0", "--numa_binding": "node",
           "--duplicate_stdout_filters": "loss", "--duplicate_stderr_filters": "warn",
           "--signals_to_handle": "SIGTERM", "--master_port": "29500",
           "--log_line_prefix_template": "[${rank}]:"}

n = 0
for a in get_args_parser()._actions:
    names = [x for x in a.option_strings]
    if not names or "--help" in names:
        continue  # positional (training_script, its args) or argparse's own
    switch = a.nargs == 0
    sample = ""
    if not switch:
        long = [x for x in names if x.startswith("--")][-1]
        sample = SAMPLES.get(long.replace("-", "_").replace("__", "--", 1), "")
        if not sample and a.choices:
            sample = str(list(a.choices)[0])
        if not sample and a.default is not None:
            sample = str(a.default)
        if not sample and a.type in (int, float):
            sample = "1"
        if not sample:
            sys.exit("no sample value for %s: add one to SAMPLES" % long)
    print("%s|%s|%s" % (" ".join(names), "switch" if switch else "value", sample))
    n += 1
if n < 15:
    sys.exit("only %d flags in torch.distributed.run's parser" % n)
