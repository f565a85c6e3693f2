/* escape.c: text from ZooKeeper made safe for a terminal and for JSON
 * (escape.h says what each promises). */
#include "config.h"

#include "escape.h"

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- UTF-8 -------------------------------------------------------------------- */

/* The length (1 to 4) of the valid UTF-8 sequence at p, with its code point
 * in *cp; 0 if none starts at p. Valid as RFC 3629 and jansson have it: no
 * overlong form, no surrogate, nothing above U+10FFFF. */
static size_t utf8_char(const unsigned char *p, size_t len, uint32_t *cp)
{
    uint32_t c = p[0], least;
    size_t n;

    if (c < 0x80) {
        *cp = c;
        return 1;
    }
    if (c >= 0xc2 && c <= 0xdf)
        n = 2, c &= 0x1f, least = 0x80;
    else if (c >= 0xe0 && c <= 0xef)
        n = 3, c &= 0x0f, least = 0x800;
    else if (c >= 0xf0 && c <= 0xf4)
        n = 4, c &= 0x07, least = 0x10000;
    else
        return 0;
    if (len < n)
        return 0;
    for (size_t i = 1; i < n; i++) {
        if ((p[i] & 0xc0) != 0x80)
            return 0;
        c = c << 6 | (p[i] & 0x3f);
    }
    if (c < least || c > 0x10ffff || (c >= 0xd800 && c <= 0xdfff))
        return 0;
    *cp = c;
    return n;
}

/* ---- for a terminal ------------------------------------------------------------ */

/* Characters that change what a terminal shows rather than show
 * themselves: controls (C0, DEL, C1: ESC and CSI start escape sequences),
 * line and paragraph separators, and the bidirectional formatting
 * characters, which can reorder the rest of a row ("Trojan Source"). */
static bool shows_itself(uint32_t c)
{
    if (c < 0x20 || (c >= 0x7f && c <= 0x9f))
        return false;
    switch (c) {
    case 0x061c: case 0x200e: case 0x200f: case 0x2028: case 0x2029:
    case 0x202a: case 0x202b: case 0x202c: case 0x202d: case 0x202e:
    case 0x2066: case 0x2067: case 0x2068: case 0x2069:
        return false;
    default:
        return true;
    }
}

/* What one character (or one invalid byte) of the input becomes. */
struct piece {
    char text[8];
    size_t bytes; /* of text */
    size_t chars; /* on the screen */
};

/* The piece for the input at p; *used says how many input bytes it takes. */
static struct piece piece_at(const unsigned char *p, size_t len, size_t *used)
{
    struct piece pc = {{0}, 0, 1};
    uint32_t c = 0;
    size_t n = utf8_char(p, len, &c);

    if (n == 0 || (n == 1 && !shows_itself(c))) {
        *used = 1;
        pc.bytes = pc.chars = (size_t)snprintf(pc.text, sizeof pc.text, "\\x%02x", p[0]);
    } else if (!shows_itself(c)) {
        *used = n;
        pc.bytes = pc.chars = (size_t)snprintf(pc.text, sizeof pc.text, "\\u%04x", (unsigned)c);
    } else if (c == '\\') {
        *used = 1;
        memcpy(pc.text, "\\\\", 2);
        pc.bytes = pc.chars = 2;
    } else {
        *used = n;
        memcpy(pc.text, p, n);
        pc.bytes = n;
    }
    return pc;
}

/* The most bytes the result can take (with its NUL), or 0 if that does
 * not fit a size_t: an input byte becomes at most 4 ("\xNN"), a character
 * on the screen takes at most 4 bytes, "..." 3. */
static size_t terminal_room(size_t len, size_t max_chars)
{
    size_t room = len < SIZE_MAX / 4 - 1 ? 4 * len : SIZE_MAX;

    if (max_chars && room > 4 * max_chars)
        room = 4 * max_chars;
    return room == SIZE_MAX ? 0 : room + 4;
}

char *tool_text_for_terminal(const void *data, size_t len, size_t max_chars)
{
    const unsigned char *in = data;
    size_t room, at = 0, out_len = 0, chars = 0, cut_at = 0;
    bool cut_marked = false;
    char *out;

    if (max_chars && max_chars < 3)
        max_chars = 3;
    if (max_chars > SIZE_MAX / 8)
        max_chars = 0; /* no screen is that wide */
    room = terminal_room(len, max_chars);
    if (room == 0 || !(out = malloc(room)))
        return NULL;
    while (at < len) {
        size_t used;
        struct piece pc = piece_at(in + at, len - at, &used);
        /* Where "..." would go if the rest does not fit: after the last
         * piece that leaves room for it. */
        if (max_chars && !cut_marked && chars + pc.chars > max_chars - 3) {
            cut_at = out_len;
            cut_marked = true;
        }
        if (max_chars && chars + pc.chars > max_chars) {
            memcpy(out + cut_at, "...", 3);
            out_len = cut_at + 3;
            break;
        }
        memcpy(out + out_len, pc.text, pc.bytes);
        out_len += pc.bytes;
        chars += pc.chars;
        at += used;
    }
    out[out_len] = '\0';
    return out;
}

/* ---- for JSON -------------------------------------------------------------------- */

json_t *tool_text_for_json(const void *data, size_t len)
{
    static const char replacement[] = "\xef\xbf\xbd"; /* U+FFFD in UTF-8 */
    const unsigned char *in = data;
    size_t at = 0, out_len = 0;
    json_t *str;
    char *out;

    /* An invalid byte (1) becomes 3 bytes; nothing else grows. */
    if (len > SIZE_MAX / 3 || !(out = malloc(3 * len + 1)))
        return NULL;
    while (at < len) {
        uint32_t c;
        size_t n = utf8_char(in + at, len - at, &c);
        if (n == 0) {
            memcpy(out + out_len, replacement, 3);
            out_len += 3;
            at++;
        } else {
            memcpy(out + out_len, in + at, n);
            out_len += n;
            at += n;
        }
    }
    str = json_stringn(out, out_len);
    free(out);
    return str;
}

char *tool_json_line(const json_t *o)
{
    char *line = json_dumps(o, JSON_COMPACT | JSON_ENSURE_ASCII), *out;
    size_t dels = 0, len, at = 0;

    if (!line)
        return NULL;
    len = strlen(line);
    for (size_t i = 0; i < len; i++)
        dels += line[i] == 0x7f;
    if (dels == 0)
        return line;
    /* Outside strings jansson writes no DEL: every one is a string's. */
    out = malloc(len + 5 * dels + 1);
    for (size_t i = 0; out && i < len; i++) {
        if (line[i] == 0x7f) {
            memcpy(out + at, "\\u007f", 6);
            at += 6;
        } else {
            out[at++] = line[i];
        }
    }
    if (out)
        out[at] = '\0';
    free(line);
    return out;
}
