import io

import cli


def run(*argv):
    out = io.StringIO()
    code = cli.main(list(argv), out)
    return code, out.getvalue()


def test_within_limit():
    code, _ = run("--limit", "10KB", "512")
    assert code == 0


def test_over_limit():
    code, _ = run("--limit", "1MiB", "2MB")
    assert code == 1


def test_usage():
    code, text = run("--limit")
    assert code == 2
    assert text.startswith("usage:")
