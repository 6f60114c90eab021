from ledger import reader


def test_blank_lines_are_not_rows():
    assert reader.parse_rows("a,1\n\nb,2\n") == [["a", "1"], ["b", "2"]]
    assert reader.parse_rows("a,1\r\nb,2\r\n") == [["a", "1"], ["b", "2"]]
    assert reader.parse_rows("") == []
