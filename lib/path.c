/* path.c: what a lock path may look like.
 *
 * ZooKeeper's server rejects a bad path only after a round trip, and
 * a relative or "." path would be turned into something else by a chroot;
 * checking here gives a clear ZKLOCK_EINVAL before anything is sent. */
#include "names.h"

#include <stdlib.h>
#include <string.h>

/* Decodes one UTF-8 sequence at s; returns its length, 0 if malformed
 * (truncated, overlong, surrogate-encoded or out of range). */
static size_t utf8_decode(const unsigned char *s, uint32_t *cp)
{
    size_t len;
    uint32_t min;

    if (s[0] < 0x80) {
        *cp = s[0];
        return 1;
    }
    if ((s[0] & 0xE0) == 0xC0) {
        len = 2, min = 0x80, *cp = s[0] & 0x1F;
    } else if ((s[0] & 0xF0) == 0xE0) {
        len = 3, min = 0x800, *cp = s[0] & 0x0F;
    } else if ((s[0] & 0xF8) == 0xF0) {
        len = 4, min = 0x10000, *cp = s[0] & 0x07;
    } else {
        return 0;
    }
    for (size_t i = 1; i < len; i++) {
        if ((s[i] & 0xC0) != 0x80)
            return 0;
        *cp = (*cp << 6) | (s[i] & 0x3F);
    }
    if (*cp < min || *cp > 0x10FFFF)
        return 0;
    return len;
}

/* The characters ZooKeeper's PathUtils refuses. */
static bool char_refused(uint32_t cp)
{
    return cp < 0x20 || (cp >= 0x7F && cp <= 0x9F) ||
           (cp >= 0xD800 && cp <= 0xF8FF) || (cp >= 0xFFF0 && cp <= 0xFFFF);
}

static bool component_ok(const char *c, size_t len)
{
    if (len == 0)
        return false; /* double or trailing slash */
    if ((len == 1 && c[0] == '.') || (len == 2 && c[0] == '.' && c[1] == '.'))
        return false;
    return true;
}

static bool chars_ok(const char *path)
{
    const unsigned char *p = (const unsigned char *)path;
    while (*p) {
        uint32_t cp;
        size_t n = utf8_decode(p, &cp);
        if (n == 0 || char_refused(cp))
            return false;
        p += n;
    }
    return true;
}

int zklock__path_check(const char *path)
{
    if (path == NULL || path[0] != '/' || path[1] == '\0')
        return ZKLOCK_EINVAL;
    if (strlen(path) > ZKL_PATH_MAX || !chars_ok(path))
        return ZKLOCK_EINVAL;
    /* /zookeeper holds the server's own nodes. */
    if (strncmp(path, "/zookeeper", 10) == 0 &&
        (path[10] == '\0' || path[10] == '/'))
        return ZKLOCK_EINVAL;
    for (const char *c = path + 1;;) {
        const char *slash = strchr(c, '/');
        size_t len = slash ? (size_t)(slash - c) : strlen(c);
        if (!component_ok(c, len))
            return ZKLOCK_EINVAL;
        if (!slash)
            return 0;
        c = slash + 1;
    }
}

int zklock_path_check(const char *path)
{
    return zklock__path_check(path);
}

char *zklock__child_path(const char *dir, const char *name)
{
    size_t dl = strlen(dir), nl = strlen(name);
    char *p = malloc(dl + 1 + nl + 1);

    if (p) {
        memcpy(p, dir, dl);
        p[dl] = '/';
        memcpy(p + dl + 1, name, nl + 1);
    }
    return p;
}
