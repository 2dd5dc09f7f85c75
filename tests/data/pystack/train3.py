import threading, time, faulthandler, signal, sys
faulthandler.register(signal.SIGUSR1, all_threads=True)
ready = threading.Event()
def loader():
    ready.set()
    while True:
        time.sleep(0.05)
def barrier():
    time.sleep(1000)
def main():
    t = threading.Thread(target=loader, daemon=True)
    t.start()
    ready.wait()
    time.sleep(0.3)
    if sys.argv[1] == "thread":
        signal.pthread_kill(t.ident, signal.SIGUSR1)
    else:
        faulthandler.dump_traceback_later(0.2, exit=False)
    barrier()
main()
