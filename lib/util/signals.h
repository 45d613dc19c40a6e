/* signals.h - removing temporary output files when a signal stops the
 * program.
 *
 * fileio.c writes an output named on the command line to "FILE.tmp.PID"
 * and renames it into place at the end (fileio.h). When SIGINT, SIGTERM or
 * SIGHUP (Ctrl-C, kill, timeout(1), a closed terminal) stops the program
 * first, that temp file must not stay behind. A signal handler can only
 * reach process-wide state, so this is the one piece of global state in
 * seqrec: a fixed table of the temp files open now. sq_out_open registers
 * each temp file, sq_out_commit and sq_out_abort unregister it; the handler
 * unlink(2)s every registered path (async-signal-safe), restores the
 * default action and re-raises the signal, so the program dies of it (the
 * shell's status 128 + signal number). The handlers are installed by the
 * first registration, so every program that writes an output gets them
 * without an edit; a signal that was ignored when the program started
 * (nohup, a background job) stays ignored.
 *
 * The table holds SQ_TMP_SLOTS paths; a registration beyond that returns
 * -1 and that file is simply not cleaned up on a signal (no program opens
 * more than a few outputs at once). The registered string must stay valid
 * until it is unregistered. */
#ifndef SQ_SIGNALS_H
#define SQ_SIGNALS_H

#define SQ_TMP_SLOTS 32

/* Registers path for removal on SIGINT, SIGTERM or SIGHUP (installing the
 * handlers on first use); returns its slot, or -1 when the table is full. */
int sq_tmp_register(const char *path);
/* Forgets the slot (-1: nothing); call before the path is freed or renamed. */
void sq_tmp_unregister(int slot);

#endif
