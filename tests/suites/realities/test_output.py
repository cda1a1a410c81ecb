def test_prints_megabytes():
    for _ in range(5000):
        print("x" * 1000)


def test_fails_with_huge_message():
    print("y" * 3_000_000)
    raise AssertionError("mismatch: " + "z" * 200_000)
