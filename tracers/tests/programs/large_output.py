"""A trace whose episodes come to several MB (test_episode_buffer): many calls, each holding a long
str with characters JSON escapes, all stepped into from one outer call."""


def leaf(text, i):
    shown = text[i:] + text[:i]
    return shown


def outer(n):
    text = ('"q" \\ \u00e9 < |' * 30)[:200]
    last = None
    for i in range(n):
        last = leaf(text, i)
    return last
