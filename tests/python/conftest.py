import pytest


@pytest.fixture
def clean_registry():
    """Removes the Python passes a test registers."""
    from braze.passes import registry

    before = dict(registry._passes)
    yield
    registry._passes.clear()
    registry._passes.update(before)
