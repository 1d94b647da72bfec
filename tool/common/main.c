/* The lockbridge tool's entry point: the command table, global help and version,
 * and dispatch to one command. */
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "tool/common/server.h"

static int run_help(const lb__cli_args *a);

static const lb__cli_command help_command = {
    "help", "show help for a command", "usage: lockbridge help [COMMAND]\n", NULL, 1,
    run_help, 0};

/* New commands join here; `lockbridge --help` lists them in this order. */
static const lb__cli_command *const commands[] = {
    &lb__cli_cmd_hold,   &lb__cli_cmd_contend, &lb__cli_cmd_clock,
    &lb__cli_cmd_inspect, &lb__cli_cmd_status, &lb__cli_cmd_mode,
    &lb__cli_cmd_sweep,  &lb__cli_cmd_unlock,  &lb__cli_cmd_census,
    &lb__cli_cmd_race,   &help_command,        NULL};

static const lb__cli_command *lookup(const char *name) {
    for (int i = 0; commands[i]; i++)
        if (strcmp(commands[i]->name, name) == 0) return commands[i];
    return NULL;
}

static void general_help(FILE *f) {
    fprintf(f, "usage: lockbridge [connection options] COMMAND [ARGS] [options]\n\n"
               "Redis locks for fleets moving from timestamp locks to token locks.\n\n"
               "Commands:\n");
    for (int i = 0; commands[i]; i++)
        fprintf(f, "  %-10s %s\n", commands[i]->name, commands[i]->summary);
    fprintf(f, "\nConnection options (before or after the command). Pointed at a Redis\n"
               "Cluster node, every command finds the primaries it needs by itself.\n"
               "  -h HOST        server host (default 127.0.0.1)\n"
               "  -p PORT        server port (default 6379)\n"
               "  -s SOCKET      Unix socket path (used instead of -h and -p)\n"
               "  -a PASSWORD    AUTH with this password\n"
               "  --user NAME    AUTH as this ACL user (needs -a)\n"
               "  -n DB          SELECT this database\n"
               "  --sentinel HOST:PORT\n"
               "                 ask this sentinel for the primary (repeatable; with\n"
               "                 --master; instead of -h and -p); found once, at start\n"
               "  --master NAME  the primary's name in the sentinels' configuration\n"
               "  --json         JSON lines on stdout (hold and contend: the default when\n"
               "                 stdout is not a terminal)\n"
               "  --help         this help; `lockbridge COMMAND --help` for a command\n"
               "  --version      print the library version\n");
}

static int run_help(const lb__cli_args *a) {
    if (a->npos == 0) {
        general_help(stdout);
        return LB__CLI_EXIT_OK;
    }
    const lb__cli_command *cmd = lookup(a->pos[0]);
    if (!cmd) {
        char shown[64];
        lb__escape(shown, sizeof shown, a->pos[0], strlen(a->pos[0]));
        return lb__cli_usage(a, "no command \"%s\"", shown);
    }
    fputs(cmd->help, stdout);
    return LB__CLI_EXIT_OK;
}

static int dispatch(lb__cli_args *a, const lb__cli_command *cmd, int argc, char **argv) {
    char prog[64];
    snprintf(prog, sizeof prog, "lockbridge %s", cmd->name);
    a->prog = prog;
    if (lb__cli_parse(a, argc, argv, cmd->opts, cmd->max_pos, 0, NULL) != 0)
        return LB__CLI_EXIT_USAGE;
    if (a->help) {
        fputs(cmd->help, stdout);
        return LB__CLI_EXIT_OK;
    }
    if (a->version) {
        printf("lockbridge %s\n", lb_version());
        return LB__CLI_EXIT_OK;
    }
    if (a->conn.user && !a->conn.password) return lb__cli_usage(a, "--user needs -a PASSWORD");
    int code = lb__cli_sentinel_resolve(a);
    if (code != 0) return code;
    lb__cli_set_json(a->json || (cmd->json_when_piped && !isatty(STDOUT_FILENO)));
    return cmd->run(a);
}

int main(int argc, char **argv) {
    lb__cli_args a;
    int used;
    /* A server that closes the connection must surface as an I/O error from
     * hiredis, not kill the process. */
    signal(SIGPIPE, SIG_IGN);
    lb__cli_args_init(&a, "lockbridge");
    if (argc < 1) return LB__CLI_EXIT_USAGE;
    if (lb__cli_parse(&a, argc - 1, argv + 1, NULL, 0, 1, &used) != 0)
        return LB__CLI_EXIT_USAGE;
    int rest = argc - 1 - used;
    if (rest == 0) {
        if (a.version) printf("lockbridge %s\n", lb_version());
        else if (a.help) general_help(stdout);
        else return lb__cli_usage(&a, "missing COMMAND");
        return LB__CLI_EXIT_OK;
    }
    const char *name = argv[1 + used];
    const lb__cli_command *cmd = lookup(name);
    if (!cmd) {
        char shown[64];
        lb__escape(shown, sizeof shown, name, strlen(name));
        return lb__cli_usage(&a, "unknown command \"%s\"", shown);
    }
    return dispatch(&a, cmd, rest - 1, argv + 2 + used);
}
