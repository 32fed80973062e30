"""Build step of the site and model packages: `python -m build_tools <command>`."""
