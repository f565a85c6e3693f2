/* common.c: what the zklock utilities share. */
#include "config.h"

#include "common.h"
#include "escape.h"

#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

bool tool_quiet;

static void say(const char *fmt, va_list ap)
{
    /* One line, whole: threads of zklock-bench may say something at once,
     * and stderr is unbuffered. */
    flockfile(stderr);
    fprintf(stderr, "%s: ", tool_name);
    vfprintf(stderr, fmt, ap);
    fputc('\n', stderr);
    funlockfile(stderr);
}

/* Says what ends the run with code: even -q tells a usage error (64, 65),
 * as then nothing ran. */
static void vtell(int code, const char *fmt, va_list ap)
{
    if (!tool_quiet || code == EXIT_USAGE || code == EXIT_BADPATH)
        say(fmt, ap);
}

/* What tool_die() says, without exiting. */
static void tell(int code, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void tell(int code, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vtell(code, fmt, ap);
    va_end(ap);
}

void tool_say(const char *fmt, ...)
{
    va_list ap;
    if (tool_quiet)
        return;
    va_start(ap, fmt);
    say(fmt, ap);
    va_end(ap);
}

void tool_die(int code, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vtell(code, fmt, ap);
    va_end(ap);
    exit(code);
}

void tool_bad_option(int c, char **argv, const char *tool)
{
    char shortopt[3] = {'-', (char)optopt, '\0'};
    const char *last = argv[optind - 1];

    /* An option missing its argument ends the word just passed; an unknown
     * long option is that word, an unknown short one is optopt. */
    if (c == ':')
        tool_die(EXIT_USAGE, "option '%s' needs an argument (try '%s --help')",
                 strncmp(last, "--", 2) == 0 ? last : shortopt, tool);
    tool_die(EXIT_USAGE, "unknown option '%s' (try '%s --help')", optopt ? shortopt : last, tool);
}

const char *tool_servers(const char *option)
{
    const char *env = getenv("ZKLOCK_SERVERS");
    if (option)
        return option;
    return env && *env ? env : "127.0.0.1:2181";
}

double tool_seconds(const char *option, const char *value)
{
    char *end;
    double v;

    errno = 0;
    v = strtod(value, &end);
    /* At most TOOL_MAX_SECONDS: the library takes milliseconds in an int.
     * Written so that "nan" fails too. */
    if (errno || end == value || *end || !(v >= 0 && v <= TOOL_MAX_SECONDS))
        tool_die(EXIT_USAGE, "%s: '%s' is not a number of seconds from 0 to %d (try --help)",
                 option, value, TOOL_MAX_SECONDS);
    return v;
}

int tool_lease(const char *value, const char *tool)
{
    if (strcmp(value, "strict") == 0)
        return ZKLOCK_LEASE_STRICT;
    if (strcmp(value, "session") == 0)
        return ZKLOCK_LEASE_SESSION;
    tool_die(EXIT_USAGE, "--lease: '%s' is neither strict nor session (try '%s --help')", value,
             tool);
    return ZKLOCK_LEASE_STRICT; /* not reached */
}

long tool_integer(const char *option, const char *value, long min, long max)
{
    char *end;
    long v;

    errno = 0;
    v = strtol(value, &end, 10);
    if (errno || end == value || *end || v < min || v > max)
        tool_die(EXIT_USAGE, "%s: '%s' is not a number from %ld to %ld (try --help)", option,
                 value, min, max);
    return v;
}

void tool_check_path(const char *path)
{
    if (zklock_path_check(path) != ZKLOCK_OK)
        tool_die(EXIT_BADPATH,
                 "'%s' is not a lock path (absolute, no '.', '..', empty or trailing "
                 "components, not under /zookeeper)",
                 path);
}

char *tool_identity_text(const char *identity)
{
    char *text = *identity ? tool_text_for_terminal(identity, strlen(identity), TOOL_IDENTITY_SHOWN)
                           : strdup(TOOL_NO_IDENTITY);
    if (!text)
        tool_die(EXIT_OSERR, "out of memory");
    return text;
}

void tool_age(char *buf, size_t len, int64_t ms)
{
    if (ms < 0)
        ms = 0;
    if (ms < 60000)
        snprintf(buf, len, "%.1fs", (double)ms / 1000);
    else if (ms < 3600000)
        snprintf(buf, len, "%lldm%02llds", (long long)(ms / 60000), (long long)(ms / 1000 % 60));
    else
        snprintf(buf, len, "%lldh%02lldm", (long long)(ms / 3600000),
                 (long long)(ms / 60000 % 60));
}

int64_t tool_wall_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

void tool_zk_log(bool verbose)
{
    /* The C client logs to stderr, even an ERROR line for every session
     * closed normally: off unless asked for. */
    zoo_set_debug_level(verbose ? ZOO_LOG_LEVEL_WARN : 0);
}

/* ---- credentials, ACLs, TLS: the options ----------------------------------------- */

bool tool_security_option(struct tool_security *sec, int option, const char *arg)
{
    switch (option) {
    case TOOL_OPT_AUTH_FILE: sec->auth_file = arg; return true;
    case TOOL_OPT_TLS_CA: sec->tls_ca = arg; return true;
    case TOOL_OPT_TLS_CERT: sec->tls_cert = arg; return true;
    case TOOL_OPT_TLS_KEY: sec->tls_key = arg; return true;
    case TOOL_OPT_TLS_KEY_PASSWORD_FILE: sec->tls_key_password_file = arg; return true;
    case TOOL_OPT_ACL_FILE: sec->acl_file = arg; return true;
    case TOOL_OPT_ACL:
        if (strcmp(arg, "open") == 0)
            sec->acl = ZKLOCK_ACL_OPEN;
        else if (strcmp(arg, "creator") == 0)
            sec->acl = ZKLOCK_ACL_CREATOR;
        else
            tool_die(EXIT_USAGE, "--acl: '%s' is neither open nor creator (another ACL: "
                     "--acl-file; try '%s --help')", arg, tool_name);
        return true;
    default:
        return false;
    }
}

static bool uses_tls(const struct tool_security *sec)
{
    return sec->tls_ca || sec->tls_cert || sec->tls_key || sec->tls_key_password_file;
}

static void check_combination(const struct tool_security *sec)
{
    if (sec->acl != ZKLOCK_ACL_DEFAULT && sec->acl_file)
        tool_die(EXIT_USAGE, "choose --acl or --acl-file (try '%s --help')", tool_name);
    if (uses_tls(sec) && !(sec->tls_ca && sec->tls_cert && sec->tls_key))
        tool_die(EXIT_USAGE, "--tls-ca, --tls-cert and --tls-key go together (try '%s --help')",
                 tool_name);
    /* The creator ACL names the session's identities: without any, the
     * server refuses every create (ZINVALIDACL). A TLS client certificate
     * is an identity (x509) too. */
    if (sec->acl == ZKLOCK_ACL_CREATOR && !sec->auth_file && !uses_tls(sec))
        tool_die(EXIT_USAGE, "--acl creator needs --auth-file: the ACL names the identities "
                 "of its credentials (try '%s --help')", tool_name);
}

/* ---- reading files that hold secrets -------------------------------------------------- */

/* More than any credentials or ACL file needs (a credential is at most
 * ZKLOCK_DATA_MAX bytes, an ACL 2 KiB). */
#define TOOL_FILE_MAX (4 * 1024 * 1024)

/* Zeroes a secret in a way the compiler may not drop as a dead store. */
static void wipe(void *p, size_t len)
{
    if (p)
        explicit_bzero(p, len);
}

/* The file at fd, which `what` names, into a new NUL-terminated buffer,
 * leaving no copy behind: read(2) rather than stdio (whose buffer would
 * keep one), and a buffer that grows is wiped before it is freed. */
static char *read_all(int fd, const char *what, size_t *len)
{
    size_t cap = 4096, n = 0;
    char *buf = malloc(cap);

    while (buf) {
        ssize_t got;
        if (n + 1 == cap) {
            char *bigger;
            if (cap >= TOOL_FILE_MAX)
                tool_die(EXIT_USAGE, "%s: more than %d bytes: not a credentials or ACL file",
                         what, TOOL_FILE_MAX);
            bigger = malloc(2 * cap);
            if (bigger)
                memcpy(bigger, buf, n);
            wipe(buf, cap);
            free(buf);
            buf = bigger;
            cap *= 2;
            continue;
        }
        got = read(fd, buf + n, cap - n - 1);
        if (got < 0 && errno == EINTR)
            continue;
        if (got < 0)
            tool_die(EXIT_USAGE, "cannot read %s: %s", what, strerror(errno));
        if (got == 0)
            break;
        n += (size_t)got;
    }
    if (!buf)
        tool_die(EXIT_OSERR, "out of memory");
    buf[n] = '\0';
    *len = n;
    return buf;
}

/* Reads the file at path; with secret, warns when others than its owner
 * may read or write it. Dies with 64 if it cannot be read. */
static char *read_file(const char *path, bool secret, size_t *len)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOCTTY);
    struct stat st;
    char *text;

    if (fd < 0 || fstat(fd, &st) != 0)
        tool_die(EXIT_USAGE, "cannot read %s: %s", path, strerror(errno));
    if (S_ISDIR(st.st_mode))
        tool_die(EXIT_USAGE, "cannot read %s: it is a directory", path);
    /* Checked on what was opened, not on the name. Not a pipe's: <(...)
     * reaches no one else. */
    if (secret && S_ISREG(st.st_mode) &&
        (st.st_mode & (S_IRGRP | S_IWGRP | S_IROTH | S_IWOTH)))
        tool_say("warning: %s holds secrets but others than its owner may read or write "
                 "it (chmod 600 %s)", path, path);
    text = read_all(fd, path, len);
    close(fd);
    return text;
}

/* ---- the lines of a file --------------------------------------------------------------- */

/* One line of a credentials or ACL file, as its reader sees it. */
struct line {
    const char *file;
    unsigned number;
    char *text; /* not NUL-terminated where it ends: len says */
    size_t len;
};

/* Calls take() on every line of text[0..len) that is not blank nor a #
 * comment (after blanks), without its newline and a \r before it (a file
 * written on Windows). */
static void for_each_line(const char *file, char *text, size_t len,
                          void (*take)(struct line *l, void *ctx), void *ctx)
{
    struct line l = {file, 0, NULL, 0};
    char *end = text + len, *next;

    for (char *p = text; p < end; p = next) {
        char *nl = memchr(p, '\n', (size_t)(end - p)), *first = p;
        next = nl ? nl + 1 : end;
        l.number++;
        l.text = p;
        l.len = (size_t)((nl ? nl : end) - p);
        if (l.len > 0 && l.text[l.len - 1] == '\r')
            l.text[--l.len] = '\0';
        while (first < l.text + l.len && (*first == ' ' || *first == '\t'))
            first++;
        if (first < l.text + l.len && *first != '#')
            take(&l, ctx);
    }
}

/* "digest", "sasl", "x509", "ip", "world": letters, digits, '-', '_', '.'. */
static bool is_scheme(const char *s, size_t len)
{
    if (len == 0)
        return false;
    for (size_t i = 0; i < len; i++)
        if (!(s[i] >= 'a' && s[i] <= 'z') && !(s[i] >= 'A' && s[i] <= 'Z') &&
            !(s[i] >= '0' && s[i] <= '9') && !(s[i] && strchr("-_.", s[i])))
            return false;
    return true;
}

static void bad_line(const struct line *l, const char *why) __attribute__((noreturn));
static void bad_line(const struct line *l, const char *why)
{
    /* The line itself is not shown: it may hold a password. */
    tool_die(EXIT_USAGE, "%s:%u: %s", l->file, l->number, why);
}

/* ---- credentials ---------------------------------------------------------------------- */

/* "scheme:data": data is everything after the first colon (bytes, with no
 * end of its own: auth[].len says). The colon becomes the scheme's NUL. */
static void take_credential(struct line *l, void *ctx)
{
    struct tool_security *sec = ctx;
    char *colon = memchr(l->text, ':', l->len);
    size_t scheme_len = colon ? (size_t)(colon - l->text) : 0;
    zklock_auth_t *more;

    if (!colon || !is_scheme(l->text, scheme_len))
        bad_line(l, "not a credential: scheme:data, e.g. digest:user:password");
    if (l->len - scheme_len - 1 == 0)
        bad_line(l, "nothing after the scheme");
    if (l->len - scheme_len - 1 > ZKLOCK_DATA_MAX)
        bad_line(l, "a credential longer than the 1044480 bytes a request can carry");
    /* an array of pointers into the text: growing it copies no secret */
    more = realloc(sec->auth, (sec->nauth + 1) * sizeof *sec->auth);
    if (!more)
        tool_die(EXIT_OSERR, "out of memory");
    sec->auth = more;
    *colon = '\0';
    sec->auth[sec->nauth++] = (zklock_auth_t){l->text, colon + 1, l->len - scheme_len - 1};
}

static void load_credentials(struct tool_security *sec)
{
    sec->auth_text = read_file(sec->auth_file, true, &sec->auth_text_len);
    for_each_line(sec->auth_file, sec->auth_text, sec->auth_text_len, take_credential, sec);
    if (sec->nauth == 0)
        tool_die(EXIT_USAGE, "%s holds no credentials (one scheme:data per line)",
                 sec->auth_file);
}

/* The key's password: the file's first line. */
static void load_tls_key_password(struct tool_security *sec)
{
    size_t len;

    sec->tls_key_password = read_file(sec->tls_key_password_file, true, &len);
    sec->tls_key_password[strcspn(sec->tls_key_password, "\r\n")] = '\0';
}

/* ---- an ACL from a file ------------------------------------------------------------------- */

/* One letter of "crwda" (zkCli's) to its ZOO_PERM_* bit; 0 for another. */
static int32_t perm_of(char letter)
{
    switch (letter) {
    case 'c': return ZOO_PERM_CREATE;
    case 'r': return ZOO_PERM_READ;
    case 'w': return ZOO_PERM_WRITE;
    case 'd': return ZOO_PERM_DELETE;
    case 'a': return ZOO_PERM_ADMIN;
    default: return 0;
    }
}

/* "cdr" to its ZOO_PERM_* bits; 0 if anything else is there. */
static int32_t perms_of(const char *s, size_t len)
{
    int32_t perms = 0;

    for (size_t i = 0; i < len; i++) {
        if (!perm_of(s[i]))
            return 0;
        perms |= perm_of(s[i]);
    }
    return perms;
}

/* The size zklock.h allows a custom ACL (2 KiB), counted as ZooKeeper
 * serializes it: a count, then per entry the perms and two strings, each
 * with its length. */
#define TOOL_ACL_MAX_BYTES 2048
static size_t acl_bytes(const struct ACL_vector *v)
{
    size_t n = 4;
    for (int32_t i = 0; i < v->count; i++)
        n += 4 + 4 + strlen(v->data[i].id.scheme) + 4 + strlen(v->data[i].id.id);
    return n;
}

/* "scheme:id:perms", as zkCli's setAcl: the id is what lies between the
 * first and the last colon (digest ids hold one). Blanks around the line
 * are dropped. Scheme and id become strings in the text. */
static void take_acl_entry(struct line *l, void *ctx)
{
    struct tool_security *sec = ctx;
    char *start = l->text, *end = l->text + l->len, *first, *last;
    struct ACL *more;
    int32_t perms;

    while (start < end && (*start == ' ' || *start == '\t'))
        start++;
    while (end > start && (end[-1] == ' ' || end[-1] == '\t'))
        end--;
    first = memchr(start, ':', (size_t)(end - start));
    last = first ? memrchr(start, ':', (size_t)(end - start)) : NULL;
    if (!first || last == first || !is_scheme(start, (size_t)(first - start)))
        bad_line(l, "not scheme:id:perms (e.g. digest:deploy:<digest>:cdr or world:anyone:r)");
    perms = perms_of(last + 1, (size_t)(end - last - 1));
    if (perms == 0)
        bad_line(l, "the permissions after the last colon must be letters of crwda");
    more = realloc(sec->acl_custom.data, (size_t)(sec->acl_custom.count + 1) * sizeof *more);
    if (!more)
        tool_die(EXIT_OSERR, "out of memory");
    sec->acl_custom.data = more;
    *first = *last = '\0';
    more[sec->acl_custom.count++] = (struct ACL){perms, {start, first + 1}};
}

static void load_acl(struct tool_security *sec)
{
    size_t len;

    sec->acl_text = read_file(sec->acl_file, false, &len);
    for_each_line(sec->acl_file, sec->acl_text, len, take_acl_entry, sec);
    if (sec->acl_custom.count == 0)
        tool_die(EXIT_USAGE, "%s holds no ACL entry (one scheme:id:perms per line)",
                 sec->acl_file);
    if (acl_bytes(&sec->acl_custom) > TOOL_ACL_MAX_BYTES)
        tool_die(EXIT_USAGE, "%s: an ACL larger than the %d bytes zklock lets a create carry",
                 sec->acl_file, TOOL_ACL_MAX_BYTES);
    sec->acl = ZKLOCK_ACL_CUSTOM;
}

/* ---- credentials, ACLs, TLS: into the session ---------------------------------------- */

void tool_security_load(struct tool_security *sec, zklock_session_opts_t *opts)
{
    const char *env = getenv("ZKLOCK_AUTH_FILE");

    if (!sec->auth_file && env && *env)
        sec->auth_file = env;
    check_combination(sec);
    if (sec->auth_file)
        load_credentials(sec);
    if (sec->acl_file)
        load_acl(sec);
    if (sec->tls_key_password_file)
        load_tls_key_password(sec);
    opts->auth = sec->auth;
    opts->nauth = sec->nauth;
    opts->acl = sec->acl;
    opts->acl_custom = sec->acl_file ? &sec->acl_custom : NULL;
    opts->tls_ca = sec->tls_ca;
    opts->tls_cert = sec->tls_cert;
    opts->tls_key = sec->tls_key;
    opts->tls_key_password = sec->tls_key_password;
}

void tool_security_forget(struct tool_security *sec)
{
    wipe(sec->auth_text, sec->auth_text_len);
    free(sec->auth_text);
    free(sec->auth);
    if (sec->tls_key_password)
        wipe(sec->tls_key_password, strlen(sec->tls_key_password));
    free(sec->tls_key_password);
    free(sec->acl_text);
    free(sec->acl_custom.data);
    sec->auth_text = sec->tls_key_password = sec->acl_text = NULL;
    sec->auth = NULL;
    sec->auth_text_len = sec->nauth = 0;
    sec->acl_custom = (struct ACL_vector){0, NULL};
}

/* ---- opening a session, and saying why ZooKeeper refused ----------------------------------- */

/* The host names of a server list the library found well formed, for a
 * message: "zk1, zk2" of "zk1:2181,zk2:2181/chroot". Dies if out of memory. */
static char *host_names(const char *servers)
{
    size_t len = strcspn(servers, "/");
    char *names = malloc(2 * len + 1), *out = names;
    const char *p = servers, *end = servers + len;

    if (!names)
        tool_die(EXIT_OSERR, "out of memory");
    while (p < end) {
        const char *entry = p, *stop = memchr(p, ',', (size_t)(end - p)), *colon = NULL;
        if (!stop)
            stop = end;
        for (const char *c = entry; c < stop; c++)
            if (*c == ':')
                colon = c; /* the port follows the last one */
        while (entry < stop && (*entry == ' ' || *entry == '\t'))
            entry++;
        if (colon && colon > entry) {
            if (out > names)
                out += sprintf(out, ", ");
            memcpy(out, entry, (size_t)(colon - entry));
            out += colon - entry;
        }
        p = stop + 1;
    }
    *out = '\0';
    return names;
}

zklock_session_t *tool_open(const char *servers, const zklock_session_opts_t *opts,
                            const struct tool_security *sec)
{
    zklock_session_t *s;
    int rc = zklock_session_open(&s, servers, opts);

    if (rc == ZKLOCK_ENOSERVER)
        tool_die(EXIT_UNREACHABLE, "no ZooKeeper server answered at %s", servers);
    if (rc == ZKLOCK_ERESOLVE) {
        char *names = host_names(servers);
        tool_die(EXIT_UNREACHABLE, "cannot resolve the server name%s %s (of %s): check %s, "
                 "or DNS", strchr(names, ',') ? "s" : "", names, servers,
                 strchr(names, ',') ? "them" : "it");
    }
    if (rc == ZKLOCK_ENOTSUP)
        tool_die(EXIT_USAGE, "this build's ZooKeeper client has no TLS: --tls-ca, --tls-cert "
                 "and --tls-key need one built with OpenSSL");
    if (rc == ZAUTHFAILED && sec->auth_file)
        tool_die(EXIT_NOPERM, "the server rejected the credentials in %s", sec->auth_file);
    if (rc == ZAUTHFAILED)
        tool_die(EXIT_NOPERM, "the server rejected this client's credentials (its TLS certificate)");
    if (rc == ZKLOCK_EINVAL)
        tool_die(EXIT_USAGE, "cannot use the server list '%s' (host:port,host:port...)", servers);
    if (rc)
        tool_die(EXIT_UNREACHABLE, "cannot open a session at %s: %s", servers,
                 zklock_strerror(rc));
    return s;
}

/* Who the session is, for a refusal: a hint at what to change. */
static const char *identity_hint(const struct tool_security *sec, char *buf, size_t len)
{
    if (!sec->auth_file)
        return "this client gave no credentials: see --auth-file";
    snprintf(buf, len, "as the identities in %s", sec->auth_file);
    return buf;
}

/* The node whose ACL refused creating a lock node at path: path itself if
 * it exists (creating a child needs CREATE there), else its deepest
 * existing ancestor (creating the next level needs CREATE there). Found
 * with zoo_exists, which no ACL restricts. NULL if unknown (no connection).
 * The caller frees it. */
static char *refusing_node(zklock_session_t *s, const char *path)
{
    zhandle_t *zh = zklock_session_zhandle(s);
    char *node = strdup(path);

    while (zh && node) {
        struct Stat st;
        char *slash;
        int rc = zoo_exists(zh, node, 0, &st);
        if (rc == ZOK)
            return node;
        if (rc != ZNONODE || strcmp(node, "/") == 0)
            break;
        slash = strrchr(node, '/');
        slash[slash == node ? 1 : 0] = '\0'; /* "/a/b" -> "/a", "/a" -> "/" */
    }
    free(node);
    return NULL;
}

int tool_acquire_failed(zklock_session_t *s, const char *path, int rc,
                        const struct tool_security *sec)
{
    char hint[1024];

    switch (rc) {
    case ZNOAUTH: {
        char *node = refusing_node(s, path);
        tell(EXIT_NOPERM, "cannot take %s: not allowed by the ACL of %s%s (%s)", path,
             node ? node : path, node ? "" : " or of one of its parents",
             identity_hint(sec, hint, sizeof hint));
        free(node);
        return EXIT_NOPERM;
    }
    case ZAUTHFAILED:
        if (sec->auth_file)
            tell(EXIT_NOPERM, "cannot take %s: the server rejected the credentials in %s",
                 path, sec->auth_file);
        else
            tell(EXIT_NOPERM, "cannot take %s: the server rejected this client's credentials",
                 path);
        return EXIT_NOPERM;
    case ZINVALIDACL:
        if (sec->acl == ZKLOCK_ACL_CREATOR)
            tell(EXIT_USAGE, "cannot take %s: --acl creator needs --auth-file (the server "
                 "found no identity for the creator ACL)", path);
        else if (sec->acl_file)
            tell(EXIT_USAGE, "cannot take %s: the server refused the ACL in %s as invalid",
                 path, sec->acl_file);
        else
            tell(EXIT_USAGE, "cannot take %s: %s", path, zklock_strerror(rc));
        return EXIT_USAGE;
    case ZKLOCK_EMISMATCH:
        tell(EXIT_USAGE, "cannot take %s: %s", path, zklock_strerror(rc));
        return EXIT_USAGE;
    case ZCONNECTIONLOSS:
        tell(EXIT_UNREACHABLE, "no connection to ZooKeeper to try %s", path);
        return EXIT_UNREACHABLE;
    default:
        tell(EXIT_UNREACHABLE, "cannot take %s: %s", path, zklock_strerror(rc));
        return EXIT_UNREACHABLE;
    }
}

/* Reading a queue lists the lock path (READ on it) and reads each lock
 * node (READ on each): whose ACL refused? path, "one of its lock nodes",
 * or NULL if unknown. */
static const char *refusing_reader(zklock_session_t *s, const char *path)
{
    zhandle_t *zh = zklock_session_zhandle(s);
    struct String_vector names = {0, NULL};
    int rc = zh ? zoo_get_children(zh, path, 0, &names) : ZCONNECTIONLOSS;

    deallocate_String_vector(&names);
    if (rc == ZNOAUTH)
        return path;
    return rc == ZOK ? "one of its lock nodes" : NULL;
}

int tool_read_failed(zklock_session_t *s, const char *path, int rc,
                     const struct tool_security *sec)
{
    /* zklock-ls -R reads paths made of the server's node names */
    char hint[1024], *shown = tool_text_for_terminal(path, strlen(path), 0);
    const char *who;

    if (!shown)
        tool_die(EXIT_OSERR, "out of memory");
    if (rc != ZNOAUTH) {
        tell(EXIT_UNREACHABLE, "%s: %s", shown, zklock_strerror(rc));
        free(shown);
        return EXIT_UNREACHABLE;
    }
    who = refusing_reader(s, path);
    tell(EXIT_NOPERM, "%s: not allowed by the ACL of %s%s (reading needs READ; %s)", shown,
         who && who != path ? who : shown, who ? "" : " or of its lock nodes",
         identity_hint(sec, hint, sizeof hint));
    free(shown);
    return EXIT_NOPERM;
}
