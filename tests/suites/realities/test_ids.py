import pytest

IDS = ['<script>alert("x")</script>', 'it\'s "quoted" & <b>bold</b>', "ñandú-中文-🚀"]


@pytest.mark.parametrize("name", IDS, ids=IDS)
def test_hostile_id(name):
    assert name
