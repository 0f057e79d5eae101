import numpy as np
import pytest

import rmsnorm


@pytest.fixture(autouse=True)
def _restore_library_settings():
    """Tests may change the process-wide thread count or backend; each test starts from the defaults."""
    threads, backend = rmsnorm.get_num_threads(), rmsnorm.get_backend()
    yield
    rmsnorm.set_num_threads(threads)
    rmsnorm.set_backend(backend)


@pytest.fixture
def rng():
    return np.random.default_rng(1234)
