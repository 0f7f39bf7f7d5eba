/* ical-check-libical: reads an RFC 5545 file with Debian's libical3 and prints what it found,
 * as one JSON object: {"errors": [...X-LIC-ERROR values...], "events": [{uid, summary,
 * location, start, end, sequence, trigger}]} with start and end in seconds since the epoch (UTC),
 * resolved through the calendar's own VTIMEZONE, and the first VALARM trigger in seconds.
 *
 * libical marks every RFC violation it meets while parsing, and those icalrestriction_check()
 * finds, as X-LIC-ERROR properties; this prints them all. The calendar tests compile it with
 * `cc $(pkg-config --cflags --libs libical)` and compare its answer with Python icalendar's.
 *
 *   cc -o ical-check ical-check-libical.c $(pkg-config --cflags --libs libical) && ./ical-check FILE.ics
 */
#include <libical/ical.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void json_string(const char *s) {
    putchar('"');
    for (const unsigned char *p = (const unsigned char *)(s ? s : ""); *p; p++) {
        if (*p == '"' || *p == '\\') printf("\\%c", *p);
        else if (*p < 0x20) printf("\\u%04x", *p);
        else putchar(*p);
    }
    putchar('"');
}

static int first = 1;
static void errors_in(icalcomponent *c) {
    for (icalproperty *p = icalcomponent_get_first_property(c, ICAL_XLICERROR_PROPERTY); p;
         p = icalcomponent_get_next_property(c, ICAL_XLICERROR_PROPERTY)) {
        if (!first) putchar(',');
        first = 0;
        printf("{\"in\":");
        json_string(icalcomponent_kind_to_string(icalcomponent_isa(c)));
        printf(",\"error\":");
        json_string(icalproperty_get_xlicerror(p));
        putchar('}');
    }
    for (icalcomponent *k = icalcomponent_get_first_component(c, ICAL_ANY_COMPONENT); k;
         k = icalcomponent_get_next_component(c, ICAL_ANY_COMPONENT))
        errors_in(k);
}

static long long seconds(struct icaltimetype t) {
    icaltimezone *zone = (icaltimezone *)t.zone;
    if (!zone) zone = icaltimezone_get_utc_timezone();
    return (long long)icaltime_as_timet_with_zone(t, zone);
}

int main(int argc, char **argv) {
    if (argc != 2) { fprintf(stderr, "usage: ical-check FILE.ics\n"); return 64; }
    FILE *f = fopen(argv[1], "rb");
    if (!f) { perror(argv[1]); return 66; }
    static char buf[4 << 20];
    size_t n = fread(buf, 1, sizeof buf - 1, f);
    fclose(f);
    buf[n] = 0;
    icalcomponent *cal = icalparser_parse_string(buf);
    if (!cal) { printf("{\"errors\":[{\"in\":\"\",\"error\":\"no calendar parsed\"}],\"events\":[]}\n"); return 0; }
    icalrestriction_check(cal);
    printf("{\"errors\":[");
    errors_in(cal);
    printf("],\"events\":[");
    int firstEvent = 1;
    for (icalcomponent *ev = icalcomponent_get_first_component(cal, ICAL_VEVENT_COMPONENT); ev;
         ev = icalcomponent_get_next_component(cal, ICAL_VEVENT_COMPONENT)) {
        if (!firstEvent) putchar(',');
        firstEvent = 0;
        printf("{\"uid\":"); json_string(icalcomponent_get_uid(ev));
        printf(",\"summary\":"); json_string(icalcomponent_get_summary(ev));
        printf(",\"location\":"); json_string(icalcomponent_get_location(ev));
        printf(",\"start\":%lld,\"end\":%lld", seconds(icalcomponent_get_dtstart(ev)), seconds(icalcomponent_get_dtend(ev)));
        printf(",\"sequence\":%d", icalcomponent_get_sequence(ev));
        icalcomponent *alarm = icalcomponent_get_first_component(ev, ICAL_VALARM_COMPONENT);
        icalproperty *trig = alarm ? icalcomponent_get_first_property(alarm, ICAL_TRIGGER_PROPERTY) : NULL;
        if (trig) printf(",\"trigger\":%d", icaldurationtype_as_int(icalproperty_get_trigger(trig).duration));
        else printf(",\"trigger\":null");
        putchar('}');
    }
    printf("]}\n");
    icalcomponent_free(cal);
    return 0;
}
