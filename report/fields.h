/* A result's numbers described once: each field's JSON key (inside a group
 * object when set), its flat column name (group_key) and where it sits in
 * the struct, so that the JSON and CSV writers read the same list. */
#ifndef PX_REPORT_FIELDS_H
#define PX_REPORT_FIELDS_H

#include <stddef.h>
#include <stdio.h>

#include <cJSON.h>

typedef struct {
  const char *group, *key;
  size_t offset; /* of a double */
} px_report_field;

/* Adds fields[0..n) of the struct at base to o, creating group objects as needed. */
void px_report_fields_json(cJSON *o, const px_report_field *fields, size_t n, const void *base);
/* ",name,..." : one CSV column per field. */
void px_report_fields_csv_header(FILE *fp, const px_report_field *fields, size_t n);
/* ",value,..." (%.9g); base NULL: empty cells. */
void px_report_fields_csv_row(FILE *fp, const px_report_field *fields, size_t n, const void *base);

#endif
