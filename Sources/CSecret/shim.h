#pragma once
#include <libsecret/secret.h>

/* SiteKeep's own Secret Service schema. Attributes:
 *   store  - the SiteKeep store this item belongs to (a store id)
 *   kind   - the item kind (slot, team-key, device-key, storage-key, vault-key, ...)
 *   id     - the item's id within its kind
 * SECRET_SCHEMA_DONT_MATCH_NAME is not set: the schema name is matched too, so items of
 * other applications with the same attribute names never match. */
static inline const SecretSchema *sitekeep_secret_schema(void) {
    static const SecretSchema schema = {
        "ai.sgit.SiteKeep.WrappedKey", SECRET_SCHEMA_NONE,
        {
            { "store", SECRET_SCHEMA_ATTRIBUTE_STRING },
            { "kind", SECRET_SCHEMA_ATTRIBUTE_STRING },
            { "id", SECRET_SCHEMA_ATTRIBUTE_STRING },
            { NULL, 0 },
        }
    };
    return &schema;
}
