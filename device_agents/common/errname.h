/* errno as its symbolic name ("EACCES"): stable across libcs, unlike strerror's text, so the
 * host can match on it. */
#ifndef FARM_ERRNAME_H
#define FARM_ERRNAME_H

const char *errno_name(int err);

#endif
