/* version: the one version number of specdec (the command's --version, every --json
 * envelope, libspecdec.so's sd_api_version_string, the Python package's __version__ and
 * its pyproject.toml, which setup.py checks against this line). */
#ifndef SD_VERSION_H
#define SD_VERSION_H

#define SPECDEC_VERSION "0.1.0"

#endif
