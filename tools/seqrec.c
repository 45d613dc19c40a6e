/* seqrec - run `seqrec NAME ARGS...` as `seqrec-NAME ARGS...`, the way git
 * dispatches its subcommands: first next to this executable, then on PATH. */
#include <errno.h>
#include <libgen.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli.h"

/* Every seqrec-NAME program, in pipeline order: --help lists them, and
 * tests/bats/seqrec.bats checks that each built program is here and in
 * seqrec(1). */
static const char *commands[][2] = {
    {"preprocess", "raw interaction logs -> sequences stream"},
    {"split", "sequences -> split stream (leave-one-out, ratio, time, holdout-users)"},
    {"pad", "split -> padded rows (zero or RandomPad)"},
    {"train", "train a model on a split (or padded) stream"},
    {"score", "score users with a model: ranks or top-K lists"},
    {"metrics", "ranks -> HR, NDCG, MRR, Precision, Recall"},
    {"export", "a model's item embeddings (or any tensor) as TSV or .npy"},
    {"cat", "print, check or encode a stream"},
    {"synth", "generate a synthetic interaction log"},
    {"nightly", "the nightly job: score today's log, publish top-K atomically"},
    {"plot", "training curves of seqrec-train logs as one PNG"},
};

static void usage(FILE *f)
{
    fprintf(f, "usage: seqrec COMMAND [ARGS...]   (runs seqrec-COMMAND)\n\ncommands:\n");
    for (size_t i = 0; i < sizeof commands / sizeof commands[0]; i++)
        fprintf(f, "  %-11s %s\n", commands[i][0], commands[i][1]);
    fprintf(f, "\n  -h, --help    show this help and exit\n"
               "  -V, --version show the version and exit\n"
               "\n`seqrec COMMAND --help` or `man seqrec-COMMAND` for each; man 5 seqrec for the format.\n");
}

int main(int argc, char **argv)
{
    if (argc < 2 || strcmp(argv[1], "--help") == 0 || strcmp(argv[1], "-h") == 0) {
        usage(argc < 2 ? stderr : stdout);
        return argc < 2 ? 64 : sq_cli_info_done("seqrec");
    }
    if (strcmp(argv[1], "--version") == 0 || strcmp(argv[1], "-V") == 0) {
        sq_cli_version("seqrec");
        return sq_cli_info_done("seqrec");
    }
    const char *cmd = argv[1];
    if (strchr(cmd, '/') || cmd[0] == '-') {
        fprintf(stderr, "seqrec: '%s' is not a command\n", cmd);
        return 64;
    }
    char name[256];
    if (snprintf(name, sizeof name, "seqrec-%s", cmd) >= (int)sizeof name) {
        fprintf(stderr, "seqrec: command name too long\n");
        return 64;
    }
    argv[1] = name;
    char self[PATH_MAX];
    ssize_t n = readlink("/proc/self/exe", self, sizeof self - 1);
    if (n > 0) {
        self[n] = '\0';
        char path[PATH_MAX + 300];
        snprintf(path, sizeof path, "%s/%s", dirname(self), name);
        if (access(path, X_OK) == 0) {
            execv(path, argv + 1);
            fprintf(stderr, "seqrec: %s: %s\n", path, strerror(errno));
            return 71;
        }
    }
    execvp(name, argv + 1);
    fprintf(stderr, "seqrec: '%s' is not a seqrec command (no %s found)\n", cmd, name);
    usage(stderr);
    return 64;
}
