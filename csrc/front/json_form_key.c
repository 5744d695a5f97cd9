/* The key of a subschema handed to the caller's converter: see json_form_key.h. */
#include "json_form_key.h"

int json_form_key(const json_dom *d, const char *type, const int32_t *members, size_t n, json_text *out) {
    int r = json_puts(out, "{\"type\":\"");
    if (r == JSON_DOM_OK) r = json_puts(out, type);
    if (r == JSON_DOM_OK) r = json_puts(out, "\"");
    for (size_t i = 0; i < n && r == JSON_DOM_OK; i++) {
        if (members[i] < 0) continue;
        const json_dom_node *m = &d->nodes.data[members[i]];
        if (m->key_off < 0 || !m->key_plain) return JSON_DOM_NO;
        if ((r = json_puts(out, ",\"")) || (r = json_put(out, d->s + m->key_off, (size_t)m->key_len)) ||
            (r = json_puts(out, "\":")))
            break;
        switch (m->kind) {
        case JSON_DOM_STR:
            if ((r = json_puts(out, "\"")) == JSON_DOM_OK && (r = json_put(out, d->s + m->off, (size_t)m->len)) == JSON_DOM_OK)
                r = json_puts(out, "\"");
            break;
        case JSON_DOM_NUM: r = json_put(out, d->s + m->off, (size_t)m->len); break;
        case JSON_DOM_TRUE: r = json_puts(out, "true"); break;
        case JSON_DOM_FALSE: r = json_puts(out, "false"); break;
        default: return JSON_DOM_NO;
        }
    }
    return r == JSON_DOM_OK ? json_puts(out, "}") : r;
}
