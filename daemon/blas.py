"""One BLAS thread for the daemon's numpy, unless the user chose otherwise.

numpy's BLAS (OpenBLAS in the wheels) starts a thread per core and splits every
product among them. The engine's products are small (a query vector against a few
thousand node vectors, a 5,000 x 256 matrix): handing each one to a pool costs
more than the product, and on a busy machine a product waits for a core per
thread. Measured under load on the 2-core test machine: a 5,000 x 256 product
took 18 ms with 2 threads and 1.4 ms with one; a 100k-node graph query went
124 -> 84 ms and teach 111 -> 27 ms (issue 17).

The thread count is read once, when numpy loads, so ``limit_blas_threads`` runs
first thing in the ``brain`` entry point, before anything imports numpy. A value
the user set in the environment is kept (to give a large maintenance run more
threads, say ``OPENBLAS_NUM_THREADS=2 brain maintain ...``). Child processes (the
maintenance child) inherit the setting.

Tested in tests/daemon/test_blas.py.
"""

from __future__ import annotations

import os
from typing import Final

BLAS_THREAD_VARIABLES: Final = (
    "OPENBLAS_NUM_THREADS",
    "OMP_NUM_THREADS",
    "MKL_NUM_THREADS",
    "BLIS_NUM_THREADS",
    "VECLIB_MAXIMUM_THREADS",
    "NUMEXPR_NUM_THREADS",
)
"""The variables the BLAS builds numpy may use read their thread count from."""


def limit_blas_threads() -> None:
    """Set every BLAS thread-count variable the user left unset to 1.

    Has no effect on a numpy already imported (its pool is started); the entry
    point calls it before any import of numpy.
    """
    for name in BLAS_THREAD_VARIABLES:
        if not os.environ.get(name):
            os.environ[name] = "1"
