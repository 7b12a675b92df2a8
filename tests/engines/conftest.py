import pytest


@pytest.fixture(scope="session")
def local_ray():
    """A local Ray of two CPUs for the engine tests (shut down at the end if started here)."""
    ray = pytest.importorskip("ray")
    started = not ray.is_initialized()
    if started:
        ray.init(num_cpus=2, include_dashboard=False, logging_level="ERROR")
    yield ray
    if started:
        ray.shutdown()
