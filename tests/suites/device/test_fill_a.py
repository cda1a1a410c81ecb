from conftest import fill_seconds


def test_fill(device):
    device.use(fill_seconds())
