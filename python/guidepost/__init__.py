"""Guidepost for Python teams.

Installing this package puts the `guidepost` command on the PATH (`guidepost serve`,
`guidepost check`, `guidepost simulate`, ...; `python -m guidepost` runs it too).
"""

from ._binary import find_guidepost_bin

__all__ = ["find_guidepost_bin"]
