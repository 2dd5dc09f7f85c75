"""Put crun's wheel together (scripts/wheel.sh builds the binary).

    python scripts/wheel.py CRUN VERSION PLATFORM OUTDIR   prints the wheel's path

PLATFORM is the platform tag, e.g. manylinux_2_28_x86_64 or win_amd64 (the
wheel is py3-none-PLATFORM: one executable, for any Python). CRUN's file
name (crun, or crun.exe for Windows) is the installed command's.

The wheel holds:
  crun_launcher-V.data/scripts/crun   the executable: pip puts it in the
                                      environment's bin/, so `crun` starts as
                                      the native program it is
  crun_launcher-V.data/data/share/man/man1/crun.1
  crun_launcher/                      `python -m crun_launcher` runs it;
                                      crun_launcher.torchrun routes torchrun
                                      to it (opt-in, see that module)
  crun_launcher.pth                   that opt-in's hook (CRUN_TORCHRUN=1)
  crun_launcher-V.dist-info/          METADATA, WHEEL, RECORD, the licence
Entries are sorted, dated SOURCE_DATE_EPOCH and given fixed modes, so the
same inputs give the same bytes.
"""
import base64
import hashlib
import os
import sys
import time
import zipfile

crun, version, platform, outdir = sys.argv[1:5]
tag = "py3-none-" + platform
top = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
name = "crun_launcher"
dist = "%s-%s" % (name, version)
epoch = max(int(os.environ.get("SOURCE_DATE_EPOCH", "315532800")), 315532800)
date = time.gmtime(epoch)[:6]


def read(path):
    with open(path, "rb") as f:
        return f.read()


readme = read(os.path.join(top, "README.md")).decode()
metadata = """Metadata-Version: 2.1
Name: crun-launcher
Version: {v}
Summary: A torchrun-compatible elastic launcher for distributed PyTorch training, as one native program
Home-page: https://github.com/crun-launcher/crun
License: MIT
Keywords: pytorch,torchrun,distributed,launcher,slurm,elastic
Classifier: Development Status :: 4 - Beta
Classifier: Environment :: Console
Classifier: Intended Audience :: Science/Research
Classifier: License :: OSI Approved :: MIT License
Classifier: {os}
Classifier: Programming Language :: C
Classifier: Programming Language :: Python :: 3
Classifier: Topic :: Scientific/Engineering :: Artificial Intelligence
Classifier: Topic :: System :: Distributed Computing
Requires-Python: >=3.8
Description-Content-Type: text/markdown

{readme}""".format(v=version, readme=readme,
           os="Operating System :: Microsoft :: Windows"
           if platform.startswith("win") else "Operating System :: POSIX :: Linux")

wheel = """Wheel-Version: 1.0
Generator: crun scripts/wheel.py
Root-Is-Purelib: false
Tag: {t}
""".format(t=tag)

files = [
    ("%s.data/scripts/%s" % (dist, os.path.basename(crun)), read(crun), 0o755),
    ("%s.data/data/share/man/man1/crun.1" % dist,
     read(os.path.join(top, "docs", "crun.1")), 0o644),
]
pkg = os.path.join(top, "scripts", "wheel", name)
for f in sorted(os.listdir(pkg)):
    if f.endswith(".py"):
        files.append(("%s/%s" % (name, f), read(os.path.join(pkg, f)), 0o644))
# Read at every start of the environment's Python: one comparison unless
# CRUN_TORCHRUN=1 asks for torchrun routed to crun (crun_launcher.torchrun).
files.append(("crun_launcher.pth", b'import os; os.environ.get("CRUN_TORCHRUN") '
              b'== "1" and __import__("crun_launcher._hook")\n', 0o644))
files += [
    ("%s.dist-info/METADATA" % dist, metadata.encode(), 0o644),
    ("%s.dist-info/WHEEL" % dist, wheel.encode(), 0o644),
    ("%s.dist-info/licenses/LICENSE" % dist,
     read(os.path.join(top, "docs", "LICENSE")), 0o644),
]


def digest(data):
    h = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=")
    return "sha256=" + h.decode()


record = "".join("%s,%s,%d\n" % (n, digest(d), len(d)) for n, d, _ in files)
record += "%s.dist-info/RECORD,,\n" % dist
files.append(("%s.dist-info/RECORD" % dist, record.encode(), 0o644))

os.makedirs(outdir, exist_ok=True)
out = os.path.join(outdir, "%s-%s-%s.whl" % (name, version, tag))
tmp = out + ".tmp"
with zipfile.ZipFile(tmp, "w", zipfile.ZIP_DEFLATED, compresslevel=9) as z:
    for n, d, mode in files:
        zi = zipfile.ZipInfo(n, date)
        zi.external_attr = (0o100000 | mode) << 16
        zi.compress_type = zipfile.ZIP_DEFLATED
        z.writestr(zi, d)
os.replace(tmp, out)
print(out)
