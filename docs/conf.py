"""Sphinx configuration: the docs are Markdown (MyST); `make docs` builds them offline."""

project = "tabsparse"
author = "the tabsparse developers"
extensions = ["myst_parser", "sphinx.ext.autodoc", "sphinx.ext.napoleon"]
source_suffix = {".md": "markdown"}
exclude_patterns = ["_build"]
myst_heading_anchors = 3
napoleon_numpy_docstring = True
autodoc_member_order = "bysource"
html_theme = "alabaster"
suppress_warnings = ["myst.header"]
