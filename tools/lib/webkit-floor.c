/* tools/lib/webkit-floor.c: the floor for tools/bench's browser group. The least a WebKitGTK 6.0
 * program does to show pages: a GTK window with a notebook, one web view per URL on the default
 * network session, nothing else. Prints "loaded N" when the N pages have finished loading, then
 * runs until stdin closes (so the bench can read its memory). Built by tools/bench with gcc. */
#include <webkit/webkit.h>
#include <stdio.h>

static int pending;
static GtkApplication *app;
static char **urls;
static int count;

static void on_load(WebKitWebView *view, WebKitLoadEvent event, gpointer data) {
    if (event != WEBKIT_LOAD_FINISHED) return;
    if (--pending == 0) { printf("loaded %d\n", count); fflush(stdout); }
}

static gboolean on_stdin(GIOChannel *ch, GIOCondition cond, gpointer data) {
    g_application_quit(G_APPLICATION(app));
    return G_SOURCE_REMOVE;
}

static void activate(GtkApplication *a, gpointer data) {
    GtkWidget *window = gtk_application_window_new(a);
    GtkWidget *notebook = gtk_notebook_new();
    gtk_window_set_default_size(GTK_WINDOW(window), 1024, 700);
    gtk_window_set_child(GTK_WINDOW(window), notebook);
    pending = count;
    for (int i = 0; i < count; i++) {
        GtkWidget *view = webkit_web_view_new();
        g_signal_connect(view, "load-changed", G_CALLBACK(on_load), NULL);
        gtk_notebook_append_page(GTK_NOTEBOOK(notebook), view, NULL);
        webkit_web_view_load_uri(WEBKIT_WEB_VIEW(view), urls[i]);
    }
    gtk_window_present(GTK_WINDOW(window));
    g_io_add_watch(g_io_channel_unix_new(0), G_IO_IN | G_IO_HUP, on_stdin, NULL);
}

int main(int argc, char **argv) {
    if (argc < 2) { fprintf(stderr, "usage: webkit-floor URL...\n"); return 64; }
    urls = argv + 1;
    count = argc - 1;
    app = gtk_application_new("org.sitekeep.WebKitFloor", G_APPLICATION_NON_UNIQUE);
    g_signal_connect(app, "activate", G_CALLBACK(activate), NULL);
    char *args[] = { argv[0], NULL };
    return g_application_run(G_APPLICATION(app), 1, args);
}
