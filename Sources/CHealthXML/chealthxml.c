#include "chealthxml.h"
#include <libxml/xmlreader.h>
#include <stdlib.h>
#include <string.h>

struct ct_health_reader {
    xmlTextReaderPtr reader;
    ct_health_read_fn read;
    void *context;
    int at_root_child;  // positioned on an element under the root already
    char error[512];
    int error_line;
};

static int pull(void *context, char *buffer, int length) {
    ct_health_reader *r = context;
    return r->read(r->context, buffer, length);
}

static void on_error(void *context, const char *message, xmlParserSeverities severity, xmlTextReaderLocatorPtr locator) {
    (void)severity;
    ct_health_reader *r = context;
    if (r->error[0]) return;
    snprintf(r->error, sizeof r->error, "%s", message ? message : "error");
    size_t n = strlen(r->error);
    while (n > 0 && (r->error[n - 1] == '\n' || r->error[n - 1] == ' ')) r->error[--n] = 0;
    r->error_line = locator ? xmlTextReaderLocatorLineNumber(locator) : 0;
}

ct_health_reader *ct_health_open(ct_health_read_fn read, void *context) {
    ct_health_reader *r = calloc(1, sizeof *r);
    if (!r) return NULL;
    r->read = read;
    r->context = context;
    // No network and no external DTD; entities stay references (libxml2's
    // own limits stop an amplification); no XML_PARSE_HUGE.
    r->reader = xmlReaderForIO(pull, NULL, r, "export.xml", NULL, XML_PARSE_NONET | XML_PARSE_COMPACT);
    if (!r->reader) { free(r); return NULL; }
    xmlTextReaderSetErrorHandler(r->reader, on_error, r);
    return r;
}

void ct_health_free(ct_health_reader *r) {
    if (!r) return;
    xmlFreeTextReader(r->reader);
    free(r);
}

int ct_health_root(ct_health_reader *r) {
    int status;
    while ((status = xmlTextReaderRead(r->reader)) == 1)
        if (xmlTextReaderNodeType(r->reader) == XML_READER_TYPE_ELEMENT) return 1;
    return status;
}

int ct_health_next_child(ct_health_reader *r) {
    int status = r->at_root_child ? xmlTextReaderNext(r->reader) : xmlTextReaderRead(r->reader);
    r->at_root_child = 0;
    while (status == 1) {
        int depth = xmlTextReaderDepth(r->reader);
        if (depth == 1 && xmlTextReaderNodeType(r->reader) == XML_READER_TYPE_ELEMENT) {
            r->at_root_child = 1;
            return 1;
        }
        status = depth >= 1 ? xmlTextReaderNext(r->reader) : xmlTextReaderRead(r->reader);
    }
    return status;
}

int ct_health_is(ct_health_reader *r, const char *name) {
    const xmlChar *local = xmlTextReaderConstLocalName(r->reader);
    return local && strcmp((const char *)local, name) == 0;
}

void ct_health_name(ct_health_reader *r, char *out, int capacity) {
    const xmlChar *local = xmlTextReaderConstLocalName(r->reader);
    snprintf(out, capacity, "%s", local ? (const char *)local : "?");
}

int ct_health_attribute_is(ct_health_reader *r, const char *name, const char *value) {
    if (xmlTextReaderMoveToAttribute(r->reader, (const xmlChar *)name) != 1) return 0;
    const xmlChar *v = xmlTextReaderConstValue(r->reader);
    int same = v && strcmp((const char *)v, value) == 0;
    xmlTextReaderMoveToElement(r->reader);
    return same;
}

int ct_health_attribute(ct_health_reader *r, const char *name, char *out, int capacity) {
    if (xmlTextReaderMoveToAttribute(r->reader, (const xmlChar *)name) != 1) return -1;
    const xmlChar *v = xmlTextReaderConstValue(r->reader);
    int length = v ? (int)strlen((const char *)v) : 0;
    int fits = length < capacity;
    if (fits) memcpy(out, v ? (const char *)v : "", length + 1);
    xmlTextReaderMoveToElement(r->reader);
    return fits ? length : -1;
}

int ct_health_line(ct_health_reader *r) { return xmlTextReaderGetParserLineNumber(r->reader); }
const char *ct_health_error(ct_health_reader *r) { return r->error; }
int ct_health_error_line(ct_health_reader *r) { return r->error_line; }
