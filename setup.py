"""The build step of `pip install .` (pyproject.toml): `make shared` builds
build-shared/libspecdec.so, which goes into the package beside __init__.py, where the
package looks first. The version is src/version.h's, the one the command prints."""
import os
import re
import shutil
import subprocess

from setuptools import setup
from setuptools.command.build_py import build_py
from setuptools.dist import Distribution

HERE = os.path.dirname(os.path.abspath(__file__))


def version():
    with open(os.path.join(HERE, "src", "version.h")) as f:
        return re.search(r'#define SPECDEC_VERSION "([^"]+)"', f.read()).group(1)


class BuildWithMake(build_py):
    """The pure-Python files, then the C library by the Makefile (SPECDEC_JOBS jobs, 2)."""

    def run(self):
        super().run()
        env = {k: v for k, v in os.environ.items() if k not in ("MAKEFLAGS", "MFLAGS", "MAKELEVEL")}
        subprocess.check_call(["make", "-j" + os.environ.get("SPECDEC_JOBS", "2"), "shared"], cwd=HERE, env=env)
        dest = os.path.join(self.build_lib, "specdec")
        os.makedirs(dest, exist_ok=True)
        shutil.copy2(os.path.join(HERE, "build-shared", "libspecdec.so"), dest)


class BinaryDistribution(Distribution):
    """A wheel for this platform: it carries a compiled library."""

    def has_ext_modules(self):
        return True


setup(version=version(), cmdclass={"build_py": BuildWithMake}, distclass=BinaryDistribution,
      options={"build": {"build_base": "build-python"}, "egg_info": {"egg_base": "build-python"}})
