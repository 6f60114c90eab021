"""kcat_frames.py: the messages of a topic as `kcat_raw` (lib.sh) wrote
them, framed as key, a tab, the payload's size, a tab, the payload (kcat
-f '%k\\t%S\\t%s'): the framing survives payloads holding tabs and newlines,
as msgpack does."""


def frames(path):
    """(key, payload bytes) per message, in the order read."""
    raw, i = open(path, "rb").read(), 0
    while i < len(raw):
        t1 = raw.index(b"\t", i)
        t2 = raw.index(b"\t", t1 + 1)
        key, size = raw[i:t1].decode(), int(raw[t1 + 1:t2])
        payload = raw[t2 + 1:t2 + 1 + max(size, 0)]
        i = t2 + 1 + max(size, 0)
        yield key, payload
