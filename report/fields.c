/* Field tables to JSON members and CSV cells. */
#include "report/fields.h"

#include <string.h>

#include "core/json.h"

static double value_of(const px_report_field *f, const void *base) {
  double v;
  memcpy(&v, (const char *)base + f->offset, sizeof v);
  return v;
}

void px_report_fields_json(cJSON *o, const px_report_field *fields, size_t n, const void *base) {
  for (size_t i = 0; i < n; i++) {
    cJSON *into = o;
    if (fields[i].group) {
      into = cJSON_GetObjectItemCaseSensitive(o, fields[i].group);
      if (!into) into = cJSON_AddObjectToObject(o, fields[i].group);
      if (!into) continue;
    }
    px_json_add_num(into, fields[i].key, value_of(&fields[i], base));
  }
}

void px_report_fields_csv_header(FILE *fp, const px_report_field *fields, size_t n) {
  for (size_t i = 0; i < n; i++)
    fprintf(fp, ",%s%s%s", fields[i].group ? fields[i].group : "", fields[i].group ? "_" : "", fields[i].key);
}

void px_report_fields_csv_row(FILE *fp, const px_report_field *fields, size_t n, const void *base) {
  for (size_t i = 0; i < n; i++) {
    if (base)
      fprintf(fp, ",%.9g", value_of(&fields[i], base));
    else
      fputc(',', fp);
  }
}
