"""Where the `guidepost` command that came with this package is."""

import os
import shutil
import sys
import sysconfig


def find_guidepost_bin() -> str:
    """The path of the `guidepost` executable installed with this package.

    The wheel installs it as a script of the environment the package went into (a virtual
    environment's `bin`, or the user scheme's with `pip install --user`); a `guidepost` on
    the PATH is the last resort. Raises `FileNotFoundError` when there is none.
    """
    name = "guidepost" + (".exe" if sys.platform == "win32" else "")
    places = [sysconfig.get_path("scripts"), os.path.dirname(sys.executable)]
    user_scheme = f"{os.name}_user"
    if user_scheme in sysconfig.get_scheme_names():
        places.append(sysconfig.get_path("scripts", scheme=user_scheme))
    for place in places:
        candidate = os.path.join(place, name)
        if os.path.isfile(candidate) and os.access(candidate, os.X_OK):
            return candidate
    found = shutil.which(name)
    if found:
        return found
    raise FileNotFoundError(f"no `{name}` executable in {', '.join(places)} or on the PATH")
