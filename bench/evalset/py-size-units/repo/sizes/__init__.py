from .parse import parse_size

__all__ = ["parse_size"]
