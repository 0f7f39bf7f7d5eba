#pragma once
/* GTK 4 and WebKitGTK 6.0 for sitekeep-browser, with the few helpers Swift cannot write itself:
 * g_object_new (variadic) for a web view bound to a network session and a user content manager,
 * typed signal connections whose C callbacks carry a context pointer (g_signal_connect is a
 * macro over G_CALLBACK casts), and the g_idle_add hand-off that runs work on GTK's main loop
 * (while that loop runs, @MainActor jobs and DispatchQueue.main never run). Header-only. */
#include <gtk/gtk.h>
#include <webkit/webkit.h>
#include <jsc/jsc.h>
#include <glib-unix.h>
#include <dlfcn.h>
#include <string.h>

/* A web view on `session` whose page scripts come from `manager` (both construct-only). */
static inline WebKitWebView *skb_web_view_new(WebKitNetworkSession *session, WebKitUserContentManager *manager,
                                              WebKitSettings *settings) {
    return WEBKIT_WEB_VIEW(g_object_new(WEBKIT_TYPE_WEB_VIEW, "network-session", session,
                                        "user-content-manager", manager, "settings", settings, NULL));
}

/* Casts Swift cannot spell (GObject's macros). */
static inline GtkWidget *skb_widget(void *object) { return GTK_WIDGET(object); }
static inline GObject *skb_object(void *object) { return G_OBJECT(object); }
static inline GtkWindow *skb_window(void *object) { return GTK_WINDOW(object); }
static inline GApplication *skb_application(void *object) { return G_APPLICATION(object); }
static inline GtkEditable *skb_editable(void *object) { return GTK_EDITABLE(object); }
/* The text of `widget` when it is a label, or a list box row holding one; NULL otherwise. */
static inline const char *skb_label_text(GtkWidget *widget) {
    if (GTK_IS_LIST_BOX_ROW(widget)) widget = gtk_list_box_row_get_child(GTK_LIST_BOX_ROW(widget));
    return widget && GTK_IS_LABEL(widget) ? gtk_label_get_text(GTK_LABEL(widget)) : NULL;
}

/* --- Running work on the GLib main loop from any thread ------------------------------------ */
typedef void (*skb_context_fn)(void *context);
typedef struct { skb_context_fn fn; void *context; } skb_idle_call;
static gboolean skb_idle_trampoline(gpointer data) {
    skb_idle_call *call = (skb_idle_call *)data;
    call->fn(call->context);
    g_free(call);
    return G_SOURCE_REMOVE;
}
/* Runs fn(context) once on the default main context. Thread-safe. */
static inline void skb_idle_add(skb_context_fn fn, void *context) {
    skb_idle_call *call = g_new(skb_idle_call, 1);
    call->fn = fn;
    call->context = context;
    g_idle_add_full(G_PRIORITY_DEFAULT, skb_idle_trampoline, call, NULL);
}
/* Calls fn(context) every `ms` milliseconds until it returns FALSE. */
typedef gboolean (*skb_timer_fn)(void *context);
static inline guint skb_timeout_add(guint ms, skb_timer_fn fn, void *context) {
    return g_timeout_add(ms, (GSourceFunc)fn, context);
}

/* --- Typed signal connections ---------------------------------------------------------------
 * Each takes a context pointer and a destroy notify (called when the handler is disconnected or
 * the instance finalised), so Swift can hand over a retained reference. */
#define SKB_CONNECT(instance, signal, cb, ctx, destroy) \
    g_signal_connect_data((instance), (signal), G_CALLBACK(cb), (ctx), (GClosureNotify)(destroy), G_CONNECT_DEFAULT)
typedef void (*skb_destroy_fn)(void *context, void *closure);

/* (instance, ctx) -> void: GtkApplication::activate, GtkEntry::activate, GtkWindow::destroy */
typedef void (*skb_void_fn)(void *instance, void *context);
static inline gulong skb_connect_void(void *instance, const char *signal, skb_void_fn cb, void *ctx, skb_destroy_fn destroy) {
    return SKB_CONNECT(instance, signal, cb, ctx, destroy);
}
/* (instance, ctx) -> gboolean: GtkWindow::close-request */
typedef gboolean (*skb_bool_fn)(void *instance, void *context);
static inline gulong skb_connect_bool(void *instance, const char *signal, skb_bool_fn cb, void *ctx, skb_destroy_fn destroy) {
    return SKB_CONNECT(instance, signal, cb, ctx, destroy);
}
/* (instance, GParamSpec*, ctx) -> void: notify::title, notify::uri */
typedef void (*skb_notify_fn)(void *instance, GParamSpec *pspec, void *context);
static inline gulong skb_connect_notify(void *instance, const char *signal, skb_notify_fn cb, void *ctx, skb_destroy_fn destroy) {
    return SKB_CONNECT(instance, signal, cb, ctx, destroy);
}
/* WebKitWebView::load-changed (view, event, ctx) */
typedef void (*skb_load_changed_fn)(WebKitWebView *view, WebKitLoadEvent event, void *context);
static inline gulong skb_connect_load_changed(WebKitWebView *view, skb_load_changed_fn cb, void *ctx, skb_destroy_fn destroy) {
    return SKB_CONNECT(view, "load-changed", cb, ctx, destroy);
}
/* WebKitWebView::load-failed (view, event, uri, error, ctx) -> handled */
typedef gboolean (*skb_load_failed_fn)(WebKitWebView *view, WebKitLoadEvent event, const char *uri, GError *error, void *context);
static inline gulong skb_connect_load_failed(WebKitWebView *view, skb_load_failed_fn cb, void *ctx, skb_destroy_fn destroy) {
    return SKB_CONNECT(view, "load-failed", cb, ctx, destroy);
}
/* WebKitWebView::decide-policy (view, decision, type, ctx) -> handled */
typedef gboolean (*skb_decide_policy_fn)(WebKitWebView *view, WebKitPolicyDecision *decision, WebKitPolicyDecisionType type, void *context);
static inline gulong skb_connect_decide_policy(WebKitWebView *view, skb_decide_policy_fn cb, void *ctx, skb_destroy_fn destroy) {
    return SKB_CONNECT(view, "decide-policy", cb, ctx, destroy);
}
/* WebKitWebView::resource-load-started (view, resource, request, ctx) */
typedef void (*skb_resource_fn)(WebKitWebView *view, WebKitWebResource *resource, WebKitURIRequest *request, void *context);
static inline gulong skb_connect_resource_load_started(WebKitWebView *view, skb_resource_fn cb, void *ctx, skb_destroy_fn destroy) {
    return SKB_CONNECT(view, "resource-load-started", cb, ctx, destroy);
}
/* WebKitWebView::web-process-terminated (view, reason, ctx) */
typedef void (*skb_terminated_fn)(WebKitWebView *view, WebKitWebProcessTerminationReason reason, void *context);
static inline gulong skb_connect_web_process_terminated(WebKitWebView *view, skb_terminated_fn cb, void *ctx, skb_destroy_fn destroy) {
    return SKB_CONNECT(view, "web-process-terminated", cb, ctx, destroy);
}
/* WebKitUserContentManager::script-message-with-reply-received::NAME (manager, value, reply, ctx) -> handled */
typedef gboolean (*skb_message_reply_fn)(WebKitUserContentManager *manager, JSCValue *value, WebKitScriptMessageReply *reply, void *context);
static inline gulong skb_connect_message_with_reply(WebKitUserContentManager *manager, const char *name, skb_message_reply_fn cb, void *ctx, skb_destroy_fn destroy) {
    char *signal = g_strconcat("script-message-with-reply-received::", name, NULL);
    gulong id = SKB_CONNECT(manager, signal, cb, ctx, destroy);
    g_free(signal);
    return id;
}
/* WebKitUserContentManager::script-message-received::NAME (manager, value, ctx) */
typedef void (*skb_message_fn)(WebKitUserContentManager *manager, JSCValue *value, void *context);
static inline gulong skb_connect_message(WebKitUserContentManager *manager, const char *name, skb_message_fn cb, void *ctx, skb_destroy_fn destroy) {
    char *signal = g_strconcat("script-message-received::", name, NULL);
    gulong id = SKB_CONNECT(manager, signal, cb, ctx, destroy);
    g_free(signal);
    return id;
}
/* GNetworkMonitor::network-changed (monitor, available, ctx) */
typedef void (*skb_network_changed_fn)(GNetworkMonitor *monitor, gboolean available, void *context);
static inline gulong skb_connect_network_changed(GNetworkMonitor *monitor, skb_network_changed_fn cb, void *ctx, skb_destroy_fn destroy) {
    return SKB_CONNECT(monitor, "network-changed", cb, ctx, destroy);
}
/* GtkEventControllerKey::key-pressed (controller, keyval, keycode, state, ctx) -> handled */
typedef gboolean (*skb_key_fn)(GtkEventControllerKey *controller, guint keyval, guint keycode, GdkModifierType state, void *context);
static inline gulong skb_connect_key_pressed(GtkEventController *controller, skb_key_fn cb, void *ctx, skb_destroy_fn destroy) {
    return SKB_CONNECT(controller, "key-pressed", cb, ctx, destroy);
}
/* GtkEventControllerLegacy::event (controller, event, ctx) -> handled */
typedef gboolean (*skb_event_fn)(GtkEventControllerLegacy *controller, GdkEvent *event, void *context);
static inline gulong skb_connect_event(GtkEventController *controller, skb_event_fn cb, void *ctx, skb_destroy_fn destroy) {
    return SKB_CONNECT(controller, "event", cb, ctx, destroy);
}
/* GtkNotebook::switch-page (notebook, page, index, ctx) */
typedef void (*skb_switch_page_fn)(GtkNotebook *notebook, GtkWidget *page, guint index, void *context);
static inline gulong skb_connect_switch_page(GtkNotebook *notebook, skb_switch_page_fn cb, void *ctx, skb_destroy_fn destroy) {
    return SKB_CONNECT(notebook, "switch-page", cb, ctx, destroy);
}

/* --- Responses ---------------------------------------------------------------------------- */
/* A response's Content-Disposition (several headers joined with ", "), newly allocated; NULL when
 * it has none. */
static inline char *skb_content_disposition(WebKitURIResponse *response) {
    SoupMessageHeaders *headers = response ? webkit_uri_response_get_http_headers(response) : NULL;
    const char *value = headers ? soup_message_headers_get_list(headers, "Content-Disposition") : NULL;
    return value ? g_strdup(value) : NULL;
}

/* --- Downloads: none (docs/browser.md, "Downloads") -----------------------------------------
 * WebKitNetworkSession::download-started (session, download, ctx). Every site's session has a
 * handler that refuses each download (skb_refuse_download), whatever started it. */
typedef void (*skb_download_started_fn)(WebKitNetworkSession *session, WebKitDownload *download, void *context);
static inline gulong skb_connect_download_started(WebKitNetworkSession *session, skb_download_started_fn cb, void *ctx, skb_destroy_fn destroy) {
    return SKB_CONNECT(session, "download-started", cb, ctx, destroy);
}
/* WebKitDownload::decide-destination, refused: the download is cancelled and TRUE is returned
 * with no destination set, so WebKit's default handler (the XDG download folder, or $HOME when
 * none is set) never runs and the download never gets a file. */
static gboolean skb_refuse_destination(WebKitDownload *download, gchar *suggested_filename, gpointer unused) {
    (void)suggested_filename;
    (void)unused;
    webkit_download_cancel(download);
    return TRUE;
}
/* Refuses `download`: its decide-destination refuses (should WebKit still ask for one), and it is
 * cancelled now. */
static inline void skb_refuse_download(WebKitDownload *download) {
    g_signal_connect(download, "decide-destination", G_CALLBACK(skb_refuse_destination), NULL);
    webkit_download_cancel(download);
}
/* The URI a download asked for (NULL when it has no request). */
static inline const char *skb_download_uri(WebKitDownload *download) {
    WebKitURIRequest *request = webkit_download_get_request(download);
    return request ? webkit_uri_request_get_uri(request) : NULL;
}

/* --- Async calls with a context pointer ---------------------------------------------------- */
typedef void (*skb_async_fn)(GObject *source, GAsyncResult *result, void *context);
/* webkit_web_view_evaluate_javascript in `world` (NULL: the page's world). */
static inline void skb_evaluate(WebKitWebView *view, const char *script, const char *world, skb_async_fn cb, void *ctx) {
    webkit_web_view_evaluate_javascript(view, script, -1, world, NULL, NULL, (GAsyncReadyCallback)cb, ctx);
}
/* webkit_web_view_call_async_javascript_function in `world`: `body` is a function body, and a
 * promise it returns is awaited. */
static inline void skb_call_async(WebKitWebView *view, const char *body, const char *world, skb_async_fn cb, void *ctx) {
    webkit_web_view_call_async_javascript_function(view, body, -1, NULL, world, NULL, NULL, (GAsyncReadyCallback)cb, ctx);
}
static inline void skb_resource_data(WebKitWebResource *resource, skb_async_fn cb, void *ctx) {
    webkit_web_resource_get_data(resource, NULL, (GAsyncReadyCallback)cb, ctx);
}
static inline void skb_snapshot(WebKitWebView *view, skb_async_fn cb, void *ctx) {
    webkit_web_view_get_snapshot(view, WEBKIT_SNAPSHOT_REGION_VISIBLE, WEBKIT_SNAPSHOT_OPTIONS_NONE, NULL, (GAsyncReadyCallback)cb, ctx);
}

/* A PNG of what `widget` (a whole window) shows now, rendered by its own renderer. */
static inline gboolean skb_widget_png(GtkWidget *widget, const char *path) {
    GdkPaintable *paintable = gtk_widget_paintable_new(widget);
    int w = gtk_widget_get_width(widget), h = gtk_widget_get_height(widget);
    if (w <= 0 || h <= 0) { g_object_unref(paintable); return FALSE; }
    GtkSnapshot *snapshot = gtk_snapshot_new();
    gdk_paintable_snapshot(paintable, snapshot, w, h);
    GskRenderNode *node = gtk_snapshot_free_to_node(snapshot);
    gboolean ok = FALSE;
    if (node) {
        GskRenderer *renderer = gtk_native_get_renderer(gtk_widget_get_native(widget));
        graphene_rect_t bounds = GRAPHENE_RECT_INIT(0, 0, w, h);
        GdkTexture *texture = gsk_renderer_render_texture(renderer, node, &bounds);
        if (texture) { ok = gdk_texture_save_to_png(texture, path); g_object_unref(texture); }
        gsk_render_node_unref(node);
    }
    g_object_unref(paintable);
    return ok;
}

/* Calls fn(context) on the main loop when `signum` (SIGTERM, SIGINT) arrives. */
static inline guint skb_unix_signal_add(int signum, skb_timer_fn fn, void *context) {
    return g_unix_signal_add(signum, (GSourceFunc)fn, context);
}

/* --- Automation: real input through the X server (XTest), for tests under Xvfb ---------------
 * `--automation`'s key, click and close commands go through the X server as a keyboard, a mouse
 * and a window manager would: XTest's fake key and button events (which GDK receives from the
 * server like any other device's), and WM_DELETE_WINDOW. So a test exercises GDK's translation,
 * GTK's controllers and WebKit's own handling, never a shortcut call. libX11 and libXtst are
 * opened at run time, only when such a command comes: the browser links neither. All FALSE (and
 * nothing sent) when the window is not on an X11 display or the libraries are missing. */
typedef struct {
    void *dpy;
    unsigned char (*keysym_to_keycode)(void *, unsigned long);
    int (*sync)(void *, int);
    unsigned long (*intern_atom)(void *, const char *, int);
    int (*send_event)(void *, unsigned long, int, long, void *);
    unsigned long (*default_root)(void *);
    int (*translate)(void *, unsigned long, unsigned long, int, int, int *, int *, unsigned long *);
    int (*set_focus)(void *, unsigned long, int, unsigned long);
    int (*raise)(void *, unsigned long);
    int (*fake_key)(void *, unsigned int, int, unsigned long);
    int (*fake_button)(void *, unsigned int, int, unsigned long);
    int (*fake_motion)(void *, int, int, int, unsigned long);
    unsigned long (*surface_xid)(GdkSurface *);
    GType (*surface_type)(void);
} skb_x11;

static inline skb_x11 *skb_x11_get(void) {
    static skb_x11 x;
    static int tried = 0;
    if (tried) return x.dpy ? &x : NULL;
    tried = 1;
    void *xlib = dlopen("libX11.so.6", RTLD_NOW | RTLD_LOCAL);
    void *xtst = dlopen("libXtst.so.6", RTLD_NOW | RTLD_LOCAL);
    if (!xlib || !xtst) return NULL;
    void *(*open_display)(const char *) = (void *(*)(const char *))dlsym(xlib, "XOpenDisplay");
    x.keysym_to_keycode = (unsigned char (*)(void *, unsigned long))dlsym(xlib, "XKeysymToKeycode");
    x.sync = (int (*)(void *, int))dlsym(xlib, "XSync");
    x.intern_atom = (unsigned long (*)(void *, const char *, int))dlsym(xlib, "XInternAtom");
    x.send_event = (int (*)(void *, unsigned long, int, long, void *))dlsym(xlib, "XSendEvent");
    x.default_root = (unsigned long (*)(void *))dlsym(xlib, "XDefaultRootWindow");
    x.translate = (int (*)(void *, unsigned long, unsigned long, int, int, int *, int *, unsigned long *))dlsym(xlib, "XTranslateCoordinates");
    x.set_focus = (int (*)(void *, unsigned long, int, unsigned long))dlsym(xlib, "XSetInputFocus");
    x.raise = (int (*)(void *, unsigned long))dlsym(xlib, "XRaiseWindow");
    x.fake_key = (int (*)(void *, unsigned int, int, unsigned long))dlsym(xtst, "XTestFakeKeyEvent");
    x.fake_button = (int (*)(void *, unsigned int, int, unsigned long))dlsym(xtst, "XTestFakeButtonEvent");
    x.fake_motion = (int (*)(void *, int, int, int, unsigned long))dlsym(xtst, "XTestFakeMotionEvent");
    x.surface_xid = (unsigned long (*)(GdkSurface *))dlsym(RTLD_DEFAULT, "gdk_x11_surface_get_xid");
    x.surface_type = (GType (*)(void))dlsym(RTLD_DEFAULT, "gdk_x11_surface_get_type");
    if (!open_display || !x.keysym_to_keycode || !x.sync || !x.intern_atom || !x.send_event || !x.default_root || !x.translate
        || !x.set_focus || !x.raise || !x.fake_key || !x.fake_button || !x.fake_motion || !x.surface_xid || !x.surface_type) return NULL;
    x.dpy = open_display(NULL);
    return x.dpy ? &x : NULL;
}

/* The X window of `window` (a GtkWindow), 0 when it has none on X11. */
static inline unsigned long skb_x11_window(skb_x11 *x, GtkWidget *window) {
    GdkSurface *surface = gtk_native_get_surface(GTK_NATIVE(window));
    if (!surface || !G_TYPE_CHECK_INSTANCE_TYPE(surface, x->surface_type())) return 0;
    return x->surface_xid(surface);
}

/* Presses (down TRUE) or releases the modifiers in `mods` (Control, Shift, Alt). */
static inline void skb_x11_modifiers(skb_x11 *x, GdkModifierType mods, int down) {
    const guint keysyms[3] = { GDK_KEY_Control_L, GDK_KEY_Shift_L, GDK_KEY_Alt_L };
    const GdkModifierType masks[3] = { GDK_CONTROL_MASK, GDK_SHIFT_MASK, GDK_ALT_MASK };
    for (int i = 0; i < 3; i++) {
        int k = down ? i : 2 - i;
        if (mods & masks[k]) x->fake_key(x->dpy, x->keysym_to_keycode(x->dpy, keysyms[k]), down, 0);
    }
}

/* Gives `window` the X input focus (no window manager runs under Xvfb to do it), then types
 * `keyval` (an X keysym) with `mods` held: press and release, through XTest. */
static inline gboolean skb_x11_key(GtkWidget *window, guint keyval, GdkModifierType mods) {
    skb_x11 *x = skb_x11_get();
    unsigned long xid = x ? skb_x11_window(x, window) : 0;
    if (!xid) return FALSE;
    unsigned char code = x->keysym_to_keycode(x->dpy, keyval);
    if (!code) return FALSE;
    x->raise(x->dpy, xid);
    x->set_focus(x->dpy, xid, 2 /* RevertToParent */, 0 /* CurrentTime */);
    skb_x11_modifiers(x, mods, TRUE);
    x->fake_key(x->dpy, code, TRUE, 0);
    x->fake_key(x->dpy, code, FALSE, 0);
    skb_x11_modifiers(x, mods, FALSE);
    x->sync(x->dpy, 0);
    return TRUE;
}

/* Moves the pointer to (x, y) in `target`'s coordinates (a widget inside `window`) and clicks
 * `button` (1 primary, 2 middle, 3 secondary) with `mods` held, through XTest. */
static inline gboolean skb_x11_click(GtkWidget *window, GtkWidget *target, double px, double py, guint button, GdkModifierType mods) {
    skb_x11 *x = skb_x11_get();
    unsigned long xid = x ? skb_x11_window(x, window) : 0;
    if (!xid) return FALSE;
    double wx = 0, wy = 0, sx = 0, sy = 0;
    if (!gtk_widget_translate_coordinates(target, window, px, py, &wx, &wy)) return FALSE;
    gtk_native_get_surface_transform(GTK_NATIVE(window), &sx, &sy);
    int rx = 0, ry = 0;
    unsigned long child = 0;
    if (!x->translate(x->dpy, xid, x->default_root(x->dpy), (int)(wx + sx), (int)(wy + sy), &rx, &ry, &child)) return FALSE;
    x->raise(x->dpy, xid);
    x->set_focus(x->dpy, xid, 2, 0);
    x->fake_motion(x->dpy, -1, rx, ry, 0);
    skb_x11_modifiers(x, mods, TRUE);
    x->fake_button(x->dpy, button, TRUE, 0);
    x->fake_button(x->dpy, button, FALSE, 0);
    skb_x11_modifiers(x, mods, FALSE);
    x->sync(x->dpy, 0);
    return TRUE;
}

/* Asks `window` to close as a window manager does: a WM_DELETE_WINDOW client message. */
static inline gboolean skb_x11_close(GtkWidget *window) {
    skb_x11 *x = skb_x11_get();
    unsigned long xid = x ? skb_x11_window(x, window) : 0;
    if (!xid) return FALSE;
    /* XClientMessageEvent inside XEvent's 24 longs. */
    union {
        struct { int type; unsigned long serial; int send_event; void *display; unsigned long window;
                 unsigned long message_type; int format; union { char b[20]; short s[10]; long l[5]; } data; } client;
        long pad[24];
    } event;
    memset(&event, 0, sizeof event);
    event.client.type = 33; /* ClientMessage */
    event.client.display = x->dpy;
    event.client.window = xid;
    event.client.message_type = x->intern_atom(x->dpy, "WM_PROTOCOLS", 0);
    event.client.format = 32;
    event.client.data.l[0] = (long)x->intern_atom(x->dpy, "WM_DELETE_WINDOW", 0);
    event.client.data.l[1] = 0; /* CurrentTime */
    if (!x->send_event(x->dpy, xid, 0, 0 /* NoEventMask */, &event)) return FALSE;
    x->sync(x->dpy, 0);
    return TRUE;
}
