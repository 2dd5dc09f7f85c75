import functools, time
def _exception_logger(func):
    @functools.wraps(func)
    def wrapper(*args, **kwargs):
        return func(*args, **kwargs)
    return wrapper
@_exception_logger
def all_reduce(t):
    time.sleep(1000)
