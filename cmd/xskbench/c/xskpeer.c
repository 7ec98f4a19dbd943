// xskpeer: the C peer of xskbench. One AF_XDP socket and one thread per
// queue, in copy or zero-copy mode as the kernel grants, doing rxdrop or
// txonly with the same loop, ring sizes, UMEM and batch as xdpio's
// receivers and senders in xskbench. Raw syscalls and the kernel's uapi
// headers only: the rings are driven the way libxdp's xsk.h drives them
// (cached far index, one acquire load and one release store per batch).
//
// xskbench compiles and runs it; it is not meant to be run by hand:
//
//	xskpeer rxdrop|txonly IFINDEX QUEUES RING FRAMES FRAME_SIZE BATCH TX_BATCH TX_BUDGET NAP_NS GROUP
//
// With GROUP 1, rxdrop runs every socket in one thread that polls them all.
//
// File descriptor 3 is a shared control page (struct ctl below) that
// xskbench created: xskpeer reports its socket descriptors, thread IDs and
// packet counters there, and stops when xskbench sets quit. For rxdrop,
// xskbench registers the sockets in its own XDP program's XSKMAP.
#define _GNU_SOURCE
#include <errno.h>
#include <linux/if_xdp.h>
#include <poll.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#ifndef AF_XDP
#define AF_XDP 44
#endif
#ifndef SOL_XDP
#define SOL_XDP 283
#endif
#ifndef XDP_MAX_TX_SKB_BUDGET
#define XDP_MAX_TX_SKB_BUDGET 9
#endif

#define MAX_QUEUES 16
#define CTL_FD 3
#define IDLE_MS 10

// ctl is the shared control page; xskbench (cmd/xskbench/cpeer.go)
// reads and writes the same layout.
struct ctl {
	uint32_t ready;	    // set to 1 when every socket is bound, 2 on failure
	uint32_t quit;	    // set by xskbench: threads return
	uint32_t nqueues;
	uint32_t frame_len; // txonly: length of the template at offset 2048
	int32_t fds[MAX_QUEUES];
	int32_t tids[MAX_QUEUES];
	char err[96];
	uint8_t _pad[256 - 16 - 8 * MAX_QUEUES - 96];
	struct {
		uint64_t packets;
		uint64_t polls; // blocking waits (rxdrop) or waits for frames (txonly)
		uint8_t _pad[48];
	} ctr[MAX_QUEUES]; // at offset 256, one cache line each
};
#define TEMPLATE_OFF 2048

_Static_assert(sizeof(struct ctl) == 256 + 64 * MAX_QUEUES, "ctl layout");

struct ring {
	uint32_t *producer, *consumer, *flags;
	void *desc;
	uint32_t mask, size;
	uint32_t cached_prod, cached_cons;
	void *map;
	size_t map_len;
};

struct xsk {
	int fd, queue;
	uint8_t *umem;
	size_t umem_len;
	struct ring fill, comp, rx, tx;
	uint64_t *stack; // free frames
	uint32_t nfree;
};

int xskpeer_start(void *ctl_page, int tx, int ifx, int queues, int ring, int frames, int fsize, int rx_batch, int txb, int budget, long long nap, int grp);
void xskpeer_stop(void);

static struct ctl *ctl;
static int mode_tx;
static int ifindex, nqueues, ring_size, nframes, frame_size, batch, tx_batch, tx_budget;
static long long nap_ns; // rxdrop: xdpio's RXNap policy when positive
static int group;	 // rxdrop: one thread for every socket

// fail records what failed in the control page and returns -1.
static int fail(const char *what)
{
	snprintf(ctl->err, sizeof ctl->err, "%s: %s", what, strerror(errno));
	__atomic_store_n(&ctl->ready, 2, __ATOMIC_RELEASE);
	return -1;
}

// Producer side (fill, TX): free entries, loading the kernel's consumer
// index only when the cached view has fewer than n.
static inline uint32_t prod_free(struct ring *r, uint32_t n)
{
	uint32_t free = r->cached_cons - r->cached_prod;
	if (free >= n)
		return free;
	r->cached_cons = __atomic_load_n(r->consumer, __ATOMIC_ACQUIRE) + r->size;
	return r->cached_cons - r->cached_prod;
}

static inline void prod_submit(struct ring *r)
{
	__atomic_store_n(r->producer, r->cached_prod, __ATOMIC_RELEASE);
}

// Consumer side (RX, completion): ready entries, up to n.
static inline uint32_t cons_peek(struct ring *r, uint32_t n)
{
	uint32_t avail = r->cached_prod - r->cached_cons;
	if (avail == 0) {
		r->cached_prod = __atomic_load_n(r->producer, __ATOMIC_ACQUIRE);
		avail = r->cached_prod - r->cached_cons;
	}
	return avail < n ? avail : n;
}

static inline void cons_release(struct ring *r)
{
	__atomic_store_n(r->consumer, r->cached_cons, __ATOMIC_RELEASE);
}

static inline int need_wakeup(struct ring *r)
{
	return __atomic_load_n(r->flags, __ATOMIC_RELAXED) & XDP_RING_NEED_WAKEUP;
}

static int map_ring(struct xsk *x, struct ring *r, const struct xdp_ring_offset *o, off_t pgoff, size_t entry, uint32_t n, int producer)
{
	size_t len = o->desc + n * entry;
	uint8_t *m = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_POPULATE, x->fd, pgoff);
	if (m == MAP_FAILED)
		return fail("mmap ring");
	r->map = m;
	r->map_len = len;
	r->producer = (uint32_t *)(m + o->producer);
	r->consumer = (uint32_t *)(m + o->consumer);
	r->flags = (uint32_t *)(m + o->flags);
	r->desc = m + o->desc;
	r->mask = n - 1;
	r->size = n;
	r->cached_prod = __atomic_load_n(r->producer, __ATOMIC_ACQUIRE);
	r->cached_cons = __atomic_load_n(r->consumer, __ATOMIC_ACQUIRE);
	if (producer)
		r->cached_cons += n;
	return 0;
}

static int setopt(int fd, int opt, int v, const char *what)
{
	if (setsockopt(fd, SOL_XDP, opt, &v, sizeof v) < 0)
		return fail(what);
	return 0;
}

static int open_xsk(struct xsk *x, int queue)
{
	x->queue = queue;
	x->fd = socket(AF_XDP, SOCK_RAW | SOCK_CLOEXEC, 0);
	if (x->fd < 0)
		return fail("socket(AF_XDP)");
	size_t len = (size_t)nframes * frame_size;
	x->umem = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_POPULATE, -1, 0);
	if (x->umem == MAP_FAILED) {
		x->umem = NULL;
		return fail("mmap UMEM");
	}
	x->umem_len = len;
	struct xdp_umem_reg reg = {.addr = (uintptr_t)x->umem, .len = len, .chunk_size = frame_size};
	if (setsockopt(x->fd, SOL_XDP, XDP_UMEM_REG, &reg, sizeof reg) < 0)
		return fail("XDP_UMEM_REG");
	if (setopt(x->fd, XDP_UMEM_FILL_RING, ring_size, "XDP_UMEM_FILL_RING") ||
	    setopt(x->fd, XDP_UMEM_COMPLETION_RING, ring_size, "XDP_UMEM_COMPLETION_RING") ||
	    setopt(x->fd, mode_tx ? XDP_TX_RING : XDP_RX_RING, ring_size, "XDP_RX/TX_RING"))
		return -1;
	struct xdp_mmap_offsets off;
	socklen_t ol = sizeof off;
	if (getsockopt(x->fd, SOL_XDP, XDP_MMAP_OFFSETS, &off, &ol) < 0)
		return fail("XDP_MMAP_OFFSETS");
	if (map_ring(x, &x->fill, &off.fr, XDP_UMEM_PGOFF_FILL_RING, sizeof(uint64_t), ring_size, 1) ||
	    map_ring(x, &x->comp, &off.cr, XDP_UMEM_PGOFF_COMPLETION_RING, sizeof(uint64_t), ring_size, 0))
		return -1;
	if (mode_tx) {
		if (map_ring(x, &x->tx, &off.tx, XDP_PGOFF_TX_RING, sizeof(struct xdp_desc), ring_size, 1))
			return -1;
		if (tx_budget > 0) {
			int b = tx_budget < ring_size ? tx_budget : ring_size;
			setsockopt(x->fd, SOL_XDP, XDP_MAX_TX_SKB_BUDGET, &b, sizeof b); // best effort, as xdpio
		}
	} else if (map_ring(x, &x->rx, &off.rx, XDP_PGOFF_RX_RING, sizeof(struct xdp_desc), ring_size, 0)) {
		return -1;
	}

	x->stack = malloc(sizeof(uint64_t) * nframes);
	if (!x->stack)
		return fail("malloc");
	for (int i = nframes - 1; i >= 0; i--)
		x->stack[x->nfree++] = (uint64_t)i * frame_size;
	if (mode_tx) {
		for (int i = 0; i < nframes; i++)
			memcpy(x->umem + (size_t)i * frame_size, (uint8_t *)ctl + TEMPLATE_OFF, ctl->frame_len);
	} else {
		// Fill before bind, as many frames as the fill ring takes.
		uint32_t n = prod_free(&x->fill, x->nfree);
		uint64_t *addrs = x->fill.desc;
		for (uint32_t i = 0; i < n; i++)
			addrs[(x->fill.cached_prod + i) & x->fill.mask] = x->stack[--x->nfree];
		x->fill.cached_prod += n;
		prod_submit(&x->fill);
	}
	struct sockaddr_xdp sa = {.sxdp_family = AF_XDP, .sxdp_ifindex = ifindex, .sxdp_queue_id = queue, .sxdp_flags = XDP_USE_NEED_WAKEUP};
	for (int tries = 0;; tries++) {
		if (bind(x->fd, (struct sockaddr *)&sa, sizeof sa) == 0)
			break;
		// The previous backend's socket on the queue may still be going.
		if (errno != EBUSY || tries > 100)
			return fail("bind");
		usleep(10000);
	}
	return 0;
}

static void close_xsk(struct xsk *x)
{
	struct ring *rings[] = {&x->fill, &x->comp, &x->rx, &x->tx};
	for (int i = 0; i < 4; i++)
		if (rings[i]->map)
			munmap(rings[i]->map, rings[i]->map_len);
	if (x->fd > 0)
		close(x->fd);
	if (x->umem)
		munmap(x->umem, x->umem_len);
	free(x->stack);
	memset(x, 0, sizeof *x);
}

static void wait_fd(int fd, short ev, uint64_t *polls)
{
	struct pollfd p = {.fd = fd, .events = ev};
	poll(&p, 1, IDLE_MS);
	__atomic_store_n(polls, *polls + 1, __ATOMIC_RELAXED);
}

// rx_once takes what x's RX ring holds (up to batch) and gives the frames
// back through the fill ring, topped up from the free stack with whatever
// room is left (what does not fit waits on the stack). It returns how many
// it took.
static uint32_t rx_once(struct xsk *x)
{
	struct xdp_desc *rx = x->rx.desc;
	uint64_t *fill = x->fill.desc;
	uint32_t n = cons_peek(&x->rx, batch);
	if (n == 0)
		return 0;
	uint32_t room = prod_free(&x->fill, n);
	uint32_t idx = x->fill.cached_prod, k = 0;
	for (uint32_t i = 0; i < n; i++) {
		uint64_t a = rx[(x->rx.cached_cons + i) & x->rx.mask].addr;
		a -= a % frame_size;
		if (k < room)
			fill[(idx + k++) & x->fill.mask] = a;
		else
			x->stack[x->nfree++] = a;
	}
	while (k < room && x->nfree > 0)
		fill[(idx + k++) & x->fill.mask] = x->stack[--x->nfree];
	x->fill.cached_prod = idx + k;
	prod_submit(&x->fill);
	x->rx.cached_cons += n;
	cons_release(&x->rx);
	return n;
}

static void rxdrop(struct xsk *x, uint64_t *ctr, uint64_t *polls)
{
	uint64_t total = 0;
	int flowing = 0;
	while (!__atomic_load_n(&ctl->quit, __ATOMIC_RELAXED)) {
		uint32_t n = rx_once(x);
		if (n == 0) {
			// xdpio's RXNap: while packets flow, sleep on a timer
			// instead of on the socket; poll once a nap found nothing.
			if (nap_ns > 0 && flowing) {
				struct timespec ts = {.tv_sec = nap_ns / 1000000000, .tv_nsec = nap_ns % 1000000000};
				nanosleep(&ts, NULL);
				if (cons_peek(&x->rx, 1) > 0)
					continue;
				flowing = 0;
			}
			if (need_wakeup(&x->fill))
				recvfrom(x->fd, NULL, 0, MSG_DONTWAIT, NULL, NULL);
			wait_fd(x->fd, POLLIN, polls);
			continue;
		}
		flowing = 1;
		total += n;
		__atomic_store_n(ctr, total, __ATOMIC_RELAXED);
	}
}

// rxdrop_all is rxdrop of every socket in one thread (group mode): it
// drains each ring in turn and, when all were empty, naps (with nap_ns,
// while packets flow) or polls all the sockets at once.
static void rxdrop_all(struct xsk *xs, int n)
{
	uint64_t totals[MAX_QUEUES] = {0};
	struct pollfd pfd[MAX_QUEUES];
	int flowing = 0;
	for (int q = 0; q < n; q++)
		pfd[q] = (struct pollfd){.fd = xs[q].fd, .events = POLLIN};
	while (!__atomic_load_n(&ctl->quit, __ATOMIC_RELAXED)) {
		uint32_t got = 0;
		for (int q = 0; q < n; q++) {
			uint32_t k = rx_once(&xs[q]);
			if (k) {
				totals[q] += k;
				__atomic_store_n(&ctl->ctr[q].packets, totals[q], __ATOMIC_RELAXED);
				got += k;
			}
		}
		if (got) {
			flowing = 1;
			continue;
		}
		if (nap_ns > 0 && flowing) {
			struct timespec ts = {.tv_sec = nap_ns / 1000000000, .tv_nsec = nap_ns % 1000000000};
			nanosleep(&ts, NULL);
			flowing = 0;
			continue;
		}
		for (int q = 0; q < n; q++)
			if (need_wakeup(&xs[q].fill))
				recvfrom(xs[q].fd, NULL, 0, MSG_DONTWAIT, NULL, NULL);
		poll(pfd, n, IDLE_MS);
		__atomic_store_n(&ctl->ctr[0].polls, ctl->ctr[0].polls + 1, __ATOMIC_RELAXED);
	}
}

static void txonly(struct xsk *x, uint64_t *ctr, uint64_t *polls)
{
	uint64_t total = 0;
	struct xdp_desc *tx = x->tx.desc;
	uint64_t *comp = x->comp.desc;
	uint32_t len = ctl->frame_len;
	uint32_t want = tx_batch > 0 ? tx_batch : ring_size;
	while (!__atomic_load_n(&ctl->quit, __ATOMIC_RELAXED)) {
		// Reclaim completions first, so recently sent (cache-warm)
		// frames are reused.
		uint32_t c = cons_peek(&x->comp, ring_size);
		for (uint32_t i = 0; i < c; i++)
			x->stack[x->nfree++] = comp[(x->comp.cached_cons + i) & x->comp.mask];
		if (c) {
			x->comp.cached_cons += c;
			cons_release(&x->comp);
		}
		uint32_t n = want < x->nfree ? want : x->nfree;
		uint32_t room = prod_free(&x->tx, n);
		if (room < n)
			n = room;
		if (n == 0) {
			if (need_wakeup(&x->tx))
				sendto(x->fd, NULL, 0, MSG_DONTWAIT, NULL, 0);
			wait_fd(x->fd, POLLOUT, polls);
			continue;
		}
		uint32_t idx = x->tx.cached_prod;
		for (uint32_t i = 0; i < n; i++) {
			struct xdp_desc *d = &tx[(idx + i) & x->tx.mask];
			d->addr = x->stack[--x->nfree];
			d->len = len;
			d->options = 0;
		}
		x->tx.cached_prod = idx + n;
		prod_submit(&x->tx);
		if (need_wakeup(&x->tx))
			sendto(x->fd, NULL, 0, MSG_DONTWAIT, NULL, 0); // EAGAIN/EBUSY/ENOBUFS: try again next loop
		total += n;
		__atomic_store_n(ctr, total, __ATOMIC_RELAXED);
	}
}

static struct xsk xsks[MAX_QUEUES];
static pthread_t threads[MAX_QUEUES];
static int nthreads;

static void *worker(void *arg)
{
	int q = (int)(intptr_t)arg;
	__atomic_store_n(&ctl->tids[q], (int32_t)syscall(SYS_gettid), __ATOMIC_RELAXED);
	if (mode_tx)
		txonly(&xsks[q], &ctl->ctr[q].packets, &ctl->ctr[q].polls);
	else if (group)
		rxdrop_all(xsks, nqueues);
	else
		rxdrop(&xsks[q], &ctl->ctr[q].packets, &ctl->ctr[q].polls);
	return NULL;
}

// xskpeer_start opens the sockets on the control page ctl_page (which
// must hold frame_len and the template for txonly), starts one thread per
// queue and marks the page ready; xskpeer_stop ends the threads and frees
// everything. On failure it returns -1 with the reason in the page. The
// same code runs as a program (below) or inside xskbench through cgo.
int xskpeer_start(void *ctl_page, int tx, int ifx, int queues, int ring, int frames, int fsize, int rx_batch, int txb, int budget, long long nap, int grp)
{
	nap_ns = nap;
	group = grp && !tx;
	ctl = ctl_page;
	mode_tx = tx;
	ifindex = ifx;
	nqueues = queues;
	ring_size = ring;
	nframes = frames;
	frame_size = fsize;
	batch = rx_batch;
	tx_batch = txb;
	tx_budget = budget;
	errno = EINVAL;
	if (nqueues < 1 || nqueues > MAX_QUEUES || ring_size < 1 || nframes < ring_size || frame_size < 2048 || batch < 1)
		return fail("arguments");
	for (int q = 0; q < nqueues; q++) {
		if (open_xsk(&xsks[q], q) < 0) {
			for (int i = 0; i <= q; i++)
				close_xsk(&xsks[i]);
			return -1;
		}
		ctl->fds[q] = xsks[q].fd;
	}
	ctl->nqueues = nqueues;
	for (nthreads = 0; nthreads < (group ? 1 : nqueues); nthreads++) {
		int e = pthread_create(&threads[nthreads], NULL, worker, (void *)(intptr_t)nthreads);
		if (e != 0) {
			errno = e;
			fail("pthread_create");
			xskpeer_stop();
			return -1;
		}
	}
	__atomic_store_n(&ctl->ready, 1, __ATOMIC_RELEASE);
	return 0;
}

void xskpeer_stop(void)
{
	__atomic_store_n(&ctl->quit, 1, __ATOMIC_RELAXED);
	for (int q = 0; q < nthreads; q++)
		pthread_join(threads[q], NULL);
	nthreads = 0;
	for (int q = 0; q < nqueues; q++)
		close_xsk(&xsks[q]);
}

#ifndef XSKPEER_LIB
int main(int argc, char **argv)
{
	if (argc != 12) {
		fprintf(stderr, "usage: xskpeer rxdrop|txonly IFINDEX QUEUES RING FRAMES FRAME_SIZE BATCH TX_BATCH TX_BUDGET NAP_NS GROUP\n");
		return 2;
	}
	mode_tx = strcmp(argv[1], "txonly") == 0;
	ifindex = atoi(argv[2]);
	nqueues = atoi(argv[3]);
	ring_size = atoi(argv[4]);
	nframes = atoi(argv[5]);
	frame_size = atoi(argv[6]);
	batch = atoi(argv[7]);
	tx_batch = atoi(argv[8]);
	tx_budget = atoi(argv[9]);
	nap_ns = atoll(argv[10]);
	group = atoi(argv[11]);
	void *page = mmap(NULL, 4096, PROT_READ | PROT_WRITE, MAP_SHARED, CTL_FD, 0);
	if (page == MAP_FAILED) {
		perror("xskpeer: mmap control page (fd 3)");
		return 1;
	}
	if (xskpeer_start(page, mode_tx, ifindex, nqueues, ring_size, nframes, frame_size, batch, tx_batch, tx_budget, nap_ns, group) < 0) {
		fprintf(stderr, "xskpeer: %s\n", ctl->err);
		return 1;
	}
	for (int q = 0; q < nthreads; q++)
		pthread_join(threads[q], NULL);
	return 0;
}
#endif
