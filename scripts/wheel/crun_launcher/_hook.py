"""Loaded by crun_launcher.pth only when CRUN_TORCHRUN=1: wraps the import
of torch.distributed.run so that, once torch's module has run, its run()
and main() start crun (crun_launcher.torchrun.install)."""
import importlib.abc
import importlib.machinery
import sys

NAME = "torch.distributed.run"


class _Loader(importlib.abc.Loader):
    def __init__(self, real):
        self.real = real

    def create_module(self, spec):
        return self.real.create_module(spec)

    def exec_module(self, module):
        self.real.exec_module(module)
        from crun_launcher.torchrun import install
        install(module)


class _Finder(importlib.abc.MetaPathFinder):
    def find_spec(self, fullname, path, target=None):
        if fullname != NAME:
            return None
        spec = importlib.machinery.PathFinder.find_spec(fullname, path)
        if spec is None or spec.loader is None:
            return spec
        spec.loader = _Loader(spec.loader)
        return spec


if not any(isinstance(f, _Finder) for f in sys.meta_path):
    sys.meta_path.insert(0, _Finder())
