def test_a_leaves_state_behind(device):
    device["polluted"] = True


def test_b_needs_clean_state(device):
    if device["polluted"]:
        raise RuntimeError("OutOfResources: shared memory, Required: 98304, Hardware limit: 65536")
