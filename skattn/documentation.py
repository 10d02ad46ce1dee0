"""Where the documentation of this installation lives (the ``skattn docs`` command).

The wheel ships the package, not its documentation. The pages are built from ``docs/`` of a
source checkout (``make docs``); an editable install finds them there, and a
``Documentation`` project URL in the installed metadata, where one is set, names the
published site. Messages of the package cite pages by their title (e.g. "docs: Theory
§4"); :data:`PAGES` maps each title to its file.
"""

from __future__ import annotations

import pathlib

__all__ = ["PAGES", "documentation", "format_documentation"]

#: Page title -> file name (without ``.rst``) of the documentation.
PAGES = {
    "Getting started": "getting_started",
    "User guide": "user_guide",
    "Finite-size corrections": "corrections",
    "How-to guides": "howto/index",
    "Theory": "theory",
    "Where the predictions hold": "domain",
    "Spiky targets": "spiked",
    "Non-Gaussian tokens": "tokens",
    "Beyond the paper's assumptions": "validity_map",
    "Training dynamics": "dynamics",
    "Validation": "validation",
    "Validation report": "validation_report",
    "API reference": "api",
    "Command line": "cli",
    "Errors": "errors",
    "Changelog": "changelog",
}


def _metadata_url():
    try:
        from importlib.metadata import PackageNotFoundError, metadata
    except ImportError:  # pragma: no cover - Python < 3.8
        return None
    try:
        urls = metadata("skattn").get_all("Project-URL") or []
    except PackageNotFoundError:
        return None
    for entry in urls:
        label, _, url = entry.partition(",")
        if label.strip().lower() in ("documentation", "docs"):
            return url.strip()
    return None


def documentation(page=None):
    """Where the documentation is, for this installation.

    Parameters
    ----------
    page : str or None
        A page title of :data:`PAGES` (case-insensitive; a unique prefix is enough), or None
        for the front page.

    Returns
    -------
    dict
        ``title``; ``html`` (path of the built page, or None when the docs are not built),
        ``source`` (its ``.rst`` source in a checkout, or None), ``url`` (the published page
        from the ``Documentation`` project URL, or None) and ``build`` (how to build them).

    Raises
    ------
    ValueError
        If ``page`` names no page, or several.
    """
    if page is None:
        title, name = "Front page", "index"
    else:
        key = str(page).strip().lower()
        hits = [t for t in PAGES if t.lower() == key] or \
            [t for t in PAGES if t.lower().startswith(key)]
        if len(hits) != 1:
            raise ValueError(f"page must be one of {sorted(PAGES)} (or a unique prefix), "
                             f"got {page!r}.")
        title, name = hits[0], PAGES[hits[0]]
    docs = pathlib.Path(__file__).resolve().parent.parent / "docs"
    source = docs / f"{name}.rst"
    html = docs / "_build" / "html" / f"{name}.html"
    url = _metadata_url()
    return {"title": title,
            "html": str(html) if html.is_file() else None,
            "source": str(source) if source.is_file() else None,
            "url": f"{url.rstrip('/')}/{name}.html" if url else None,
            "build": "make docs (in a source checkout; SKATTN_DOCS_NO_GALLERY_EXEC=1 "
                     "skips running the gallery)"}


def format_documentation(info):
    """The lines ``skattn docs`` prints for :func:`documentation`'s result."""
    lines = [f"{info['title']}:"]
    if info["html"]:
        lines.append(f"  built:  {info['html']}")
    if info["source"]:
        lines.append(f"  source: {info['source']}")
    if info["url"]:
        lines.append(f"  online: {info['url']}")
    if not (info["html"] or info["url"]):
        lines.append(f"  not built here; build with: {info['build']}")
    if not (info["html"] or info["source"] or info["url"]):
        lines.append("  (the wheel ships no documentation: get the source distribution or "
                     "the repository, then build it)")
    return "\n".join(lines) + "\n"
