/* mapfile: whole files mapped read-only. */
#include "mapfile.h"

#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "sd_error.h"

int sd_mapfile_open(const char *path, const char *kind, const unsigned char **map, size_t *size)
{
    *map = NULL, *size = 0;
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) return sd_error(SD_EIO, "%s: cannot open: %s", path, strerror(errno));
    struct stat st;
    int rc = SD_OK;
    if (fstat(fd, &st) != 0)
        rc = sd_error(SD_EIO, "%s: cannot stat: %s", path, strerror(errno));
    else if (!S_ISREG(st.st_mode))
        rc = sd_error(SD_EIO, "%s: not a regular file%s", path,
                      S_ISDIR(st.st_mode) ? " (a directory)" : "");
    else if ((uintmax_t)st.st_size > SIZE_MAX)
        rc = sd_error(SD_ERANGE, "%s: file too large for this host", path);
    else if (st.st_size == 0 && kind)
        rc = sd_error(SD_EFORMAT, "%s: empty file, not a %s file", path, kind);
    if (rc == SD_OK && st.st_size > 0) {
        void *m = mmap(NULL, (size_t)st.st_size, PROT_READ, MAP_PRIVATE, fd, 0);
        if (m == MAP_FAILED) rc = sd_error(SD_EIO, "%s: cannot mmap: %s", path, strerror(errno));
        else *map = m, *size = (size_t)st.st_size;
    }
    close(fd);
    return rc;
}

void sd_mapfile_close(const unsigned char *map, size_t size)
{
    if (map) munmap((void *)map, size);
}
