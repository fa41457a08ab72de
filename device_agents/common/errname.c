#include "errname.h"

#include <errno.h>
#include <stdio.h>

const char *errno_name(int err) {
    static char other[16];
    switch (err) {
        case ENOENT: return "ENOENT";
        case EACCES: return "EACCES";
        case EPERM: return "EPERM";
        case EINVAL: return "EINVAL";
        case ENODEV: return "ENODEV";
        case ENXIO: return "ENXIO";
        case EIO: return "EIO";
        case EBUSY: return "EBUSY";
        case EAGAIN: return "EAGAIN";
        case EISDIR: return "EISDIR";
        case ENOTDIR: return "ENOTDIR";
        case ETIMEDOUT: return "ETIMEDOUT";
        case ENODATA: return "ENODATA";
        default: snprintf(other, sizeof(other), "E%d", err); return other;
    }
}
