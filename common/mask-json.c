/*
 * mask-json.c: kiwi_mask_json (mask.h), masking every string of a JSON tree
 * in place. Apart from mask.c so that kiwi_common, which a statically linked
 * guest agent uses, does not need jansson: kiwi_common_json does.
 */
#include <jansson.h>
#include <string.h>

#include "common/cleanup.h"
#include "common/mask.h"

int
kiwi_mask_json (const kiwi_mask *m, json_t *j)
{
    if (kiwi_mask_count (m) == 0 || j == NULL)
        return 0;
    switch (json_typeof (j)) {
    case JSON_STRING: {
        size_t n = json_string_length (j);
        const char *s = json_string_value (j);
        if (!kiwi_mask_hits (m, s, n))
            return 0;
        cleanup_free char *c = malloc (n ? n : 1);
        if (c == NULL)
            return -1;
        memcpy (c, s, n);
        size_t nn = kiwi_mask_apply_buf (m, c, n);
        /* a value that is not UTF-8 may leave a broken sequence: then the
         * whole string goes */
        if (json_string_setn (j, c, nn) == 0)
            return 0;
        return json_string_set (j, KIWI_MASK_REPLACEMENT) < 0 ? -1 : 0;
    }
    case JSON_ARRAY: {
        size_t i;
        json_t *v;
        json_array_foreach (j, i, v)
            if (kiwi_mask_json (m, v) < 0)
                return -1;
        return 0;
    }
    case JSON_OBJECT: {
        const char *k;
        json_t *v;
        size_t renames = 0;
        json_object_foreach (j, k, v)
        {
            if (kiwi_mask_json (m, v) < 0)
                return -1;
            if (kiwi_mask_hits (m, k, strlen (k)))
                renames++;
        }
        /* keys that carry a secret: moved to their masked spelling */
        while (renames-- > 0) {
            const char *bad = NULL;
            json_object_foreach (j, k, v)
                if (kiwi_mask_hits (m, k, strlen (k))) {
                    bad = k;
                    break;
                }
            if (bad == NULL)
                break;
            cleanup_free char *nk = kiwi_mask_apply (m, bad);
            if (nk == NULL)
                return -1;
            json_t *keep = json_incref (json_object_get (j, bad));
            json_object_del (j, bad);
            if (json_object_set_new_nocheck (j, nk, keep) < 0)
                return -1;
        }
        return 0;
    }
    default:
        return 0;
    }
}
