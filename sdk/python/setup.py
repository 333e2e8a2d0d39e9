"""The package's compiled part, headway._intake (src/intake.c): built where a C compiler
and the Python headers are, left out (with a warning) where not; the package works
without it (see headway/reporter.py). The rest of the metadata is in pyproject.toml."""

from setuptools import Extension, setup

setup(ext_modules=[Extension("headway._intake", ["src/intake.c"], optional=True)])
