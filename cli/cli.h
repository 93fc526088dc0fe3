/* cli: the `portcullis` command — status, reload and metrics of the
 * daemons, the sandbox launcher — on top of every other module. Its
 * subcommands of other modules' own (policy, log, vault, check, cert) are
 * those modules' *_cli functions. */
#ifndef PC_CLI_H
#define PC_CLI_H

/* `portcullis [-c FILE] status [--json]`, `portcullis [-c FILE] reload` and
 * `portcullis [-c FILE] metrics` (the metrics of the engine, the vault and
 * logd from their control sockets, Prometheus text format). argv[0] is the
 * subcommand name. Returns a PC_EXIT_* code. */
int cli_control(int argc, char **argv, const char *config);

/* `portcullis [-c FILE] sandbox run|attach ...` (sandbox*.c, docs/sandbox.md):
 * argv[0] is "sandbox". Returns the command's exit status, or a PC_EXIT_*
 * code when the sandbox could not be set up (usage 2, refused 1, error 3). */
int sandbox_cli(int argc, char **argv, const char *config);

/* `portcullis [-c FILE] reload [--engine] [--vault] [--json]` (reload.c):
 * ask the engine and the vault to load the policy again and wait for their
 * answers. 0 every daemon asked took it, 1 one refused it, 3 one could not
 * be asked. argv[0] is "reload". */
int cli_reload(int argc, char **argv, const char *config);

#endif
