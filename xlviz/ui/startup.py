"""Once per app process, at its first script run: thread limits for the app's small work.

BLAS (numpy's OpenBLAS) gets one thread: the app's matrices are small (hundreds of sentences,
hidden sizes up to a thousand), where a second thread gains little on an idle machine and its
spinning wait costs many times the work on a shared one (measured: 20 SVDs of 128x128 took
0.12 s with one thread, 3.5 s with two, load 7.9 on 2 cores).

The model stack (torch, transformers) is imported where a page first needs it, in the script's
own thread. Importing it in a background thread at start was tried: two threads importing one
package side by side can meet a half-initialised module ("cannot import name
'BertForMaskedLM' from 'transformers'" on the Runs page), and making every other import wait
for it meant replacing ``builtins.__import__`` — too fragile for a gain not measured on its own.
"""

from __future__ import annotations

import os
import threading

_started = False
_lock = threading.Lock()


def start() -> None:
    """Idempotent: the first call limits BLAS threads."""
    global _started
    with _lock:
        if _started:
            return
        _started = True
    os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")  # libraries loaded from now on
    os.environ.setdefault("MKL_NUM_THREADS", "1")
    try:
        from threadpoolctl import threadpool_limits

        threadpool_limits(limits=1, user_api="blas")  # those already loaded (numpy)
    except Exception:  # noqa: BLE001 - without threadpoolctl the defaults stay
        pass
