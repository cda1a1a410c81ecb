def test_fails_first_time(state_dir):
    marker = state_dir / "flaky-ran-once"
    if not marker.exists():
        marker.write_text("1")
        raise AssertionError("tolerance exceeded: max abs diff 3.1e-02 > 1e-02")
