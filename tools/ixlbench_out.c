/* ixlbench output: the tables (as rows complete), CSV, JSON, the progress bar and the plot. */
#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/utsname.h>
#include <sys/wait.h>
#include <unistd.h>

#include "ixlbench.h"

static struct {
    const struct ixb_opts *o;
    bool table;             /* the tables go to stdout */
    FILE *csv, *json;       /* NULL when not asked for */
    bool csv_own, json_own; /* files we opened (not stdout) */
    struct ixb_row *rows;
    size_t n_rows, cap_rows;
    bool header_done, kv_header_done, sweep_header_done;
    struct {
        char what[64];
        double ratio, target;
    } ratios[16];
    size_t n_ratios;
    char backend[64], initiator[IXL_NAME_MAX], target[IXL_NAME_MAX];
    bool bar_on, bar_shown;
    uint64_t bar_last;
} out;

static const char *op_name(enum ixl_op op)
{
    return op == IXL_OP_READ ? "READ" : "WRITE";
}

/* A rate (descriptors per second), in 7 columns: "1.23M", "456.7k", "12". */
static const char *rate_str(double v, char *buf, size_t len)
{
    if (v >= 1e6)
        snprintf(buf, len, "%.2fM", v / 1e6);
    else if (v >= 1e4)
        snprintf(buf, len, "%.1fk", v / 1e3);
    else
        snprintf(buf, len, "%.0f", v);
    return buf;
}

/* A time in microseconds, human-readable in 9 columns. */
static const char *t_str(double us, char *buf, size_t len)
{
    double a = us < 0 ? -us : us;

    if (a < 10)
        snprintf(buf, len, "%.2f us", us);
    else if (a < 1000)
        snprintf(buf, len, "%.1f us", us);
    else if (a < 1e6)
        snprintf(buf, len, "%.2f ms", us / 1e3);
    else
        snprintf(buf, len, "%.2f s", us / 1e6);
    return buf;
}

static bool find_in_path(const char *prog)
{
    const char *path = getenv("PATH");
    char buf[4096];

    if (path == NULL || *path == '\0')
        return false;
    while (*path != '\0') {
        size_t n = strcspn(path, ":");
        if (n > 0 && n < sizeof(buf) - strlen(prog) - 2) {
            memcpy(buf, path, n);
            snprintf(buf + n, sizeof(buf) - n, "/%s", prog);
            if (access(buf, X_OK) == 0)
                return true;
        }
        path += n;
        if (*path == ':')
            path++;
    }
    return false;
}

static FILE *open_out(const char *name, bool *own)
{
    FILE *f;

    *own = false;
    if (strcmp(name, "-") == 0)
        return stdout;
    f = fopen(name, "w");
    if (f == NULL)
        fprintf(stderr, "ixlbench: cannot write %s: %s\n", name, strerror(errno));
    else
        *own = true;
    return f;
}

int ixb_out_open(const struct ixb_opts *o)
{
    out.o = o;
    if (o->plot_file != NULL && !find_in_path("gnuplot")) {
        fprintf(stderr, "ixlbench: --plot needs gnuplot, which is not on PATH: install it with "
                        "apt-get install gnuplot-nox\n");
        return 1;
    }
    if (o->csv_file != NULL && (out.csv = open_out(o->csv_file, &out.csv_own)) == NULL)
        return 1;
    if (o->json_file != NULL && (out.json = open_out(o->json_file, &out.json_own)) == NULL)
        return 1;
    out.table = !(out.csv == stdout || out.json == stdout);
    out.bar_on = o->progress > 0 || (o->progress < 0 && isatty(STDERR_FILENO));
    if (out.csv != NULL)
        fprintf(out.csv,
                "scenario,op,api,path,block,batch,descs,threads,depth,iters,warmup,bytes,seconds,"
                "gbps,lat_avg_us,lat_p50_us,lat_p99_us,prep_avg_us,prep_p99_us,post_avg_us,"
                "post_p99_us,comp_avg_us,comp_p99_us,notif_avg_us,notif_p99_us,"
                "notif_done_avg_us,notif_done_p99_us,prep_list_us,iops,check\n");
    return 0;
}

static void machine(char *buf, size_t len)
{
    struct utsname u;
    char model[128] = "unknown CPU", line[256];
    FILE *f = fopen("/proc/cpuinfo", "r");

    while (f != NULL && fgets(line, sizeof(line), f) != NULL) {
        char *c = strchr(line, ':');
        if (strncmp(line, "model name", 10) == 0 && c != NULL) {
            snprintf(model, sizeof(model), "%s", c + 2);
            model[strcspn(model, "\n")] = '\0';
            break;
        }
    }
    if (f != NULL)
        fclose(f);
    if (uname(&u) != 0)
        memset(&u, 0, sizeof(u));
    snprintf(buf, len, "%s, %ld CPUs, %s, Linux %s", u.nodename, sysconf(_SC_NPROCESSORS_ONLN),
             model, u.release);
}

void ixb_out_header(const char *backend, const char *initiator, const char *target)
{
    char m[512];

    snprintf(out.backend, sizeof(out.backend), "%s", backend);
    snprintf(out.initiator, sizeof(out.initiator), "%s", initiator);
    snprintf(out.target, sizeof(out.target), "%s", target);
    if (!out.table || out.o->quiet)
        return;
    machine(m, sizeof(m));
    printf("ixlbench (ixl %s): backend %s, initiator %s, target %s\n", ixl_version(), backend,
           initiator, target);
    printf("machine: %s\n", m);
    printf("command:");
    for (int i = 0; i < out.o->argc; i++)
        printf(" %s", out.o->argv[i]);
    printf("\n");
    fflush(stdout);
}

static void bar_clear(void)
{
    if (out.bar_shown) {
        fprintf(stderr, "\r\033[K");
        fflush(stderr);
        out.bar_shown = false;
    }
}

void ixb_progress_clear(void)
{
    bar_clear();
}

void ixb_progress(double done, double total, const char *label)
{
    char bar[41];
    int w = (int)sizeof(bar) - 1, fill;
    uint64_t now = ixb_now_ns();

    if (!out.bar_on || total <= 0 || now - out.bar_last < 100000000ull)
        return;
    out.bar_last = now;
    fill = (int)(done / total * w);
    if (fill < 0)
        fill = 0;
    if (fill > w)
        fill = w;
    memset(bar, '#', (size_t)fill);
    memset(bar + fill, '.', (size_t)(w - fill));
    bar[w] = '\0';
    fprintf(stderr, "\r[%s] %3.0f%% %s\033[K", bar, done / total * 100, label);
    fflush(stderr);
    out.bar_shown = true;
}

static void keep(const struct ixb_row *r)
{
    if (out.n_rows == out.cap_rows) {
        size_t cap = out.cap_rows ? out.cap_rows * 2 : 32;
        struct ixb_row *n = realloc(out.rows, cap * sizeof(*n));
        if (n == NULL)
            return;
        out.rows = n;
        out.cap_rows = cap;
    }
    out.rows[out.n_rows++] = *r;
}

/* A CSV field as RFC 4180 wants it: in double quotes (inner ones doubled) when it holds a
 * comma, a quote or a line break (UCX's path "sysv,cma"), else as is. */
static void csv_field(FILE *f, const char *s)
{
    if (strpbrk(s, ",\"\r\n") == NULL) {
        fputs(s, f);
        return;
    }
    fputc('"', f);
    for (; *s != '\0'; s++) {
        if (*s == '"')
            fputc('"', f);
        fputc(*s, f);
    }
    fputc('"', f);
}

static void csv_row(const struct ixb_row *r)
{
    if (out.csv == NULL)
        return;
    csv_field(out.csv, r->scenario);
    fprintf(out.csv, ",%s,%s,", op_name(r->op), r->api == IXB_API_PREP ? "prep" : "plain");
    csv_field(out.csv, r->path);
    fprintf(out.csv,
            ",%" PRIu64 ",%" PRIu64 ",%" PRIu64 ",%u,%u,%u,%u,%" PRIu64
            ",%.6f,%.4f,%.3f,%.3f,%.3f,%.3f,%.3f,%.3f,%.3f,%.3f,%.3f,",
            r->block, r->batch, r->descs, r->threads, r->depth, r->iters, r->warmup, r->bytes,
            r->seconds, r->gbps, r->lat.avg, r->lat.p50, r->lat.p99, r->prep.avg, r->prep.p99,
            r->post.avg, r->post.p99, r->comp.avg, r->comp.p99);
    if (r->has_notif)
        fprintf(out.csv, "%.3f,%.3f,%.3f,%.3f,", r->notif.avg, r->notif.p99, r->notif_done.avg,
                r->notif_done.p99);
    else
        fprintf(out.csv, ",,,,");
    fprintf(out.csv, "%.3f,%.0f,%s\n", r->prep_list_us, r->iops,
            r->check < 0 ? "off"
            : r->check   ? "pass"
                         : "FAIL");
    fflush(out.csv);
}

void ixb_out_section(const char *title)
{
    if (!out.table || out.o->quiet)
        return;
    bar_clear();
    printf("\n%s\n", title);
    fflush(stdout);
    out.sweep_header_done = out.kv_header_done = false;
}

void ixb_out_note(const char *fmt, ...)
{
    va_list ap;
    FILE *f = out.table ? stdout : stderr;

    bar_clear();
    va_start(ap, fmt);
    fprintf(f, "note: ");
    vfprintf(f, fmt, ap);
    fprintf(f, "\n");
    va_end(ap);
    fflush(f);
}

static void check_line(const struct ixb_row *r)
{
    if (r->check == 0)
        fprintf(stderr, "ixlbench: DATA CHECK FAILED (%s %s %s x %" PRIu64 "): %s\n", r->scenario,
                op_name(r->op), r->path, r->batch, r->check_msg);
}

void ixb_out_sweep_row(const struct ixb_row *r)
{
    char b[32], t[8][24], io[24];

    keep(r);
    csv_row(r);
    bar_clear();
    check_line(r);
    if (!out.table)
        return;
    if (!out.sweep_header_done) {
        printf("%-5s %9s %6s %6s %-8s %6s %8s %7s %10s %10s %10s %10s %10s %10s %10s %10s  %s\n",
               "op", "block", "batch", "descs", "path", "iters", "GB/s", "IOPS", "lat avg",
               "lat p99", "prep avg", "prep p99", "post avg", "post p99", "comp avg", "comp p99",
               "check");
        out.sweep_header_done = true;
    }
    printf("%-5s %9s %6" PRIu64 " %6" PRIu64 " %-8s %6u %8.3f %7s %10s %10s %10s %10s %10s %10s "
           "%10s %10s  %s\n",
           op_name(r->op), ixb_size_str(r->block, b, sizeof(b)), r->batch, r->descs, r->path,
           r->iters, r->gbps, rate_str(r->iops, io, sizeof(io)), t_str(r->lat.avg, t[0], 24),
           t_str(r->lat.p99, t[1], 24), t_str(r->prep.avg, t[2], 24), t_str(r->prep.p99, t[3], 24),
           t_str(r->post.avg, t[4], 24), t_str(r->post.p99, t[5], 24), t_str(r->comp.avg, t[6], 24),
           t_str(r->comp.p99, t[7], 24),
           r->check < 0 ? "off"
           : r->check   ? "pass"
                        : "FAIL");
    fflush(stdout);
}

void ixb_out_kv_row(const struct ixb_row *r)
{
    char t[9][24];
    const char *v = r->scenario + 3; /* "kv-random" -> "random" */

    keep(r);
    csv_row(r);
    bar_clear();
    check_line(r);
    if (!out.table)
        return;
    if (!out.kv_header_done) {
        printf("%-14s %6s %-11s %5s %10s %10s %10s %10s %10s %8s %10s %10s %11s  %s\n", "variant",
               "descs", "path", "iters", "make avg", "post avg", "xfer avg", "xfer p99",
               "total avg", "GB/s", "notif p50", "notif p99", "-done p50", "check");
        out.kv_header_done = true;
    }
    printf("%-14s %6" PRIu64 " %-11s %5u %10s %10s %10s %10s %10s %8.3f %10s %10s %11s  %s\n", v,
           r->descs, r->path, r->iters, t_str(r->prep.avg, t[0], 24), t_str(r->post.avg, t[1], 24),
           t_str(r->comp.avg, t[2], 24), t_str(r->comp.p99, t[3], 24), t_str(r->lat.avg, t[4], 24),
           r->gbps, r->has_notif ? t_str(r->notif.p50, t[5], 24) : "-",
           r->has_notif ? t_str(r->notif.p99, t[6], 24) : "-",
           r->has_notif ? t_str(r->notif_done.p50, t[7], 24) : "-",
           r->check < 0 ? "off"
           : r->check   ? "pass"
                        : "FAIL");
    fflush(stdout);
}

void ixb_out_ratio(const char *what, double a, double b, double target)
{
    double q = b > 0 ? a / b : 0;

    if (out.n_ratios < sizeof(out.ratios) / sizeof(out.ratios[0])) {
        snprintf(out.ratios[out.n_ratios].what, sizeof(out.ratios[0].what), "%s", what);
        out.ratios[out.n_ratios].ratio = q;
        out.ratios[out.n_ratios].target = target;
        out.n_ratios++;
    }
    if (!out.table)
        return;
    bar_clear();
    if (target > 0)
        printf("ratio %-35s %6.3f / %6.3f GB/s = %.2f  (target >= %.1f: %s)\n", what, a, b, q,
               target, q >= target ? "PASS" : "MISS");
    else
        printf("ratio %-35s %6.3f / %6.3f GB/s = %.2f\n", what, a, b, q);
    fflush(stdout);
}

static void json_summ(FILE *f, const char *name, const struct ixb_summ *s)
{
    fprintf(f,
            "\"%s\": {\"n\": %zu, \"avg_us\": %.3f, \"p50_us\": %.3f, \"p99_us\": %.3f, "
            "\"max_us\": %.3f}",
            name, s->n, s->avg, s->p50, s->p99, s->max);
}

static void json_str(FILE *f, const char *s)
{
    fputc('"', f);
    for (; *s != '\0'; s++) {
        if (*s == '"' || *s == '\\')
            fprintf(f, "\\%c", *s);
        else if ((unsigned char)*s < 0x20)
            fprintf(f, "\\u%04x", (unsigned char)*s);
        else
            fputc(*s, f);
    }
    fputc('"', f);
}

static void json_write(FILE *f, int status)
{
    char m[512];

    machine(m, sizeof(m));
    fprintf(f, "{\n  \"tool\": \"ixlbench\",\n  \"ixl_version\": ");
    json_str(f, ixl_version());
    fprintf(f, ",\n  \"backend\": ");
    json_str(f, out.backend);
    fprintf(f, ",\n  \"initiator\": ");
    json_str(f, out.initiator);
    fprintf(f, ",\n  \"target\": ");
    json_str(f, out.target);
    fprintf(f, ",\n  \"machine\": ");
    json_str(f, m);
    fprintf(f, ",\n  \"command\": [");
    for (int i = 0; i < out.o->argc; i++) {
        fprintf(f, "%s", i ? ", " : "");
        json_str(f, out.o->argv[i]);
    }
    fprintf(f, "],\n  \"status\": \"%s\",\n", status == 0 ? "pass" : "fail");
    fprintf(f, "  \"ratios\": [");
    for (size_t i = 0; i < out.n_ratios; i++) {
        fprintf(f, "%s{\"what\": ", i ? ", " : "");
        json_str(f, out.ratios[i].what);
        fprintf(f, ", \"ratio\": %.4f", out.ratios[i].ratio);
        if (out.ratios[i].target > 0)
            fprintf(f, ", \"target\": %.2f, \"met\": %s", out.ratios[i].target,
                    out.ratios[i].ratio >= out.ratios[i].target ? "true" : "false");
        fprintf(f, "}");
    }
    fprintf(f, "],\n");
    fprintf(f, "  \"rows\": [");
    for (size_t i = 0; i < out.n_rows; i++) {
        const struct ixb_row *r = &out.rows[i];
        fprintf(f, "%s\n    {\"scenario\": ", i ? "," : "");
        json_str(f, r->scenario);
        fprintf(f, ", \"op\": \"%s\", \"api\": \"%s\", \"path\": ", op_name(r->op),
                r->api == IXB_API_PREP ? "prep" : "plain");
        json_str(f, r->path);
        fprintf(
            f,
            ", \"block\": %" PRIu64 ", \"batch\": %" PRIu64 ", \"descs\": %" PRIu64
            ", \"threads\": %u, \"depth\": %u, \"iters\": %u, \"warmup\": %u, \"bytes\": %" PRIu64
            ", \"seconds\": %.6f, \"gbps\": %.4f, ",
            r->block, r->batch, r->descs, r->threads, r->depth, r->iters, r->warmup, r->bytes,
            r->seconds, r->gbps);
        json_summ(f, "latency", &r->lat);
        fprintf(f, ", ");
        json_summ(f, "prepare", &r->prep);
        fprintf(f, ", ");
        json_summ(f, "post", &r->post);
        fprintf(f, ", ");
        json_summ(f, "complete", &r->comp);
        if (r->has_notif) {
            fprintf(f, ", ");
            json_summ(f, "notif", &r->notif);
            fprintf(f, ", ");
            json_summ(f, "notif_after_done", &r->notif_done);
        }
        fprintf(f, ", \"prep_list_us\": %.3f, \"iops\": %.0f, \"check\": \"%s\"", r->prep_list_us,
                r->iops,
                r->check < 0 ? "off"
                : r->check   ? "pass"
                             : "fail");
        if (r->check == 0) {
            fprintf(f, ", \"check_error\": ");
            json_str(f, r->check_msg);
        }
        fprintf(f, "}");
    }
    fprintf(f, "\n  ]\n}\n");
}

/* Bandwidth against block size, one line per (op, batch) of the sweep rows. */
static int plot(const char *png)
{
    char dir[] = "/tmp/ixlbench-plot-XXXXXX", data[64], script[64];
    FILE *f;
    int n_series = 0, status;
    pid_t pid;
    struct {
        enum ixl_op op;
        uint64_t batch;
    } series[64];

    if (mkdtemp(dir) == NULL) {
        fprintf(stderr, "ixlbench: --plot: mkdtemp: %s\n", strerror(errno));
        return 1;
    }
    snprintf(data, sizeof(data), "%s/data", dir);
    snprintf(script, sizeof(script), "%s/plot.gp", dir);
    f = fopen(data, "w");
    if (f == NULL) {
        rmdir(dir);
        return 1;
    }
    for (size_t i = 0; i < out.n_rows; i++) {
        const struct ixb_row *r = &out.rows[i];
        int s;
        if (strcmp(r->scenario, "sweep") != 0)
            continue;
        for (s = 0; s < n_series; s++)
            if (series[s].op == r->op && series[s].batch == r->batch)
                break;
        if (s == n_series && n_series < 64) {
            series[n_series].op = r->op;
            series[n_series].batch = r->batch;
            n_series++;
        }
    }
    for (int s = 0; s < n_series; s++) {
        fprintf(f, "# %s batch %" PRIu64 "\n", op_name(series[s].op), series[s].batch);
        for (size_t i = 0; i < out.n_rows; i++) {
            const struct ixb_row *r = &out.rows[i];
            if (strcmp(r->scenario, "sweep") == 0 && r->op == series[s].op &&
                r->batch == series[s].batch)
                fprintf(f, "%" PRIu64 " %.4f\n", r->block, r->gbps);
        }
        fprintf(f, "\n\n");
    }
    fclose(f);
    f = fopen(script, "w");
    if (f == NULL) {
        unlink(data);
        rmdir(dir);
        return 1;
    }
    fprintf(f, "if (strstrt(GPVAL_TERMINALS, 'pngcairo') > 0) {\n"
               "  set terminal pngcairo size 1000,600 noenhanced\n"
               "} else {\n"
               "  set terminal png size 1000,600\n"
               "}\n");
    fprintf(f, "set output '%s'\n", png);
    fprintf(f, "set title 'ixlbench: %s, %s -> %s' noenhanced\n", out.backend, out.initiator,
            out.target);
    fprintf(f, "set logscale x 2\nset grid\nset key top left\nset xlabel 'block size'\n"
               "set ylabel 'GB/s (10^9 B/s)'\nset yrange [0:*]\n"
               "set offsets graph 0.03, graph 0.03, graph 0.05, 0\n");
    fprintf(f, "set xtics (");
    {
        int first = 1;
        for (uint64_t b = 1; b != 0 && b <= (1ull << 40); b *= 4) {
            bool used = false;
            for (size_t i = 0; i < out.n_rows && !used; i++)
                used = strcmp(out.rows[i].scenario, "sweep") == 0 && out.rows[i].block >= b / 2 &&
                       out.rows[i].block <= b * 2;
            if (used) {
                char s[32];
                ixb_size_str(b, s, sizeof(s));
                fprintf(f, "%s'%s' %" PRIu64, first ? "" : ", ", s, b);
                first = 0;
            }
        }
    }
    fprintf(f, ")\n");
    if (n_series == 0)
        fprintf(f, "set label 'no sweep rows' at graph 0.5, 0.5 center\nplot [1:2] NaN notitle\n");
    else
        fprintf(f, "plot ");
    for (int s = 0; s < n_series; s++)
        fprintf(f, "%s'%s' index %d using 1:2 with linespoints lw 2 title '%s batch %" PRIu64 "'",
                s ? ", " : "", data, s, op_name(series[s].op), series[s].batch);
    fprintf(f, "\n");
    fclose(f);
    fflush(NULL);
    pid = fork();
    if (pid == 0) {
        execlp("gnuplot", "gnuplot", script, (char *)NULL);
        _exit(127);
    }
    status = -1;
    if (pid > 0)
        while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
        }
    unlink(data);
    unlink(script);
    rmdir(dir);
    if (pid < 0 || !WIFEXITED(status) || WEXITSTATUS(status) != 0) {
        fprintf(stderr, "ixlbench: gnuplot failed to draw %s\n", png);
        return 1;
    }
    if (out.table)
        printf("plot: %s\n", png);
    return 0;
}

int ixb_out_close(int status)
{
    int rc = 0;

    bar_clear();
    if (out.json != NULL) {
        json_write(out.json, status);
        fflush(out.json);
    }
    if (out.csv_own)
        fclose(out.csv);
    if (out.json_own)
        fclose(out.json);
    if (out.o != NULL && out.o->plot_file != NULL && status != IXB_EXIT_SKIP)
        rc = plot(out.o->plot_file);
    free(out.rows);
    out.rows = NULL;
    return rc;
}
