/*
 * cli.h - the block tools of the miradb command: `miradb inspect FILE
 * [--json]` and `miradb fsck DATA`. The logic lives in storage/block.h;
 * this is argument handling and output.
 *
 * Both take argv with argv[0] = the subcommand name, print to stdout
 * (fsck's progress bar goes to stderr when it is a terminal), and return
 * the process exit status: 0 all verified, 1 damage found (every failure
 * listed), 2 usage or I/O error.
 */
#ifndef MIRADB_CLI_H
#define MIRADB_CLI_H

int cli_inspect(int argc, char **argv);
int cli_fsck(int argc, char **argv);

#endif
