#pragma once
/* The GIO D-Bus calls SiteKeep makes to show desktop notifications (the freedesktop
 * Notifications API, org.freedesktop.Notifications), reached through dlopen("libgio-2.0.so.0")
 * on first use, as CSecretLoader reaches libsecret: a command that shows no notification never
 * maps GIO, and SiteKeep runs where GLib is missing (it then prints reminders instead).
 *
 * No GLib header is included: GError is declared with its documented, stable layout; every
 * other type is opaque. The variadic GVariant constructors are called here, in C, so Swift
 * never calls a variadic function. */
#include <stdint.h>

typedef struct { uint32_t domain; int code; char *message; } sk_gio_error;
typedef struct sk_gio_connection sk_gio_connection;

/* Loads GIO once. 0 on success; otherwise -1 and a static message in *why. */
int sk_gio_load(const char **why);

void sk_gio_error_free(sk_gio_error *error);

/* The session bus of $DBUS_SESSION_BUS_ADDRESS (a new reference), or NULL with *error. */
sk_gio_connection *sk_gio_session_bus(sk_gio_error **error);
void sk_gio_connection_unref(sk_gio_connection *c);

/* org.freedesktop.Notifications.Notify(app, 0, "", summary, body, actions, hints, timeout):
 * actions is ["default", default_label] when default_label is not NULL; no hints. Returns the server's
 * notification id (> 0), or 0 with *error (no service, a timeout after timeout_call_ms, …). */
uint32_t sk_gio_notify(sk_gio_connection *c, const char *app, const char *summary, const char *body,
                       const char *default_label, int expire_ms, int timeout_call_ms,
                       sk_gio_error **error);

/* Called for each ActionInvoked(id, action_key) signal. */
typedef void (*sk_gio_action_callback)(uint32_t id, const char *action, void *context);

/* A listener for ActionInvoked on `c`: sk_gio_listen_run blocks on the calling thread (on a
 * main context of its own) until sk_gio_listen_stop is called from another thread; free it with
 * sk_gio_listen_free once run has returned. */
typedef struct sk_gio_listener sk_gio_listener;
sk_gio_listener *sk_gio_listen_new(sk_gio_connection *c, sk_gio_action_callback callback, void *context);
void sk_gio_listen_run(sk_gio_listener *l);
void sk_gio_listen_stop(sk_gio_listener *l);
void sk_gio_listen_free(sk_gio_listener *l);

/* The system bus (a new reference), or NULL with *error. */
sk_gio_connection *sk_gio_system_bus(sk_gio_error **error);

/* Whether `name` has an owner on `c` (org.freedesktop.DBus.NameHasOwner); -1 on error. */
int sk_gio_name_has_owner(sk_gio_connection *c, const char *name);

/* Session lock signals: the screensaver's ActiveChanged(true) (org.freedesktop.ScreenSaver and
 * org.gnome.ScreenSaver) on `session`, and logind's Session.Lock on `system` for the object path
 * `logind_session_path` (or any session's when NULL). Either bus may be NULL. `callback` gets
 * 0 for the screensaver, 1 for logind. Run, stop and free as the action listener above. */
typedef void (*sk_gio_lock_callback)(int source, void *context);
typedef struct sk_gio_lock_watch sk_gio_lock_watch;
sk_gio_lock_watch *sk_gio_lock_watch_new(sk_gio_connection *session, sk_gio_connection *system,
                                         const char *logind_session_path, sk_gio_lock_callback callback, void *context);
void sk_gio_lock_watch_run(sk_gio_lock_watch *w);
void sk_gio_lock_watch_stop(sk_gio_lock_watch *w);
void sk_gio_lock_watch_free(sk_gio_lock_watch *w);

/* GDBusError codes SiteKeep tells apart. */
enum {
    SK_GIO_DBUS_ERROR_SERVICE_UNKNOWN = 2,
    SK_GIO_DBUS_ERROR_NAME_HAS_NO_OWNER = 3,
    SK_GIO_DBUS_ERROR_NO_REPLY = 4,
    SK_GIO_DBUS_ERROR_TIMED_OUT = 20,
};
uint32_t sk_gio_quark_dbus(void);
