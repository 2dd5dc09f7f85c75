#!/usr/bin/env python3
"""Regenerate the hwloc XML fixtures of tests/unit/test_binding.c and
tests/integration/binding.sh: hwloc's own export of a synthetic topology
(lstopo --of xml), with PCI devices hung under the objects that hold each
NUMA node, the way hwloc exports a real machine's I/O tree.

    cd tests/data/hwloc && python3 gen.py
"""
import subprocess
import xml.etree.ElementTree as ET

GP = [1000]


def gp():
    GP[0] += 1
    return str(GP[0])


def pcidev(bus, cls, vendor, device):
    d = ET.Element("object", {
        "type": "PCIDev", "gp_index": gp(),
        "pci_busid": "0000:%02x:00.0" % bus,
        "pci_type": "%04x [%04x:%04x] [%04x:0000] a1" % (cls, vendor, device,
                                                         vendor),
        "pci_link_speed": "0.000000"})
    return d


def bridge(bus, devs):
    b = ET.Element("object", {
        "type": "Bridge", "gp_index": gp(), "bridge_type": "0-1",
        "depth": "0", "bridge_pci": "0000:[%02x-%02x]" % (bus, bus)})
    for d in devs:
        b.append(d)
    return b


def make(synthetic, out, io):
    """io: {numa os index: [(bus, class, vendor, device), ...]}"""
    xml = subprocess.run(["lstopo-no-graphics", "-i", synthetic, "--of",
                          "xml", "-"], check=True, capture_output=True,
                         text=True).stdout
    root = ET.fromstring(xml.split("\n", 2)[2])
    for obj in root.iter("object"):
        numa = [c for c in obj if c.get("type") == "NUMANode"]
        if not numa:
            continue
        for bus, cls, ven, dev in io.get(int(numa[0].get("os_index")), []):
            obj.append(bridge(bus, [pcidev(bus, cls, ven, dev)]))
    with open(out, "w") as f:
        f.write('<?xml version="1.0" encoding="UTF-8"?>\n'
                '<!DOCTYPE topology SYSTEM "hwloc2.dtd">\n')
        f.write(ET.tostring(root, encoding="unicode"))
        f.write("\n")


NV = (0x0302, 0x10de, 0x20b0)  # 3D controller: an A100
BMC = (0x0300, 0x1a03, 0x2000)  # the BMC's VGA: not a GPU
NIC = (0x0200, 0x15b3, 0x101b)

# 2 sockets x 2 NUMA nodes x 8 cores (two L3 complexes of 4), 2 PUs a core.
make("pack:2 group:2 [numa] l3:2 core:4 pu:2", "2s2n8c.xml", {})
# 8 GPUs on 2 sockets, 2 per NUMA node, listed against bus order; the BMC's
# VGA and a NIC on node 0. 8 single-PU cores per node, 2 L3 complexes.
make("pack:2 group:2 [numa] l3:2 core:4 pu:1", "8gpu.xml", {
    0: [(0x0f,) + NV, (0x07,) + NV, (0x02,) + BMC, (0x0c,) + NIC],
    1: [(0x4e,) + NV, (0x47,) + NV],
    2: [(0x90,) + NV, (0x87,) + NV],
    3: [(0xbd,) + NV, (0xb7,) + NV]})
# This machine's PUs (0 and 1) as 2 NUMA nodes of one core; the first GPU by
# PCI order sits on node 1, so GPU locality and NUMA order disagree.
make("pack:2 [numa] core:1 pu:1", "2n1c-2gpu.xml", {
    0: [(0x80,) + NV], 1: [(0x10,) + NV]})
