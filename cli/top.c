/* `portcullis top`: a live view of the guard in a terminal (ncurses) —
 * verdicts per sandbox per second, the most refused destinations, the
 * queues and the log — from the log file (followed with logd's own reader,
 * as `log show --follow`), the engine's status (engine.sock) and logd's
 * metrics (logd-control.sock). --once prints one frame as plain text,
 * --json one snapshot; the counting is top_agg.c's. */
#include "cli/cli_int.h"

#include <curses.h>
#include <getopt.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define TOP_BACKLOG    (4u << 20) /* the log's last 4 MiB are read first */
#define TOP_REFRESH_MS 1000
#define TOP_KEY_MS     200 /* the longest a key, a signal or new lines wait */
#define TOP_CALL_MS    500 /* each daemon's answer */
#define TOP_REPLY_MAX  (1u << 20)

struct top {
	struct top_agg agg;
	struct logtail *tail;
	struct top_health h, prev;
	bool have_prev;
	const struct config *cfg;
	enum top_sort sort;
};

static volatile sig_atomic_t top_stop;

static void on_stop(int sig)
{
	(void)sig;
	top_stop = 1;
}

static void on_line(void *arg, const char *line, size_t len)
{
	struct top *t = arg;

	top_agg_line(&t->agg, line, len, pc_now_real_ms());
}

/* The engine's status and logd's metrics into *h; what did not answer is
 * said in h (the view shows it), never an error of the view. */
static void health_fetch(const struct config *cfg, struct top_health *h)
{
	struct pc_eng_reply r;
	struct pc_err err = {0};
	char path[PC_PATH_MAX + 32], *text = NULL;

	memset(h, 0, sizeof(*h));
	h->logd_checkpoint_age = -1;
	h->at_ms = pc_now_mono_ms();
	if (pc_engine_call(cfg->run_dir, PC_ENG_STATUS, TOP_CALL_MS, &r, &err) < 0) {
		pc_err_str(&err, h->engine_error, sizeof(h->engine_error));
	} else {
		if (r.type == PC_ENG_ERROR)
			snprintf(h->engine_error, sizeof(h->engine_error), "%s", r.message);
		else if (top_health_engine(r.json, strlen(r.json), h) < 0)
			snprintf(h->engine_error, sizeof(h->engine_error),
				 "its status was not understood");
		pc_eng_reply_free(&r);
	}
	memset(&err, 0, sizeof(err));
	snprintf(path, sizeof(path), "%s/%s", cfg->run_dir, LOGD_CTL_SOCK);
	if (pc_ctl_request(path, "metrics", TOP_CALL_MS, TOP_REPLY_MAX, &text, &err) < 0)
		pc_err_str(&err, h->logd_error, sizeof(h->logd_error));
	else if (top_health_logd(text, strlen(text), h) < 0)
		snprintf(h->logd_error, sizeof(h->logd_error), "%.150s", text);
	free(text);
}

static int tail_read(struct top *t)
{
	struct pc_err err = {0};

	if (logtail_read(t->tail, false, on_line, t, &err) < 0) {
		pc_cli_error("top", "%s", err.msg);
		return PC_EIO;
	}
	return 0;
}

static void draw(struct top *t)
{
	struct pc_buf b;
	const char *p;
	int y = 0;

	pc_buf_init(&b, 0, 0);
	top_render(&b, &t->agg, &t->h, t->have_prev ? &t->prev : NULL, t->sort, pc_now_real_ms(),
		   (size_t)(COLS > 0 ? COLS : 80), (size_t)(LINES > 1 ? LINES - 1 : 1));
	erase();
	for (p = pc_buf_str(&b); *p && y < LINES - 1; y++) {
		size_t n = strcspn(p, "\n");

		if (y == 0)
			attron(A_BOLD);
		mvaddnstr(y, 0, p, (int)n);
		if (y == 0)
			attroff(A_BOLD);
		p += n + (p[n] == '\n');
	}
	attron(A_REVERSE);
	mvaddnstr(LINES - 1, 0, " q quit   s sort (total, refused, name) ", COLS);
	attroff(A_REVERSE);
	refresh();
	pc_buf_free(&b);
}

static int screen_run(struct top *t)
{
	uint64_t last_fetch = pc_now_mono_ms(), last_draw = 0;
	SCREEN *scr;
	int rc = 0;

	if (!isatty(STDIN_FILENO) || !isatty(STDOUT_FILENO)) {
		pc_cli_error("top", "not a terminal (--once prints one frame, --json a snapshot)");
		return PC_EINVAL;
	}
	scr = newterm(NULL, stdout, stdin);
	if (!scr) {
		pc_cli_error("top", "cannot drive this terminal (TERM=%s)",
			     getenv("TERM") ? getenv("TERM") : "");
		return PC_EINVAL;
	}
	cbreak();
	noecho();
	keypad(stdscr, TRUE);
	curs_set(0);
	timeout(TOP_KEY_MS);
	while (!top_stop) {
		uint64_t now = pc_now_mono_ms();
		int ch;

		if ((rc = tail_read(t)) < 0)
			break;
		if (now - last_fetch >= TOP_REFRESH_MS) {
			t->prev = t->h;
			t->have_prev = true;
			health_fetch(t->cfg, &t->h);
			last_fetch = now;
		}
		if (!last_draw || now - last_draw >= TOP_REFRESH_MS) {
			draw(t);
			last_draw = now;
		}
		ch = getch();
		if (ch == 'q' || ch == 'Q')
			break;
		if (ch == 's' || ch == 'S') {
			t->sort = (enum top_sort)((t->sort + 1) % TOP_SORT_N);
			last_draw = 0;
		} else if (ch == KEY_RESIZE || ch == 12 /* ^L */) {
			clearok(curscr, TRUE);
			last_draw = 0;
		}
	}
	/* the terminal as it was, whatever ended the loop */
	endwin();
	delscreen(scr);
	return rc;
}

int cli_top(int argc, char **argv, const char *config)
{
	static const struct option opts[] = {
	    {"once", no_argument, NULL, '1'}, {"json", no_argument, NULL, 'j'}, {NULL, 0, NULL, 0}};
	struct config cfg;
	struct pc_err err = {0};
	struct sigaction sa;
	struct top *t;
	bool once = false, json = false;
	char ebuf[1024];
	int opt, rc = PC_EXIT_OK;

	while ((opt = getopt_long(argc, argv, "", opts, NULL)) != -1) {
		if (opt == '1')
			once = true;
		else if (opt == 'j')
			json = true;
		else
			return PC_EXIT_USAGE;
	}
	if (optind != argc)
		return PC_EXIT_USAGE;
	if (config_load(config, &cfg, &err) < 0) {
		pc_cli_error("configuration", "%s", pc_err_str(&err, ebuf, sizeof(ebuf)));
		return PC_EXIT_ERROR;
	}
	if (!(t = calloc(1, sizeof(*t)))) {
		pc_cli_error("top", "out of memory");
		return PC_EXIT_ERROR;
	}
	t->cfg = &cfg;
	top_agg_init(&t->agg);
	if (logtail_open(cfg.log.file, TOP_BACKLOG, &t->tail, &err) < 0) {
		pc_cli_error("top", "%s", pc_err_str(&err, ebuf, sizeof(ebuf)));
		free(t);
		return PC_EXIT_ERROR;
	}
	if (tail_read(t) < 0) {
		rc = PC_EXIT_ERROR;
		goto out;
	}
	health_fetch(&cfg, &t->h);
	if (once || json) {
		struct pc_buf b;

		pc_buf_init(&b, 0, 0);
		if (json) {
			top_render_json(&b, &t->agg, &t->h, pc_now_real_ms());
			pc_buf_putc(&b, '\n');
		} else {
			top_render(&b, &t->agg, &t->h, NULL, TOP_SORT_TOTAL, pc_now_real_ms(), 0,
				   0);
		}
		if (b.err || fputs(pc_buf_str(&b), stdout) < 0 || fflush(stdout) != 0)
			rc = PC_EXIT_ERROR;
		pc_buf_free(&b);
		goto out;
	}
	/* the view only (a single frame ends by itself); before curses
	 * starts: it installs its own handlers only where none is */
	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = on_stop;
	sigaction(SIGINT, &sa, NULL);
	sigaction(SIGTERM, &sa, NULL);
	sigaction(SIGHUP, &sa, NULL);
	if (screen_run(t) < 0)
		rc = PC_EXIT_ERROR;
out:
	logtail_close(t->tail);
	free(t);
	return rc;
}
