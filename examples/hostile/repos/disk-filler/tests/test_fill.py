"""Fills the folder the host reads results from, a MiB at a time, until the disk says no."""
import errno

OUT = "/worldline/out/filler"


def test_fills_the_results_folder():
    block = b"x" * (1 << 20)
    written = 0
    try:
        with open(OUT, "wb") as f:
            while written < 64 << 30:
                f.write(block)
                f.flush()
                written += len(block)
    except OSError as e:
        # ENOSPC at the work folder's budget (EFBIG would be the per-file limit).
        assert e.errno == errno.ENOSPC, e
