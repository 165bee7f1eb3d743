/* mapfile: a whole regular file mapped read-only into memory, the one way GGUF,
 * safetensors and logit-log files are read (they are used in place, never copied).
 *
 *   const unsigned char *map; size_t size;
 *   if (sd_mapfile_open("model.gguf", "GGUF", &map, &size) != SD_OK) ... sd_errmsg() ...
 *   ... map[0 .. size-1] ...
 *   sd_mapfile_close(map, size);
 */
#ifndef SD_MAPFILE_H
#define SD_MAPFILE_H

#include <stddef.h>

/* Maps path. Errors name the path: SD_EIO (cannot open, stat or map; not a regular
 * file), SD_ERANGE (larger than the address space), SD_EFORMAT for an empty file
 * ("empty file, not a <kind> file"); with kind NULL an empty file is no error and maps
 * nothing (*map NULL, *size 0: the caller reports it). On error *map is NULL, *size 0. */
int sd_mapfile_open(const char *path, const char *kind, const unsigned char **map, size_t *size);
/* Unmaps what sd_mapfile_open returned; NULL is a no-op. */
void sd_mapfile_close(const unsigned char *map, size_t size);

#endif
