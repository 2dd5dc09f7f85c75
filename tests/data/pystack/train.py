import threading, time, faulthandler, signal, sys
faulthandler.register(signal.SIGUSR1, all_threads=True)
def wait_loader():
    while True:
        time.sleep(100)
def all_reduce():
    time.sleep(1000)
def step():
    all_reduce()
def main():
    t = threading.Thread(target=wait_loader, name="loader", daemon=True)
    t.start()
    step()
main()
