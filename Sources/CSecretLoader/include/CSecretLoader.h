#pragma once
/* The libsecret calls SiteKeep makes, reached through dlopen("libsecret-1.so.0") when the Secret
 * Service keyring is used, so that the file keyring (and every command that uses it) never maps
 * libsecret, GIO, GObject, GLib and libgcrypt, and SiteKeep runs where libsecret is not installed.
 *
 * No GLib header is included here: the few types are declared with their documented, stable
 * layouts (GError, SecretSchema) or kept opaque. SiteKeepKeyringTests checks every constant and
 * layout below against the real headers (SecretServiceABITests). */
#include <stddef.h>
#include <stdint.h>

typedef struct sk_value sk_value;          /* SecretValue */
typedef struct sk_cancellable sk_cancellable; /* GCancellable */
typedef struct sk_table sk_table;          /* GHashTable of gchar* -> gchar* */
typedef struct sk_list sk_list;            /* GList of GObject* */

/* GError, as GLib lays it out. */
typedef struct { uint32_t domain; int code; char *message; } sk_error;

/* Loads libsecret once (later calls return the first result). 0 on success; otherwise -1 and a
 * static message in *why. Every other function requires a successful load. */
int sk_secret_load(const char **why);

void sk_error_free(sk_error *error);
uint32_t sk_quark_io(void);
uint32_t sk_quark_dbus(void);
uint32_t sk_quark_secret(void);
uint32_t sk_quark_spawn(void);
uint32_t sk_quark_spawn_exit(void);

sk_cancellable *sk_cancellable_new(void);
void sk_cancellable_cancel(sk_cancellable *c);
void sk_object_ref(void *object);
void sk_object_unref(void *object);

/* SiteKeep's schema attributes: store, and kind and id when not NULL. */
sk_table *sk_attributes_new(const char *store, const char *kind, const char *id);
void sk_table_unref(sk_table *t);
const char *sk_table_lookup(sk_table *t, const char *key);

sk_value *sk_value_new(const void *bytes, long length);
void sk_value_unref(sk_value *v);
const void *sk_value_get(sk_value *v, size_t *length);

/* SiteKeep's schema ("ai.sgit.SiteKeep.WrappedKey": store, kind, id; the name is matched). */
int sk_password_store(sk_table *attributes, const char *label, sk_value *value, sk_cancellable *c, sk_error **error);
sk_value *sk_password_lookup(sk_table *attributes, sk_cancellable *c, sk_error **error);
int sk_password_clear(sk_table *attributes, sk_cancellable *c, sk_error **error);
/* Every matching item (SECRET_SEARCH_ALL), with secrets when load_secrets is non-zero. */
sk_list *sk_password_search(sk_table *attributes, int load_secrets, sk_cancellable *c, sk_error **error);

sk_list *sk_list_next(sk_list *l);
void *sk_list_data(sk_list *l);
void sk_list_free_objects(sk_list *l);
/* The item's attributes (a new reference), or NULL. */
sk_table *sk_item_attributes(void *item);
/* The item's loaded secret (a new reference), or NULL when the object is not a SecretItem or
 * holds no loaded secret. */
sk_value *sk_item_secret(void *item);

/* The default collection's lock state: 1 locked, 0 unlocked, -1 no default collection, -2 an
 * error (in *error) while connecting to the service or looking it up. */
int sk_default_collection_locked(sk_cancellable *c, sk_error **error);

/* Error codes SiteKeep tells apart (GIOErrorEnum, GDBusError, SecretError). */
enum {
    SK_IO_ERROR_CANCELLED = 19,
    SK_IO_ERROR_TIMED_OUT = 24,
    SK_DBUS_ERROR_SERVICE_UNKNOWN = 2,
    SK_DBUS_ERROR_NAME_HAS_NO_OWNER = 3,
    SK_DBUS_ERROR_NO_REPLY = 4,
    SK_DBUS_ERROR_NO_SERVER = 11,
    SK_DBUS_ERROR_TIMEOUT = 12,
    SK_DBUS_ERROR_DISCONNECTED = 15,
    SK_DBUS_ERROR_TIMED_OUT = 20,
    SK_DBUS_ERROR_SPAWN_EXEC_FAILED = 23,
    SK_DBUS_ERROR_SPAWN_CHILD_EXITED = 25,
    SK_DBUS_ERROR_SPAWN_FAILED = 27,
    SK_DBUS_ERROR_SPAWN_SERVICE_NOT_FOUND = 31,
    SK_DBUS_ERROR_UNKNOWN_OBJECT = 41,
    SK_SECRET_ERROR_IS_LOCKED = 2,
};

/* For the ABI test: the schema's layout as this file declares it. */
size_t sk_schema_size(void);
size_t sk_schema_attributes_offset(void);
size_t sk_schema_reserved_offset(void);
