def test_broken(:
    pass
