/* The parallax subcommands, one file each; each returns the exit code. */
#ifndef PX_CLI_COMMANDS_H
#define PX_CLI_COMMANDS_H

int px_cmd_models(int argc, char **argv);
int px_cmd_topologies(int argc, char **argv);
int px_cmd_model(int argc, char **argv);
int px_cmd_topology(int argc, char **argv);
int px_cmd_plan(int argc, char **argv);
int px_cmd_sim(int argc, char **argv);
int px_cmd_sweep(int argc, char **argv);
int px_cmd_run(int argc, char **argv);
int px_cmd_reshard(int argc, char **argv);
int px_cmd_launch(int argc, char **argv);
int px_cmd_calibrate(int argc, char **argv);
int px_cmd_compare(int argc, char **argv);
int px_cmd_plot(int argc, char **argv);
int px_cmd_export(int argc, char **argv);

#endif
