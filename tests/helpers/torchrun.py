"""torchrun of the PyTorch that runs this file, for side-by-side tests.

PyTorch 2.x's torchrun runs as it is. Debian's (PyTorch 1.13) runs as it
would if Python 3.11 did not trip it: its default --redirects/--tee values
go through Std.from_str, which iterates an IntFlag the way 3.11 no longer
allows. Only that parser is replaced; everything else is torchrun's own.

    $PYTHON tests/helpers/torchrun.py --standalone --nproc_per_node=2 x.py
"""
import re
import sys

import torch
import torch.distributed.elastic.multiprocessing.api as api


def _std_from_str(vm):
    if re.match(api._VALUE_REGEX, vm):
        return api.Std(int(vm))
    if re.match(api._MAPPING_REGEX, vm):
        return {int(i): api.Std(int(v))
                for i, v in (m.split(":") for m in vm.split(","))}
    raise ValueError(f"{vm} does not match {api._VALUE_REGEX} or "
                     f"{api._MAPPING_REGEX}")


if torch.__version__.startswith("1."):
    api.Std.from_str = classmethod(lambda cls, vm: _std_from_str(vm))

from torch.distributed.run import main  # noqa: E402  (after the patch)

if __name__ == "__main__":
    sys.exit(main())
