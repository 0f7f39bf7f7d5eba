/* See CSecretLoader.h. */
#include "CSecretLoader.h"

#include <dlfcn.h>
#include <pthread.h>
#include <stddef.h>

/* Layouts as GLib and libsecret declare them (checked by SecretServiceABITests). */
typedef struct { const char *name; int type; } sk_schema_attribute;
typedef struct {
    const char *name;
    int flags;
    sk_schema_attribute attributes[32];
    int reserved;
    void *reserved1, *reserved2, *reserved3, *reserved4, *reserved5, *reserved6, *reserved7;
} sk_schema;
typedef struct sk_glist { void *data; struct sk_glist *next; struct sk_glist *prev; } sk_glist;

/* SiteKeep's own schema. SECRET_SCHEMA_DONT_MATCH_NAME is not set: the name is matched too, so
 * items of other applications with the same attribute names never match. */
static const sk_schema schema = {
    "ai.sgit.SiteKeep.WrappedKey", 0 /* SECRET_SCHEMA_NONE */,
    { { "store", 0 }, { "kind", 0 }, { "id", 0 }, { NULL, 0 } },
    0, NULL, NULL, NULL, NULL, NULL, NULL, NULL
};

static struct {
    uint32_t (*io_error_quark)(void);
    uint32_t (*dbus_error_quark)(void);
    uint32_t (*spawn_error_quark)(void);
    uint32_t (*spawn_exit_error_quark)(void);
    uint32_t (*secret_error_get_quark)(void);
    void (*error_free)(sk_error *);
    sk_cancellable *(*cancellable_new)(void);
    void (*cancellable_cancel)(sk_cancellable *);
    void *(*object_ref)(void *);
    void (*object_unref)(void *);
    void *(*hash_table_new_full)(unsigned (*)(const void *), int (*)(const void *, const void *), void (*)(void *), void (*)(void *));
    int (*hash_table_insert)(void *, void *, void *);
    void *(*hash_table_lookup)(void *, const void *);
    void (*hash_table_unref)(void *);
    unsigned (*str_hash)(const void *);
    int (*str_equal)(const void *, const void *);
    void (*free)(void *);
    char *(*strdup)(const char *);
    void (*list_free_full)(void *, void (*)(void *));
    size_t (*secret_item_get_type)(void);
    int (*type_check_instance_is_a)(void *, size_t);
    sk_value *(*value_new)(const char *, long, const char *);
    void (*value_unref)(void *);
    const char *(*value_get)(sk_value *, size_t *);
    int (*storev_binary_sync)(const sk_schema *, void *, const char *, const char *, sk_value *, sk_cancellable *, sk_error **);
    sk_value *(*lookupv_binary_sync)(const sk_schema *, void *, sk_cancellable *, sk_error **);
    int (*clearv_sync)(const sk_schema *, void *, sk_cancellable *, sk_error **);
    void *(*searchv_sync)(const sk_schema *, void *, int, sk_cancellable *, sk_error **);
    void *(*retrievable_get_attributes)(void *);
    sk_value *(*item_get_secret)(void *);
    void *(*service_get_sync)(int, sk_cancellable *, sk_error **);
    void *(*collection_for_alias_sync)(void *, const char *, int, sk_cancellable *, sk_error **);
    int (*collection_get_locked)(void *);
} api;

static pthread_once_t once = PTHREAD_ONCE_INIT;
static const char *load_error = "libsecret was not loaded";
static int loaded = -1;

#define BIND(field, symbol) \
    do { \
        *(void **)(&api.field) = dlsym(handle, symbol); \
        if (api.field == NULL) { load_error = "libsecret-1.so.0 lacks " symbol "; install a libsecret of version 0.20 or later"; return; } \
    } while (0)

static void load(void) {
    void *handle = dlopen("libsecret-1.so.0", RTLD_NOW | RTLD_LOCAL);
    if (handle == NULL) {
        load_error = "libsecret-1.so.0 is not installed (install libsecret-1-0 to use the Secret Service, or use --keyring file)";
        return;
    }
    BIND(io_error_quark, "g_io_error_quark");
    BIND(dbus_error_quark, "g_dbus_error_quark");
    BIND(spawn_error_quark, "g_spawn_error_quark");
    BIND(spawn_exit_error_quark, "g_spawn_exit_error_quark");
    BIND(secret_error_get_quark, "secret_error_get_quark");
    BIND(error_free, "g_error_free");
    BIND(cancellable_new, "g_cancellable_new");
    BIND(cancellable_cancel, "g_cancellable_cancel");
    BIND(object_ref, "g_object_ref");
    BIND(object_unref, "g_object_unref");
    BIND(hash_table_new_full, "g_hash_table_new_full");
    BIND(hash_table_insert, "g_hash_table_insert");
    BIND(hash_table_lookup, "g_hash_table_lookup");
    BIND(hash_table_unref, "g_hash_table_unref");
    BIND(str_hash, "g_str_hash");
    BIND(str_equal, "g_str_equal");
    BIND(free, "g_free");
    BIND(strdup, "g_strdup");
    BIND(list_free_full, "g_list_free_full");
    BIND(secret_item_get_type, "secret_item_get_type");
    BIND(type_check_instance_is_a, "g_type_check_instance_is_a");
    BIND(value_new, "secret_value_new");
    BIND(value_unref, "secret_value_unref");
    BIND(value_get, "secret_value_get");
    BIND(storev_binary_sync, "secret_password_storev_binary_sync");
    BIND(lookupv_binary_sync, "secret_password_lookupv_binary_sync");
    BIND(clearv_sync, "secret_password_clearv_sync");
    BIND(searchv_sync, "secret_password_searchv_sync");
    BIND(retrievable_get_attributes, "secret_retrievable_get_attributes");
    BIND(item_get_secret, "secret_item_get_secret");
    BIND(service_get_sync, "secret_service_get_sync");
    BIND(collection_for_alias_sync, "secret_collection_for_alias_sync");
    BIND(collection_get_locked, "secret_collection_get_locked");
    loaded = 0;   /* the handle stays open for the life of the process */
}

int sk_secret_load(const char **why) {
    pthread_once(&once, load);
    if (loaded != 0 && why != NULL) *why = load_error;
    return loaded;
}

void sk_error_free(sk_error *error) { api.error_free(error); }
uint32_t sk_quark_io(void) { return api.io_error_quark(); }
uint32_t sk_quark_dbus(void) { return api.dbus_error_quark(); }
uint32_t sk_quark_secret(void) { return api.secret_error_get_quark(); }
uint32_t sk_quark_spawn(void) { return api.spawn_error_quark(); }
uint32_t sk_quark_spawn_exit(void) { return api.spawn_exit_error_quark(); }

sk_cancellable *sk_cancellable_new(void) { return api.cancellable_new(); }
void sk_cancellable_cancel(sk_cancellable *c) { api.cancellable_cancel(c); }
void sk_object_ref(void *object) { api.object_ref(object); }
void sk_object_unref(void *object) { api.object_unref(object); }

sk_table *sk_attributes_new(const char *store, const char *kind, const char *id) {
    /* g_hash_table_new_full aborts on allocation failure rather than returning NULL. */
    void *t = api.hash_table_new_full(api.str_hash, api.str_equal, api.free, api.free);
    api.hash_table_insert(t, api.strdup("store"), api.strdup(store));
    if (kind != NULL) api.hash_table_insert(t, api.strdup("kind"), api.strdup(kind));
    if (id != NULL) api.hash_table_insert(t, api.strdup("id"), api.strdup(id));
    return (sk_table *)t;
}
void sk_table_unref(sk_table *t) { api.hash_table_unref(t); }
const char *sk_table_lookup(sk_table *t, const char *key) { return (const char *)api.hash_table_lookup(t, key); }

sk_value *sk_value_new(const void *bytes, long length) {
    /* secret_value_new copies the bytes; a one-byte dummy gives it a valid pointer when empty. */
    return api.value_new(length > 0 ? (const char *)bytes : "", length, "application/octet-stream");
}
void sk_value_unref(sk_value *v) { api.value_unref(v); }
const void *sk_value_get(sk_value *v, size_t *length) { return api.value_get(v, length); }

int sk_password_store(sk_table *attributes, const char *label, sk_value *value, sk_cancellable *c, sk_error **error) {
    return api.storev_binary_sync(&schema, attributes, NULL, label, value, c, error);
}
sk_value *sk_password_lookup(sk_table *attributes, sk_cancellable *c, sk_error **error) {
    return api.lookupv_binary_sync(&schema, attributes, c, error);
}
int sk_password_clear(sk_table *attributes, sk_cancellable *c, sk_error **error) {
    return api.clearv_sync(&schema, attributes, c, error);
}
sk_list *sk_password_search(sk_table *attributes, int load_secrets, sk_cancellable *c, sk_error **error) {
    int flags = 1 << 1 /* SECRET_SEARCH_ALL */;
    if (load_secrets) flags |= 1 << 3 /* SECRET_SEARCH_LOAD_SECRETS */;
    return (sk_list *)api.searchv_sync(&schema, attributes, flags, c, error);
}

sk_list *sk_list_next(sk_list *l) { return (sk_list *)((sk_glist *)l)->next; }
void *sk_list_data(sk_list *l) { return ((sk_glist *)l)->data; }
void sk_list_free_objects(sk_list *l) { if (l != NULL) api.list_free_full(l, api.object_unref); }

sk_table *sk_item_attributes(void *item) { return item == NULL ? NULL : (sk_table *)api.retrievable_get_attributes(item); }
sk_value *sk_item_secret(void *item) {
    if (item == NULL || !api.type_check_instance_is_a(item, api.secret_item_get_type())) return NULL;
    return api.item_get_secret(item);
}

int sk_default_collection_locked(sk_cancellable *c, sk_error **error) {
    void *service = api.service_get_sync(0 /* SECRET_SERVICE_NONE */, c, error);
    if (*error != NULL) { if (service != NULL) api.object_unref(service); return -2; }
    if (service == NULL) return -2;
    void *collection = api.collection_for_alias_sync(service, "default", 0 /* SECRET_COLLECTION_NONE */, c, error);
    api.object_unref(service);
    if (*error != NULL) { if (collection != NULL) api.object_unref(collection); return -2; }
    if (collection == NULL) return -1;
    int locked = api.collection_get_locked(collection) != 0;
    api.object_unref(collection);
    return locked;
}

size_t sk_schema_size(void) { return sizeof(sk_schema); }
size_t sk_schema_attributes_offset(void) { return offsetof(sk_schema, attributes); }
size_t sk_schema_reserved_offset(void) { return offsetof(sk_schema, reserved); }
