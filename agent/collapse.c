/*
 * The console's collapse (collapse.h): identical lines of several local
 * ranks shown once.
 *
 * Each fd is a lane of its own. A lane keeps each rank's waiting lines in
 * order (a queue per rank), every waiting line in the order it came (the
 * window is judged on the oldest), and the waiting texts in a hash map: a
 * group per text, counting its lines and which ranks hold one. Only heads
 * of queues are ever shown, so each rank's lines come out in its order. A
 * group goes out, once for the ranks whose queue it heads, when:
 *   - it heads the queue of every rank still printing (complete: the lines
 *     a rank done printing holds ahead of its own twin go out first);
 *   - every other rank still printing is past it (settled: it printed,
 *     without this text, the text that follows it in the head's rank; ranks
 *     print in one order, so no twin can come: a rank's own line between
 *     lines alike goes out as soon as the others print the next one);
 *   - the oldest waiting line's window passes (its group, for the ranks it
 *     heads; a twin waiting behind another line goes out later, apart).
 * Showing a group pops those heads, and the new heads may complete or
 * settle their own groups. No line waits longer than the window.
 *
 * Failure modes: a rank printing past its share of the cap (a flood) is
 * shown as it comes, uncollapsed, said once per rank and round, and its
 * twins no longer wait for it; without memory a line is shown as it comes.
 * Both keep every line.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "collapse.h"
#include "crun/log.h"
#include "crun/map.h"
#include "crun/ranges.h"

/* Longest "[rank<N>]: " that torch puts before a rank's error lines. */
#define TAG_MAX 24

/* Ranks past which the collapse tracks who holds a text (a bit each). */
#define HOLDERS_MAX 64

struct cgroup {
	struct map_node node; /* keyed by text */
	int n;		      /* waiting lines of this text */
	uint64_t holders;     /* ranks < HOLDERS_MAX holding one of them */
	size_t len;
	char text[];
};

struct cline {
	struct cline *rnext;	   /* the next line of its rank */
	struct cline *prev, *next; /* all waiting lines, oldest first */
	struct cgroup *g;
	uint64_t t; /* when it came (loop time, ms) */
	int rank;
	char tag[TAG_MAX]; /* torch's "[rank<N>]: " the text had, if any */
	size_t taglen;
};

struct crank {
	struct cline *head, *tail;
	size_t bytes; /* its waiting lines' text */
	int live;     /* it prints on this fd (and does not flood): twins wait
			 for it */
	int open;     /* between collapse_rank_open and collapse_rank_done */
	int done;     /* its fd closed (o.done not told yet) */
	char prefix[128];
	size_t plen;
};

struct lane {
	int fd;
	struct map groups;
	struct cline *oldest, *newest;
	struct crank *ranks;
	int nlive;
	size_t bytes;
};

struct collapse {
	uv_timer_t timer;
	struct collapse_opts o;
	char role[64];
	int nranks;
	int *shown;	     /* the ranks a group is shown for (nranks) */
	struct lane lane[2]; /* fd 1, fd 2 */
};

static struct lane *lane_of(struct collapse *c, int fd)
{
	return &c->lane[fd == 2];
}

/*
 * Show one text for ranks r[0..n): for one rank with its own prefix and the
 * tag its line had, else once with the ranks named.
 */
static void show(struct collapse *c, struct lane *l, const int *r, int n,
		 const char *text, size_t len)
{
	const struct crank *q = &l->ranks[r[0]];
	struct collapse_shown s = {l->fd, r,	n,   NULL,	0,
				   0,	  text, len, q->head->t};
	char prefix[256];
	size_t k;

	for (int i = 1; i < n; i++)
		if (l->ranks[r[i]].head->t < s.t)
			s.t = l->ranks[r[i]].head->t;
	if (n == 1) {
		k = q->plen;
		memcpy(prefix, q->prefix, k);
		memcpy(prefix + k, q->head->tag, q->head->taglen);
		s.taglen = q->head->taglen;
		k += s.taglen;
	} else {
		size_t room;

		k = (size_t)snprintf(prefix, sizeof(prefix), "[%s", c->role);
		room = sizeof(prefix) - k - 2;
		if (ranges_format(r, n, 0, prefix + k, room) >= room)
			memcpy(prefix + sizeof(prefix) - 6, "...", 3); /* cut */
		k += strlen(prefix + k);
		prefix[k++] = ']';
		prefix[k++] = ':';
	}
	s.prefix = prefix;
	s.plen = k;
	c->o.emit(&s, c->o.data);
}

static int holds(const struct crank *q, const struct cgroup *g);

/* Rank r, done, has no line waiting: o.done is told (once). */
static void told_done(struct collapse *c, struct lane *l, int r)
{
	l->ranks[r].done = 0;
	if (c->o.done)
		c->o.done(l->fd, r, c->o.data);
}

/* Pop rank r's head line; the line after it becomes the head. */
static void pop_head(struct collapse *c, struct lane *l, int r)
{
	struct crank *q = &l->ranks[r];
	struct cline *x = q->head;
	struct cgroup *g = x->g;

	q->head = x->rnext;
	if (q->head == NULL)
		q->tail = NULL;
	if (q->head == NULL && q->done)
		told_done(c, l, r);
	if (x->prev)
		x->prev->next = x->next;
	else
		l->oldest = x->next;
	if (x->next)
		x->next->prev = x->prev;
	else
		l->newest = x->prev;
	q->bytes -= g->len;
	l->bytes -= g->len;
	g->n--;
	free(x);
	if (r < HOLDERS_MAX && g->n > 0 && !holds(q, g))
		g->holders &= ~((uint64_t)1 << r);
}

static void group_release(struct lane *l, struct cgroup *g)
{
	if (g->n == 0) {
		map_remove(&l->groups, &g->node);
		free(g);
	}
}

/* The group that heads the queue of every rank still printing, or NULL. */
static struct cgroup *complete_head(struct collapse *c, struct lane *l)
{
	struct cgroup *g = NULL;

	for (int i = 0; i < c->nranks; i++) {
		struct cline *x = l->ranks[i].head;

		if (!l->ranks[i].live)
			continue;
		if (x == NULL || (g && x->g != g))
			return NULL;
		g = x->g;
	}
	return g;
}

/*
 * Whether no more twins of head line x can come: each rank still printing
 * has x's text at its head, or has printed, without it, the text that comes
 * after x in x's rank (ranks print in one order: it is past x's place).
 * Tracked for the first HOLDERS_MAX ranks; past them, the window decides.
 */
static int settled(struct collapse *c, struct lane *l, const struct cline *x)
{
	const struct cgroup *h = x->rnext ? x->rnext->g : NULL;

	if (h == NULL || c->nranks > HOLDERS_MAX || h == x->g)
		return 0;
	for (int s = 0; s < c->nranks; s++) {
		const struct crank *q = &l->ranks[s];
		uint64_t bit = (uint64_t)1 << s;

		if (!q->live || (q->head && q->head->g == x->g))
			continue;
		if (!(h->holders & bit) || (x->g->holders & bit))
			return 0;
	}
	return 1;
}

/* A head line whose twins are all in, or NULL. */
static struct cgroup *settled_head(struct collapse *c, struct lane *l)
{
	for (int i = 0; i < c->nranks; i++) {
		struct cline *x = l->ranks[i].head;

		if (x && settled(c, l, x))
			return x->g;
	}
	return NULL;
}

/* Show g once for every rank whose queue it heads; pop those lines. */
static void show_group(struct collapse *c, struct lane *l, struct cgroup *g)
{
	int *r = c->shown;
	int n = 0;

	for (int i = 0; i < c->nranks; i++)
		if (l->ranks[i].head && l->ranks[i].head->g == g)
			r[n++] = i;
	if (n > 0)
		show(c, l, r, n, g->text, g->len);
	for (int i = 0; i < n; i++)
		pop_head(c, l, r[i]);
	group_release(l, g);
}

/* Whether rank r's queue holds a line of g. */
static int holds(const struct crank *q, const struct cgroup *g)
{
	for (const struct cline *x = q->head; x; x = x->rnext)
		if (x->g == g)
			return 1;
	return 0;
}

/*
 * g heads every printing rank's queue: the lines that a rank done printing
 * holds ahead of its own line of g go out first (no printing rank can add
 * their twins before g), so that g then goes out once for all of them.
 */
static void gather(struct collapse *c, struct lane *l, struct cgroup *g)
{
	for (int i = 0; i < c->nranks; i++) {
		struct crank *q = &l->ranks[i];

		while (!q->live && q->head && q->head->g != g && holds(q, g))
			show_group(c, l, q->head->g);
	}
}

/*
 * Show g (or nothing) for the ranks it heads, then each group completed or
 * settled by the new heads.
 */
static void show_heads(struct collapse *c, struct lane *l, struct cgroup *g)
{
	if (g)
		show_group(c, l, g);
	for (;;) {
		if ((g = complete_head(c, l)) != NULL)
			gather(c, l, g);
		else if ((g = settled_head(c, l)) == NULL)
			break;
		show_group(c, l, g);
	}
}

/* How many ranks' queues g heads. */
static int heads_of(struct collapse *c, struct lane *l, struct cgroup *g)
{
	int n = 0;

	for (int i = 0; i < c->nranks; i++)
		n += l->ranks[i].head && l->ranks[i].head->g == g;
	return n;
}

/*
 * Show everything that waits, as collapsed as the order allows: no twin
 * can come any more, so a group all of whose lines head their queues goes
 * first (the lines ahead of a group's other lines go out before it, and it
 * then goes out once); without one, the oldest line's group.
 */
static void flush_lane(struct collapse *c, struct lane *l)
{
	while (l->oldest) {
		struct cgroup *g = l->oldest->g;

		for (int i = 0; i < c->nranks; i++) {
			struct cline *x = l->ranks[i].head;

			if (x && heads_of(c, l, x->g) == x->g->n) {
				g = x->g;
				break;
			}
		}
		show_heads(c, l, g);
	}
}

/* Show rank r's waiting lines (with their twins at other heads). */
static void flush_rank(struct collapse *c, struct lane *l, int r)
{
	while (l->ranks[r].head)
		show_heads(c, l, l->ranks[r].head->g);
}

static void on_timer(uv_timer_t *t);

/* The timer fires when the oldest waiting line's window passes. */
static void arm(struct collapse *c)
{
	uint64_t due = UINT64_MAX, now = uv_now(c->timer.loop);

	for (int i = 0; i < 2; i++) {
		struct cline *x = c->lane[i].oldest;

		if (x && x->t + c->o.window_ms < due)
			due = x->t + c->o.window_ms;
	}
	if (due == UINT64_MAX)
		uv_timer_stop(&c->timer);
	else
		uv_timer_start(&c->timer, on_timer, due > now ? due - now : 0,
			       0);
}

static void on_timer(uv_timer_t *t)
{
	struct collapse *c = t->data;
	uint64_t now = uv_now(t->loop);

	for (int i = 0; i < 2; i++) {
		struct lane *l = &c->lane[i];

		/* The oldest line heads its rank's queue: it is shown. */
		while (l->oldest && l->oldest->t + c->o.window_ms <= now)
			show_heads(c, l, l->oldest->g);
	}
	arm(c);
}

struct collapse *collapse_new(uv_loop_t *loop, const struct collapse_opts *o)
{
	struct collapse *c = calloc(1, sizeof(*c));

	if (c == NULL)
		return NULL;
	c->o = *o;
	snprintf(c->role, sizeof(c->role), "%s", o->role ? o->role : "");
	for (int i = 0; i < 2; i++) {
		c->lane[i].fd = i + 1;
		map_init(&c->lane[i].groups);
	}
	uv_timer_init(loop, &c->timer);
	c->timer.data = c;
	return c;
}

void collapse_flush(struct collapse *c)
{
	for (int i = 0; i < 2; i++)
		flush_lane(c, &c->lane[i]);
	uv_timer_stop(&c->timer);
}

void collapse_ranks(struct collapse *c, int n)
{
	collapse_flush(c);
	free(c->shown);
	if ((c->shown = calloc((size_t)(n > 0 ? n : 1), sizeof(int))) == NULL)
		n = 0; /* every line is then shown as it comes */
	for (int i = 0; i < 2; i++) {
		struct lane *l = &c->lane[i];
		struct crank *q = calloc((size_t)(n > 0 ? n : 1), sizeof(*q));

		if (q == NULL)
			n = 0; /* every line is then shown as it comes */
		free(l->ranks);
		l->ranks = q;
		l->nlive = 0;
	}
	c->nranks = n;
}

void collapse_rank_open(struct collapse *c, int fd, int r)
{
	struct lane *l = lane_of(c, fd);

	if (r >= 0 && r < c->nranks && !l->ranks[r].open) {
		l->ranks[r].open = 1;
		l->ranks[r].live = 1;
		l->nlive++;
	}
}

/* Show one line for rank r alone, now. */
static void show_alone(struct collapse *c, struct lane *l, int r,
		       const char *prefix, size_t plen, const char *line,
		       size_t len, uint64_t t)
{
	int known = r >= 0 && r < c->nranks;
	struct collapse_shown s = {l->fd, &r,	known, prefix, plen,
				   0,	  line, len,   t};

	if (known)
		flush_rank(c, l, r);
	c->o.emit(&s, c->o.data);
}

/*
 * Whether rank r may hold len more bytes. Past its share it floods: its
 * lines are shown as they come, and its twins no longer wait for it.
 */
static int within_share(struct collapse *c, struct lane *l, int r, size_t len)
{
	struct crank *q = &l->ranks[r];
	size_t share = c->o.cap / (size_t)(l->nlive > 0 ? l->nlive : 1);

	if (q->bytes + len <= share && l->bytes + len <= c->o.cap)
		return 1;
	q->live = 0;
	l->nlive--;
	log_say("local rank %d prints more than its share of the console's "
		"collapse (%zu bytes waiting): its lines are shown as they "
		"come, uncollapsed, for the rest of the round",
		r, q->bytes);
	return 0;
}

/*
 * The length of torch's own "[rank<N>]: " before line (its elastic error
 * handler's, on every line of a rank's traceback), or 0: ranks' twins are
 * told apart only by it, and the console's prefix names the ranks already.
 */
static size_t torch_tag(const char *line, size_t len)
{
	size_t i = 5;

	if (len < 8 || memcmp(line, "[rank", 5) != 0)
		return 0;
	while (i < len && i < TAG_MAX - 3 && line[i] >= '0' && line[i] <= '9')
		i++;
	if (i == 5 || i + 1 >= len || line[i] != ']' || line[i + 1] != ':')
		return 0;
	i += 2;
	return i < len && line[i] == ' ' ? i + 1 : i;
}

void collapse_line(struct collapse *c, int fd, int r, const char *prefix,
		   size_t plen, const char *line, size_t len)
{
	collapse_line_at(c, fd, r, prefix, plen, line, len,
			 uv_now(c->timer.loop));
}

void collapse_line_at(struct collapse *c, int fd, int r, const char *prefix,
		      size_t plen, const char *line, size_t len, uint64_t t)
{
	size_t taglen;
	struct lane *l = lane_of(c, fd);
	struct crank *q;
	struct cline *x;
	struct cgroup *g;
	uint64_t h;

	if (r < 0 || r >= c->nranks || !l->ranks[r].live || plen == 0 ||
	    len == 0 || line[len - 1] != '\n' || memchr(line, '\r', len))
		return show_alone(c, l, r, prefix, plen, line, len, t);
	if (!within_share(c, l, r, len)) {
		show_alone(c, l, r, prefix, plen, line, len, t);
		show_heads(c, l, NULL);
		return arm(c);
	}
	q = &l->ranks[r];
	taglen = torch_tag(line, len);
	if (q->plen == 0 && plen > 0) {
		q->plen = plen < sizeof(q->prefix) ? plen : sizeof(q->prefix);
		memcpy(q->prefix, prefix, q->plen);
	}
	h = map_hash(line + taglen, len - taglen);
	g = (struct cgroup *)map_find(&l->groups, line + taglen, len - taglen,
				      h);
	if (g == NULL && (g = malloc(sizeof(*g) + len - taglen)) != NULL) {
		memset(g, 0, sizeof(*g));
		memcpy(g->text, line + taglen, len - taglen);
		g->len = len - taglen;
		g->node.key = g->text;
		g->node.klen = g->len;
		g->node.hash = h;
		if (map_insert(&l->groups, &g->node)) {
			free(g);
			g = NULL;
		}
	}
	if (g == NULL || (x = calloc(1, sizeof(*x))) == NULL) {
		if (g)
			group_release(l, g);
		return show_alone(c, l, r, prefix, plen, line, len, t);
	}
	x->g = g;
	x->rank = r;
	if (r < HOLDERS_MAX)
		g->holders |= (uint64_t)1 << r;
	memcpy(x->tag, line, taglen);
	x->taglen = taglen;
	x->t = t;
	g->n++;
	if (q->tail)
		q->tail->rnext = x;
	else
		q->head = x;
	q->tail = x;
	q->bytes += g->len;
	x->prev = l->newest;
	if (l->newest)
		l->newest->next = x;
	else
		l->oldest = x;
	l->newest = x;
	l->bytes += g->len;
	show_heads(c, l, NULL);
	arm(c);
}

void collapse_rank_done(struct collapse *c, int fd, int r)
{
	struct lane *l = lane_of(c, fd);
	struct crank *q;

	if (r < 0 || r >= c->nranks || !l->ranks[r].open)
		return;
	q = &l->ranks[r];
	q->open = 0;
	q->done = 1;
	if (q->head == NULL)
		told_done(c, l, r);
	if (!q->live) /* a flooding rank: nothing waits on it already */
		return;
	/* Its waiting lines may still meet their twins; they no longer wait
	 * for its. With no rank left printing, nothing more can come. */
	q->live = 0;
	if (--l->nlive == 0)
		flush_lane(c, l);
	else
		show_heads(c, l, NULL);
	arm(c);
}

static void on_closed(uv_handle_t *h)
{
	struct collapse *c = h->data;

	for (int i = 0; i < 2; i++) {
		map_release(&c->lane[i].groups);
		free(c->lane[i].ranks);
	}
	free(c->shown);
	free(c);
}

void collapse_free(struct collapse *c)
{
	collapse_flush(c);
	uv_close((uv_handle_t *)&c->timer, on_closed);
}
