def f(a,b):
    y = a
    for i in range(b):
        y *= i + 1
    return y


def main():
    return f(1, 3)
