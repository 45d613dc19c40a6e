/* signals.c - temp files removed on SIGINT, SIGTERM and SIGHUP (signals.h). */
#include "signals.h"

#include <signal.h>
#include <stdatomic.h>
#include <stddef.h>
#include <unistd.h>

/* The temp files open now; NULL: free slot. Atomic pointers: the handler
 * may run between any two instructions of the code that fills the table. */
static _Atomic(const char *) tmp_paths[SQ_TMP_SLOTS];
static atomic_int installed;

static const int caught[] = {SIGINT, SIGTERM, SIGHUP};

static void on_signal(int sig)
{
    for (int i = 0; i < SQ_TMP_SLOTS; i++) {
        const char *p = atomic_load(&tmp_paths[i]);
        if (p)
            unlink(p);
    }
    /* SA_RESETHAND restored the default action; the signal is blocked until
     * the handler returns, then delivered again and ends the program. */
    raise(sig);
}

static void install(void)
{
    if (atomic_exchange(&installed, 1))
        return;
    for (size_t i = 0; i < sizeof caught / sizeof caught[0]; i++) {
        struct sigaction old, sa = {0};
        if (sigaction(caught[i], NULL, &old) != 0 || old.sa_handler == SIG_IGN ||
            (old.sa_flags & SA_SIGINFO) || old.sa_handler != SIG_DFL)
            continue; /* ignored, or someone else's handler: leave it */
        sa.sa_handler = on_signal;
        sigemptyset(&sa.sa_mask);
        for (size_t j = 0; j < sizeof caught / sizeof caught[0]; j++)
            sigaddset(&sa.sa_mask, caught[j]);
        sa.sa_flags = SA_RESETHAND;
        sigaction(caught[i], &sa, NULL);
    }
}

int sq_tmp_register(const char *path)
{
    install();
    for (int i = 0; i < SQ_TMP_SLOTS; i++) {
        const char *none = NULL;
        if (atomic_compare_exchange_strong(&tmp_paths[i], &none, path))
            return i;
    }
    return -1;
}

void sq_tmp_unregister(int slot)
{
    if (slot >= 0 && slot < SQ_TMP_SLOTS)
        atomic_store(&tmp_paths[slot], NULL);
}
