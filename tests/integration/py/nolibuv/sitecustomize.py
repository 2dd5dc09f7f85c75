"""Make this interpreter's torch (2.x, built with libuv) refuse libuv as a
build without it does (Debian 13's python3-torch, Windows wheels):
TCPStore's constructor raises for use_libuv=True, its default, server or
client, with torch's own message. On PYTHONPATH, for the tests only."""
import sys
import torch.distributed as _d
import torch.distributed.rendezvous  # noqa: F401 (the function shadows it)

_r = sys.modules["torch.distributed.rendezvous"]

_TCPStore = _d.TCPStore


class TCPStore(_TCPStore):
    def __init__(self, *args, **kwargs):
        if kwargs.pop("use_libuv", True):
            raise RuntimeError("use_libuv was requested but PyTorch was "
                               "build without libuv support")
        super().__init__(*args, use_libuv=False, **kwargs)


_d.TCPStore = _r.TCPStore = TCPStore
