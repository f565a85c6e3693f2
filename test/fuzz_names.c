/* fuzz_names.c: fuzz target for what zklock reads from outside: lock paths
 * and the child names of a lock path (parsing and queue order), and node
 * data as the utilities print it (tools/escape.c).
 *
 * The input is lines: the first is checked as a lock path (and as a server
 * list: hosts.c), the others are
 * taken as the children of a lock path; the whole input is also node data.
 * Invariants checked:
 *  - a parsed name ends in its tag and its sequence printed as "%010d";
 *  - the sorted queue is ordered (serial-number keys, exclusive first on ties);
 *  - zklock__blocker agrees with a plain reading of the rule;
 *  - node data for a terminal: valid UTF-8 without a control byte (< 0x20,
 *    0x7f), a C1 control or a bidirectional formatting character; escaped
 *    losslessly (unescaping gives the data back); cut within its limit,
 *    at the end of a whole piece, marked "...";
 *  - node data for JSON: a line of printable ASCII that jansson reads back
 *    as it was written, the data itself where it was valid UTF-8.
 * Built with libFuzzer (scripts/test.sh fuzz) or, without it, as a program
 * that replays the files named on its command line (make check replays the
 * seed corpus in test/fuzz-corpus). */
#include "../lib/names.h"
#include "../tools/escape.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define CHECK(cond)                                                    \
    do {                                                               \
        if (!(cond)) {                                                 \
            fprintf(stderr, "invariant failed: %s (%s:%d)\n", #cond,  \
                    __FILE__, __LINE__);                               \
            abort();                                                   \
        }                                                              \
    } while (0)

static void check_entry(const char *name, const struct zkl_entry *e)
{
    char suffix[32];
    const char *tag = zklock__tag_text(e->tag);
    size_t len = strlen(name), sl, tl = strlen(tag);

    if (e->tag == ZKL_TAG_KLEASE) { /* kazoo's lease: 32 hex digits, no sequence */
        CHECK(len == 32 && strspn(name, "0123456789abcdef") == 32);
        return;
    }
    snprintf(suffix, sizeof suffix, "%010d", e->seq);
    sl = strlen(suffix);
    CHECK(len >= sl + tl);
    CHECK(strcmp(name + len - sl, suffix) == 0);
    CHECK(memcmp(name + len - sl - tl, tag, tl) == 0);
}

static void check_queue(struct zkl_entry *q, size_t n)
{
    for (size_t i = 1; i < n; i++) {
        CHECK(q[i - 1].key <= q[i].key);
        if (q[i - 1].key == q[i].key)
            CHECK(!zklock__tag_shared(q[i - 1].tag) || zklock__tag_shared(q[i].tag));
    }
    for (size_t self = 0; self < n; self++) {
        int blockers, want = 0, nearest = -1;
        int w = zklock__blocker(q, self, &blockers);
        for (size_t i = 0; i < self; i++) {
            bool conflict = !q[i].mine &&
                            !(zklock__tag_shared(q[self].tag) && zklock__tag_shared(q[i].tag));
            if (conflict) {
                want++;
                nearest = (int)i;
            }
        }
        CHECK(w == nearest && blockers == want);
    }
}

/* ---- node data, as the utilities print it ------------------------------------ */

/* Characters on the screen: the bytes that do not continue a UTF-8 sequence. */
static size_t screen_chars(const char *t)
{
    size_t n = 0;
    for (; *t; t++)
        n += ((unsigned char)*t & 0xc0) != 0x80;
    return n;
}

/* In valid UTF-8 a lead byte is never a continuation byte, so the byte
 * patterns of these characters cannot match across two others. */
static bool holds_invisible_controls(const char *t)
{
    for (const unsigned char *p = (const unsigned char *)t; *p; p++) {
        if (*p < 0x20 || *p == 0x7f)
            return true;
        if (p[0] == 0xc2 && p[1] >= 0x80 && p[1] <= 0x9f) /* C1 */
            return true;
        if (p[0] == 0xd8 && p[1] == 0x9c) /* U+061C */
            return true;
        if (p[0] == 0xe2 && p[1] == 0x80 && p[2] &&
            (p[2] == 0x8e || p[2] == 0x8f || (p[2] >= 0xa8 && p[2] <= 0xae)))
            return true; /* U+200E, U+200F, U+2028 to U+202E */
        if (p[0] == 0xe2 && p[1] == 0x81 && p[2] >= 0xa6 && p[2] <= 0xa9)
            return true; /* U+2066 to U+2069 */
    }
    return false;
}

static bool valid_utf8(const char *t, size_t len)
{
    json_t *s = json_stringn(t, len); /* jansson takes only valid UTF-8 */
    json_decref(s);
    return s != NULL;
}

static int hex(char c)
{
    return c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10 : -1;
}

/* Undoes tool_text_for_terminal() (uncut) into out; returns the length. */
static size_t unescape(const char *t, unsigned char *out)
{
    size_t n = 0;

    while (*t) {
        if (t[0] != '\\') {
            out[n++] = (unsigned char)*t++;
        } else if (t[1] == '\\') {
            out[n++] = '\\';
            t += 2;
        } else if (t[1] == 'x') {
            CHECK(hex(t[2]) >= 0 && hex(t[3]) >= 0);
            out[n++] = (unsigned char)(hex(t[2]) << 4 | hex(t[3]));
            t += 4;
        } else {
            unsigned c = 0;
            CHECK(t[1] == 'u');
            for (int i = 2; i < 6; i++) {
                CHECK(hex(t[i]) >= 0);
                c = c << 4 | (unsigned)hex(t[i]);
            }
            CHECK(c >= 0x80);
            /* what is escaped this way lies below U+0800 or at U+2xxx */
            if (c < 0x800) {
                out[n++] = (unsigned char)(0xc0 | c >> 6);
            } else {
                out[n++] = (unsigned char)(0xe0 | c >> 12);
                out[n++] = (unsigned char)(0x80 | (c >> 6 & 0x3f));
            }
            out[n++] = (unsigned char)(0x80 | (c & 0x3f));
            t += 6;
        }
    }
    return n;
}

static void check_terminal_text(const uint8_t *data, size_t size)
{
    char *whole = tool_text_for_terminal(data, size, 0), *cut;
    size_t limit = size ? 3 + data[0] % 97 : 3, len, prefix;
    unsigned char *back = malloc(size + 1);

    CHECK(whole && back);
    len = strlen(whole);
    CHECK(valid_utf8(whole, len));
    CHECK(!holds_invisible_controls(whole));
    CHECK(unescape(whole, back) == size && memcmp(back, data, size) == 0);
    cut = tool_text_for_terminal(data, size, limit);
    CHECK(cut);
    CHECK(screen_chars(cut) <= limit);
    if (screen_chars(whole) <= limit) {
        CHECK(strcmp(cut, whole) == 0);
    } else {
        prefix = strlen(cut) - 3;
        CHECK(strlen(cut) >= 3 && strcmp(cut + prefix, "...") == 0);
        CHECK(memcmp(cut, whole, prefix) == 0);
        /* cut between whole pieces: what is kept unescapes to a start of
         * the data (a cut escape or character would not) */
        CHECK(valid_utf8(cut, strlen(cut)));
        cut[prefix] = '\0';
        len = unescape(cut, back);
        CHECK(len <= size && memcmp(back, data, len) == 0);
    }
    free(back);
    free(cut);
    free(whole);
}

static void check_json_text(const uint8_t *data, size_t size)
{
    json_t *text = tool_text_for_json(data, size), *o = json_object(), *back;
    json_error_t error;
    char *line;

    CHECK(text && o && json_object_set(o, "identity", text) == 0);
    line = tool_json_line(o);
    CHECK(line);
    for (const char *p = line; *p; p++)
        CHECK(*p >= 0x20 && *p < 0x7f);
    back = json_loads(line, JSON_ALLOW_NUL, &error); /* the data may hold NULs */
    CHECK(back && json_equal(back, o));
    if (valid_utf8((const char *)data, size))
        CHECK(json_string_length(text) == size &&
              memcmp(json_string_value(text), data, size) == 0);
    json_decref(back);
    free(line);
    json_decref(o);
    json_decref(text);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char *text = malloc(size + 1), *line, *save = NULL;
    struct zkl_entry *q = calloc(size + 1, sizeof *q);
    size_t n = 0;
    bool first = true;

    check_terminal_text(data, size);
    check_json_text(data, size);
    memcpy(text, data, size);
    text[size] = '\0';
    for (line = strtok_r(text, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
        if (first) {
            int rc = zklock__path_check(line);
            CHECK(rc == 0 || rc == ZKLOCK_EINVAL);
            rc = zklock__hosts_check(line); /* the same line as a server list */
            CHECK(rc == 0 || rc == ZKLOCK_EINVAL);
            first = false;
            continue;
        }
        if (zklock__parse_name(line, &q[n]) == 0) {
            check_entry(line, &q[n]);
            q[n].mine = (line[0] & 7) == 7; /* some entries play our strays */
            n++;
        }
    }
    zklock__sort(q, n, n ? q[n / 2].seq : 0);
    check_queue(q, n);
    free(q);
    free(text);
    return 0;
}

#ifndef ZKL_LIBFUZZER
/* Without libFuzzer: replay the inputs named on the command line. */
int main(int argc, char **argv)
{
    for (int i = 1; i < argc; i++) {
        FILE *f = fopen(argv[i], "rb");
        static uint8_t buf[1 << 16];
        size_t n;

        if (!f) {
            perror(argv[i]);
            return 1;
        }
        n = fread(buf, 1, sizeof buf, f);
        fclose(f);
        LLVMFuzzerTestOneInput(buf, n);
    }
    printf("replayed %d inputs\n", argc - 1);
    return 0;
}
#endif
