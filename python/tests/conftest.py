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


@pytest.fixture
def torch_seed():
    """torch's global generator reseeded, for the torch tests (pytestmark = usefixtures("torch_seed"))."""
    import torch

    torch.manual_seed(0)


@pytest.fixture(params=["native", "eager", "ops"])
def route(request, monkeypatch):
    """Every route to the kernels: the direct eager one through the C++ entry points with their autograd
    in C++ (rmsnorm._torch_ops, when the wheel has it) or in Python (torch.autograd.Function), and the
    torch.library ops (under compile, export or a dispatch mode)."""
    import rmsnorm.torch as rt

    if request.param == "native" and rt.functional._NATIVE is None:
        pytest.skip("the wheel has no C++ autograd ops for this torch")
    if request.param != "native":
        monkeypatch.setattr(rt.functional, "_NATIVE", None)
    if request.param == "ops":
        monkeypatch.setattr(rt.functional, "_FAST_PATH", False)
    return request.param
