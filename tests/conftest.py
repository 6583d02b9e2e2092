import pytest


def pytest_addoption(parser):
    parser.addoption("--update-goldens", action="store_true", default=False,
                     help="rewrite golden files from the current output (review the diff)")


@pytest.fixture
def update_goldens(request) -> bool:
    return request.config.getoption("--update-goldens")
