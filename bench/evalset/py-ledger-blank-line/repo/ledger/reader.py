"""Reads ledger exports: one `account,amount` pair a line."""


def parse_rows(text):
    """The rows of an export as [account, amount] lists, in order."""
    rows = []
    for line in text.split("\n"):
        rows.append(line.strip().split(","))
    return rows


def read_file(path):
    with open(path, encoding="utf-8") as f:
        return parse_rows(f.read())
