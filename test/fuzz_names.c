/* fuzz_names.c: fuzz target for what zklock reads from outside: lock paths
 * and the child names of a lock path (parsing and queue order).
 *
 * The input is lines: the first is checked as a lock path, the others are
 * taken as the children of a lock path. Invariants checked:
 *  - a parsed name ends in its tag and its sequence printed as "%010d";
 *  - the sorted queue is ordered (serial-number keys, exclusive first on ties);
 *  - zklock__blocker agrees with a plain reading of the rule.
 * Built with libFuzzer (scripts/test.sh fuzz) or, without it, as a program
 * that replays the files named on its command line (make check replays the
 * seed corpus in test/fuzz-corpus). */
#include "../lib/internal.h"

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

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char *text = malloc(size + 1), *line, *save = NULL;
    struct zkl_entry *q = calloc(size + 1, sizeof *q);
    size_t n = 0;
    bool first = true;

    memcpy(text, data, size);
    text[size] = '\0';
    for (line = strtok_r(text, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
        if (first) {
            int rc = zklock__path_check(line);
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
