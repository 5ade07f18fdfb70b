"""plotly.js as a static file, straight from the installed ``plotly`` package.

``PlotlyFinder`` (in ``STATICFILES_FINDERS``) finds exactly one file,
``plotly/plotly.min.js``: the bundle that ships in ``plotly/package_data``, so the
pages draw with the plotly.js that matches the pinned Python package and no CDN is
involved. ``collectstatic`` copies it like any other static file, and WhiteNoise serves
it (compressed, with its caching headers) in production and from the finder in DEBUG.
"""

from __future__ import annotations

from importlib.util import find_spec
from pathlib import Path
from typing import Any

from django.contrib.staticfiles.finders import BaseFinder
from django.core.files.storage import FileSystemStorage

PREFIX = "plotly"
NAME = "plotly.min.js"
PATH = f"{PREFIX}/{NAME}"


def bundle_dir() -> Path:
    """``plotly/package_data`` of the installed package, found without importing plotly."""
    spec = find_spec("plotly")
    if spec is None or spec.origin is None:
        raise RuntimeError("the plotly package is not installed")
    return Path(spec.origin).parent / "package_data"


class PlotlyFinder(BaseFinder):
    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.storage = FileSystemStorage(location=bundle_dir())
        self.storage.prefix = PREFIX  # type: ignore[attr-defined]  # read by collectstatic

    def check(self, **kwargs: Any) -> list[Any]:
        return []

    def find(self, path: str, find_all: bool = False, **kwargs: Any) -> Any:
        found = str(bundle_dir() / NAME) if path == PATH and (bundle_dir() / NAME).is_file() else None
        if find_all:
            return [found] if found else []
        return found or []

    def list(self, ignore_patterns: Any) -> Any:
        yield NAME, self.storage
