/* See CGioLoader.h. */
#include "CGioLoader.h"

#include <dlfcn.h>
#include <pthread.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

typedef struct sk_variant sk_variant;
typedef struct sk_context sk_context;
typedef void (*sk_signal_cb)(void *, const char *, const char *, const char *, const char *, sk_variant *, void *);

static struct {
    uint32_t (*dbus_error_quark)(void);
    void (*error_free)(sk_gio_error *);
    void *(*bus_get_sync)(int, void *, sk_gio_error **);
    void (*object_unref)(void *);
    sk_variant *(*call_sync)(void *, const char *, const char *, const char *, const char *, sk_variant *, const void *, int, int, void *, sk_gio_error **);
    sk_variant *(*variant_new)(const char *, ...);
    void (*variant_get)(sk_variant *, const char *, ...);
    void (*variant_unref)(sk_variant *);
    unsigned (*signal_subscribe)(void *, const char *, const char *, const char *, const char *, const char *, int, sk_signal_cb, void *, void (*)(void *));
    void (*signal_unsubscribe)(void *, unsigned);
    sk_context *(*context_new)(void);
    void (*context_unref)(sk_context *);
    void (*context_push)(sk_context *);
    void (*context_pop)(sk_context *);
    int (*context_iteration)(sk_context *, int);
    void (*context_wakeup)(sk_context *);
    void (*free)(void *);
} api;

static pthread_once_t once = PTHREAD_ONCE_INIT;
static const char *load_error = "GIO was not loaded";
static int loaded = -1;

#define BIND(field, symbol) \
    do { \
        *(void **)(&api.field) = dlsym(handle, symbol); \
        if (api.field == NULL) { load_error = "libgio-2.0.so.0 lacks " symbol "; install GLib 2.56 or later"; return; } \
    } while (0)

static void load(void) {
    void *handle = dlopen("libgio-2.0.so.0", RTLD_NOW | RTLD_LOCAL);
    if (handle == NULL) { load_error = "libgio-2.0.so.0 is not installed (install libglib2.0-0 for desktop notifications)"; return; }
    BIND(dbus_error_quark, "g_dbus_error_quark");
    BIND(error_free, "g_error_free");
    BIND(bus_get_sync, "g_bus_get_sync");
    BIND(object_unref, "g_object_unref");
    BIND(call_sync, "g_dbus_connection_call_sync");
    BIND(variant_new, "g_variant_new");
    BIND(variant_get, "g_variant_get");
    BIND(variant_unref, "g_variant_unref");
    BIND(signal_subscribe, "g_dbus_connection_signal_subscribe");
    BIND(signal_unsubscribe, "g_dbus_connection_signal_unsubscribe");
    BIND(context_new, "g_main_context_new");
    BIND(context_unref, "g_main_context_unref");
    BIND(context_push, "g_main_context_push_thread_default");
    BIND(context_pop, "g_main_context_pop_thread_default");
    BIND(context_iteration, "g_main_context_iteration");
    BIND(context_wakeup, "g_main_context_wakeup");
    BIND(free, "g_free");
    loaded = 0;
}

int sk_gio_load(const char **why) {
    pthread_once(&once, load);
    if (loaded != 0 && why) *why = load_error;
    return loaded;
}

void sk_gio_error_free(sk_gio_error *error) { if (error) api.error_free(error); }
uint32_t sk_gio_quark_dbus(void) { return api.dbus_error_quark(); }

sk_gio_connection *sk_gio_session_bus(sk_gio_error **error) {
    return (sk_gio_connection *)api.bus_get_sync(2 /* G_BUS_TYPE_SESSION */, NULL, error);
}

void sk_gio_connection_unref(sk_gio_connection *c) { if (c) api.object_unref(c); }

uint32_t sk_gio_notify(sk_gio_connection *c, const char *app, const char *summary, const char *body,
                       const char *default_label, int expire_ms, int timeout_call_ms,
                       sk_gio_error **error) {
    const char *actions[3] = { "default", default_label, NULL };
    /* A GVariant text format string: (susssasa{sv}i). The arrays are built with GVariant's own
     * constructors from the format, so no string of ours is ever parsed as GVariant text. */
    sk_variant *params;
    if (default_label)
        params = api.variant_new("(susss^asa{sv}i)", app, (uint32_t)0, "", summary, body, actions,
                                 NULL, expire_ms);
    else
        params = api.variant_new("(susss^asa{sv}i)", app, (uint32_t)0, "", summary, body, actions + 2,
                                 NULL, expire_ms);
    sk_variant *reply = api.call_sync(c, "org.freedesktop.Notifications", "/org/freedesktop/Notifications",
                                      "org.freedesktop.Notifications", "Notify", params, "(u)",
                                      0 /* G_DBUS_CALL_FLAGS_NONE */, timeout_call_ms, NULL, error);
    if (reply == NULL) return 0;
    uint32_t id = 0;
    api.variant_get(reply, "(u)", &id);
    api.variant_unref(reply);
    return id;
}

struct sk_gio_listener {
    sk_gio_connection *connection;
    sk_context *context;
    sk_gio_action_callback callback;
    void *user;
    unsigned subscription;
    volatile int stop;
};

static void on_signal(void *conn, const char *sender, const char *path, const char *iface, const char *name,
                      sk_variant *parameters, void *user) {
    (void)conn; (void)sender; (void)path; (void)iface; (void)name;
    sk_gio_listener *l = user;
    uint32_t id = 0;
    char *action = NULL;
    api.variant_get(parameters, "(us)", &id, &action);
    if (action) { l->callback(id, action, l->user); api.free(action); }
}

sk_gio_listener *sk_gio_listen_new(sk_gio_connection *c, sk_gio_action_callback callback, void *context) {
    sk_gio_listener *l = calloc(1, sizeof *l);
    if (!l) return NULL;
    l->connection = c;
    l->callback = callback;
    l->user = context;
    l->context = api.context_new();
    return l;
}

void sk_gio_listen_run(sk_gio_listener *l) {
    api.context_push(l->context);
    l->subscription = api.signal_subscribe(l->connection, NULL, "org.freedesktop.Notifications", "ActionInvoked",
                                           "/org/freedesktop/Notifications", NULL, 0, on_signal, l, NULL);
    while (!__atomic_load_n(&l->stop, __ATOMIC_ACQUIRE)) api.context_iteration(l->context, 1);
    api.signal_unsubscribe(l->connection, l->subscription);
    while (api.context_iteration(l->context, 0)) {}
    api.context_pop(l->context);
}

void sk_gio_listen_free(sk_gio_listener *l) {
    if (!l) return;
    api.context_unref(l->context);
    free(l);
}

void sk_gio_listen_stop(sk_gio_listener *l) {
    __atomic_store_n(&l->stop, 1, __ATOMIC_RELEASE);
    api.context_wakeup(l->context);
}

sk_gio_connection *sk_gio_system_bus(sk_gio_error **error) {
    return (sk_gio_connection *)api.bus_get_sync(1 /* G_BUS_TYPE_SYSTEM */, NULL, error);
}

int sk_gio_name_has_owner(sk_gio_connection *c, const char *name) {
    sk_gio_error *error = NULL;
    sk_variant *reply = api.call_sync(c, "org.freedesktop.DBus", "/org/freedesktop/DBus", "org.freedesktop.DBus",
                                      "NameHasOwner", api.variant_new("(s)", name), "(b)", 0, 2000, NULL, &error);
    if (reply == NULL) { sk_gio_error_free(error); return -1; }
    int owned = 0;
    api.variant_get(reply, "(b)", &owned);
    api.variant_unref(reply);
    return owned ? 1 : 0;
}

struct sk_gio_lock_watch {
    sk_gio_connection *session;
    sk_gio_connection *system;
    char *logind_path;
    sk_context *context;
    sk_gio_lock_callback callback;
    void *user;
    unsigned subscriptions[3];
    volatile int stop;
};

static void on_screensaver(void *conn, const char *sender, const char *path, const char *iface, const char *name,
                           sk_variant *parameters, void *user) {
    (void)conn; (void)sender; (void)path; (void)iface; (void)name;
    sk_gio_lock_watch *w = user;
    int active = 0;
    api.variant_get(parameters, "(b)", &active);
    if (active) w->callback(0, w->user);
}

static void on_logind_lock(void *conn, const char *sender, const char *path, const char *iface, const char *name,
                           sk_variant *parameters, void *user) {
    (void)conn; (void)sender; (void)iface; (void)name; (void)parameters;
    sk_gio_lock_watch *w = user;
    if (w->logind_path && path && strcmp(path, w->logind_path) != 0) return;
    w->callback(1, w->user);
}

sk_gio_lock_watch *sk_gio_lock_watch_new(sk_gio_connection *session, sk_gio_connection *system,
                                         const char *logind_session_path, sk_gio_lock_callback callback, void *context) {
    sk_gio_lock_watch *w = calloc(1, sizeof *w);
    if (!w) return NULL;
    w->session = session;
    w->system = system;
    w->logind_path = logind_session_path ? strdup(logind_session_path) : NULL;
    w->callback = callback;
    w->user = context;
    w->context = api.context_new();
    return w;
}

void sk_gio_lock_watch_run(sk_gio_lock_watch *w) {
    api.context_push(w->context);
    if (w->session) {
        w->subscriptions[0] = api.signal_subscribe(w->session, NULL, "org.freedesktop.ScreenSaver", "ActiveChanged",
                                                   NULL, NULL, 0, on_screensaver, w, NULL);
        w->subscriptions[1] = api.signal_subscribe(w->session, NULL, "org.gnome.ScreenSaver", "ActiveChanged",
                                                   NULL, NULL, 0, on_screensaver, w, NULL);
    }
    if (w->system)
        w->subscriptions[2] = api.signal_subscribe(w->system, "org.freedesktop.login1", "org.freedesktop.login1.Session",
                                                   "Lock", NULL, NULL, 0, on_logind_lock, w, NULL);
    while (!__atomic_load_n(&w->stop, __ATOMIC_ACQUIRE)) api.context_iteration(w->context, 1);
    if (w->session) { api.signal_unsubscribe(w->session, w->subscriptions[0]); api.signal_unsubscribe(w->session, w->subscriptions[1]); }
    if (w->system) api.signal_unsubscribe(w->system, w->subscriptions[2]);
    while (api.context_iteration(w->context, 0)) {}
    api.context_pop(w->context);
}

void sk_gio_lock_watch_stop(sk_gio_lock_watch *w) {
    __atomic_store_n(&w->stop, 1, __ATOMIC_RELEASE);
    api.context_wakeup(w->context);
}

void sk_gio_lock_watch_free(sk_gio_lock_watch *w) {
    if (!w) return;
    api.context_unref(w->context);
    free(w->logind_path);
    free(w);
}
