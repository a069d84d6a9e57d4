"""Checks of the project as a whole: layering, docs, deploy files, the tests' own layout."""
