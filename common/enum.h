/*
 * enum.h: an enum and its strings from one X-macro list (libuv's
 * UV_ERRNO_MAP habit), without writing the switch again for each list.
 *
 *   #define KIWI_COLOURS(X) X (KIWI_RED, "red") X (KIWI_BLUE, "blue")
 *   KIWI_ENUM_STR_FN (kiwi_colour_str, kiwi_colour, KIWI_COLOURS)
 *
 * defines `const char *kiwi_colour_str (kiwi_colour v)`, which returns the
 * string of a listed constant and "unknown" for anything else (static
 * storage: never freed). KIWI_ENUM_STR_FN3 takes lists whose entries are
 * X (name, other, str), the string last. Header only: no library to link.
 */
#ifndef KIWI_COMMON_ENUM_H
#define KIWI_COMMON_ENUM_H

#define KIWI__ENUM_CASE(name, str)                                                                           \
    case name:                                                                                               \
        return str;
#define KIWI__ENUM_CASE3(name, other, str)                                                                   \
    case name:                                                                                               \
        return str;

#define KIWI_ENUM_STR_FN(fn, type, LIST)                                                                     \
    const char *fn (type v)                                                                                  \
    {                                                                                                        \
        switch (v) {                                                                                         \
            LIST (KIWI__ENUM_CASE)                                                                           \
        }                                                                                                    \
        return "unknown";                                                                                    \
    }

#define KIWI_ENUM_STR_FN3(fn, type, LIST)                                                                    \
    const char *fn (type v)                                                                                  \
    {                                                                                                        \
        switch (v) {                                                                                         \
            LIST (KIWI__ENUM_CASE3)                                                                          \
        }                                                                                                    \
        return "unknown";                                                                                    \
    }

#endif
