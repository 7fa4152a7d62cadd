"""A racing process for the confinement tests: swaps two directory entries atomically, forever.

``python racer.py A B READY`` exchanges ``A`` and ``B`` with ``renameat2(RENAME_EXCHANGE)`` in
a tight loop (one is a real folder, the other a symlink leading outside the workdir), so at
every instant one of them is the folder and the other the symlink, never neither. It touches
``READY`` once it runs. Stop it with SIGKILL.
"""

from __future__ import annotations

import ctypes
import sys

RENAME_EXCHANGE = 2
AT_FDCWD = -100


def main() -> None:
    a, b, ready = (arg.encode() for arg in sys.argv[1:4])
    libc = ctypes.CDLL(None, use_errno=True)
    renameat2 = libc.renameat2
    renameat2.argtypes = [
        ctypes.c_int,
        ctypes.c_char_p,
        ctypes.c_int,
        ctypes.c_char_p,
        ctypes.c_uint,
    ]
    if renameat2(AT_FDCWD, a, AT_FDCWD, b, RENAME_EXCHANGE) != 0:
        raise OSError(ctypes.get_errno(), "renameat2 failed")
    open(ready, "w").close()
    while True:
        renameat2(AT_FDCWD, a, AT_FDCWD, b, RENAME_EXCHANGE)


if __name__ == "__main__":
    main()
