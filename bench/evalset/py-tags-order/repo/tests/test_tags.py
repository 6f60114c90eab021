from blog.tags import parse_tags, tag_line


def test_tags_keep_the_author_order():
    header = "tags: Zebra, apple, Machine Learning, zebra, kiwi, Data, mango, apple"
    assert parse_tags(header) == ["zebra", "apple", "machine-learning", "kiwi", "data", "mango"]


def test_tag_line():
    assert tag_line(["b", "a"]) == "#b #a"
