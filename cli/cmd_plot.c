/* parallax plot DIR: render (again) the plots of the data files in DIR,
 * as written by sweep --plot or sim --plot, e.g. after editing a script. */
#include <stdio.h>

#include "cli/args.h"
#include "cli/commands.h"
#include "report/html.h"
#include "report/plots.h"

int px_cmd_plot(int argc, char **argv) {
  px_args a;
  px_err err = {0};
  px_status st = px_args_parse(&a, "parallax plot", PX_GROUPS_PLOT, argc, argv, &err);
  if (st) return px_cli_fail(st, &err);
  if (a.help || a.npos != 1) {
    printf("usage: parallax plot DIR [--report DIR]\n\n"
           "Renders the plots (PNG and SVG, gnuplot scripts in plots/) of the data files in DIR written by\n"
           "`parallax sweep --plot DIR` or `parallax sim --plot DIR`; with --report DIR (the same directory)\n"
           "the HTML report is written again too.\n");
    return a.help ? 0 : px_cli_fail(px_err_set(&err, PX_ERR_INPUT, "usage: parallax plot DIR"), &err);
  }
  if ((st = px_plots_render(a.pos[0], &err))) return px_cli_fail(st, &err);
  if (a.report_dir && (st = px_html_report(a.report_dir, &err))) return px_cli_fail(st, &err);
  printf("plots: %s/*.png, *.svg\n", a.pos[0]);
  return 0;
}
