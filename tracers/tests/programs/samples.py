import time


def fact(n):
    if n <= 1:
        return 1
    return n * fact(n - 1)


def countdown(n):
    while n > 0:
        yield n
        n -= 1


def use_gen():
    total = 0
    for v in countdown(2):
        total += v
    return total


def fail(x):
    raise ValueError("bad %d" % x)


def catch():
    try:
        fail(1)
    except ValueError as e:
        msg = str(e)
    return msg


def uncaught():
    fail(2)


class BadRepr:
    def __repr__(self):
        raise RuntimeError("no repr")


class SlowRepr:
    def __repr__(self):
        time.sleep(0.06)
        return "SlowRepr()"


class HugeRepr:
    def __repr__(self):
        return "x" * 5000


def values():
    big = 7 ** 5000
    bad = BadRepr()
    slow = SlowRepr()
    huge = HugeRepr()
    cyc = [1]
    cyc.append(cyc)
    d = {"k": cyc}
    return len(d)


def one_line_loop(n):
    while n > 0: n -= 1
    return n


def squares(xs):
    out = [x * x for x in xs]
    return out


def gen_throw():
    g = countdown(3)
    first = next(g)
    try:
        g.throw(KeyError("k"))
    except KeyError:
        pass
    return first


async def add_async(a, b):
    return a + b


async def run_async():
    x = await add_async(1, 2)
    return x


def run_coroutine():
    coro = run_async()
    try:
        coro.send(None)
    except StopIteration as stop:
        return stop.value


def worker(out):
    for i in range(3):
        out.append(i)


def with_thread():
    import threading
    out = []
    t = threading.Thread(target=worker, args=(out,), name="w")
    t.start(); t.join()
    n = len(out)
    return n


class Point:
    def __init__(self, x, y):
        self.x = x
        self.y = y

    def norm1(self):
        return abs(self.x) + abs(self.y)


def use_point():
    p = Point(3, -4)
    return p.norm1()


def deep_loop(n):
    total = 0
    for i in range(n):
        total += i
    return total
