#!/usr/bin/python3
"""Host PyTorch's own TCPStore server (is_master=True) on 127.0.0.1:PORT.

usage: store_server.py PORT
Prints "server up PORT" once listening, then sleeps until killed.
"""
import sys, time
from datetime import timedelta
import torch.distributed as dist

port = int(sys.argv[1])
s = dist.TCPStore("127.0.0.1", port, None, True, timedelta(seconds=30),
                  wait_for_workers=False)
print("server up", s.port, flush=True)
while True:
    time.sleep(3600)
