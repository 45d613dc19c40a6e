/* filter.c - a stream-to-stream program's input and output (filter.h). */
#include "filter.h"

int sq_filter_open(sq_filter *f, const char *in_path, const char *out_path, sq_err *e)
{
    f->in_name = sq_in_name(in_path);
    f->out_path = out_path;
    f->out_name = sq_out_name(out_path);
    if (sq_in_open(&f->in, in_path, e) || sq_reader_open(&f->rd, f->in, f->in_name, e) ||
        sq_header_copy(&f->hdr, &f->rd.hdr, e))
        return e->code;
    return 0;
}

int sq_filter_start(sq_filter *f, sq_err *e)
{
    if (sq_out_open(&f->out, f->out_path, 1, e) ||
        sq_writer_open(&f->wr, f->out.fp, f->out_name, &f->hdr, e))
        return e->code;
    return 0;
}

int sq_filter_finish(sq_filter *f, sq_err *e)
{
    if (sq_writer_finish(&f->wr, e) || sq_out_commit(&f->out, e))
        return e->code;
    return 0;
}

void sq_filter_close(sq_filter *f)
{
    sq_out_abort(&f->out);
    sq_writer_free(&f->wr);
    sq_header_free(&f->hdr);
    sq_reader_free(&f->rd);
    sq_in_close(f->in);
    f->in = NULL;
}
