"""`python -m guidepost ARGS` runs the `guidepost` command that came with this package."""

import os
import sys

from ._binary import find_guidepost_bin


def main() -> None:
    binary = find_guidepost_bin()
    if sys.platform == "win32":
        import subprocess

        sys.exit(subprocess.call([binary, *sys.argv[1:]]))
    os.execv(binary, [binary, *sys.argv[1:]])


if __name__ == "__main__":
    main()
