"""limit-check: says whether a file size is within a limit.

    python3 cli.py --limit 10KB SIZE
"""
import sys

from sizes import parse_size


def main(argv, out=sys.stdout):
    if len(argv) != 3 or argv[0] != "--limit":
        out.write("usage: cli.py --limit LIMIT SIZE\n")
        return 2
    try:
        limit = parse_size(argv[1])
        size = parse_size(argv[2])
    except ValueError as e:
        out.write("error: %s\n" % e)
        return 2
    out.write("%d of %d bytes: %s\n" % (size, limit, "ok" if size <= limit else "too big"))
    return 0 if size <= limit else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
