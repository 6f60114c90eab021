"""A post's tags as the author wrote them, cleaned."""
from blog.util import slug, unique


def parse_tags(header):
    """Tags from a `tags: a, b, c` header line."""
    _, _, rest = header.partition(":")
    return unique(slug(t) for t in rest.split(",") if t.strip())


def tag_line(tags):
    return " ".join("#" + t for t in tags)
