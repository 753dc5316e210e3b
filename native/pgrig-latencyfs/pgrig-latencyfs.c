/*
 * pgrig-latencyfs: a passthrough FUSE filesystem that behaves like a cloud disk.
 *
 * In the style of libfuse's example/passthrough_fh.c (high-level API, file
 * handles), with what a cloud disk adds to every I/O that reaches it:
 *
 *   - a latency: every read that reaches the layer (a page-cache miss, or
 *     O_DIRECT) and every fsync/fdatasync (files and directories) returns
 *     read_delay_ns / sync_delay_ns after the I/O was admitted (a deadline:
 *     a sync lasts the longer of the backing disk's own and the delay), or -
 *     syncs in proportion - sync_factor x what the backing disk's own sync took;
 *   - a total cap: reads and writes draw from the same token buckets, IOPS and
 *     bytes per second (a cloud disk counts them together), with a burst rate
 *     where the class has credits;
 *   - an instance cap: the same buckets in a second shared file, mapped by
 *     every disk (mount) of one target, so they share it.
 *
 * The buckets are GCRA ("virtual scheduling"): one 64-bit theoretical arrival
 * time per bucket, advanced with compare-and-swap, so many threads - and many
 * processes mapping the same file - share it without a lock.
 *
 * Control: pgrig writes the settings into a small file (--control), which
 * this process maps shared and reads on every request; it writes its counters
 * there. The layout is fixed (CTL_* offsets below; pgrig/storage/nativefs.py
 * mirrors it). SIGTERM/SIGINT unmount and exit.
 */
#define FUSE_USE_VERSION 314
#define _GNU_SOURCE

#include <fuse.h>

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <pthread.h>
#include <sys/time.h>
#include <time.h>
#include <unistd.h>

#define MAGIC 0x70677269674c4154ULL /* "pgrigLAT" */
#define VERSION 2
#define CTL_SIZE 4096

/* A bucket: rate in units per second (0: no cap), tolerance in ns (how far
 * ahead of the rate it may run: a burst's depth), and its state. */
struct bucket {
	int64_t rate;
	int64_t tau_ns;
	int64_t tat; /* theoretical arrival time, CLOCK_MONOTONIC ns */
	int64_t pad;
};

enum { B_IOPS, B_BPS, B_BURST_IOPS, B_BURST_BPS, NBUCKETS };

enum {
	C_READS, C_WRITES, C_SYNCS, C_READ_BYTES, C_WRITE_BYTES,
	C_THROTTLED, C_THROTTLE_NS, C_READ_DELAY_NS, C_SYNC_DELAY_NS,
	C_BACKING_SYNC_NS, C_BULK_SYNCS, C_BULK_SYNC_NS, NCOUNTERS = 16
};

struct ctl {
	uint64_t magic;
	uint64_t version;
	int64_t read_delay_ns;
	int64_t sync_delay_ns;
	int64_t sync_factor_milli; /* > 1000: each sync lasts factor x the backing sync */
	int64_t sync_overhead_ns;  /* ... less this (the layer's own cost) */
	int64_t spin_ns;           /* spin the last spin_ns of a wait (0: sleep only) */
	int64_t sync_small_ns;     /* the disk's own small sync as calibrated: a bulk flush's
				      latency until the layer has timed small syncs itself */
	int64_t backing_extra_ns;  /* added to every backing sync, counted as the disk's: a
				      slower disk than this one, for tests and benches */
	struct bucket buckets[NBUCKETS];
	uint64_t counters[NCOUNTERS];
};

static struct ctl *disk;     /* this mount's */
static struct ctl *instance; /* shared by every disk of the target, or NULL */

static int64_t now_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

static void count(int which, uint64_t n)
{
	__atomic_add_fetch(&disk->counters[which], n, __ATOMIC_RELAXED);
}

static int64_t setting(const int64_t *field)
{
	return __atomic_load_n(field, __ATOMIC_RELAXED);
}

/* Sleep until the absolute CLOCK_MONOTONIC time `until`, spinning its last
 * spin_ns (a wake-up from sleep is late by the scheduler's latency). */
static void wait_until(int64_t until)
{
	int64_t spin = setting(&disk->spin_ns);
	int64_t sleep_to = until - spin;
	if (sleep_to > now_ns()) {
		struct timespec ts = { sleep_to / 1000000000LL, sleep_to % 1000000000LL };
		while (clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &ts, NULL) == EINTR)
			;
	}
	while (spin > 0 && now_ns() < until)
		;
}

/* GCRA: reserve `units` in bucket b at time t; returns when the I/O may start. */
static int64_t reserve(struct bucket *b, int64_t units, int64_t t)
{
	int64_t rate = setting(&b->rate);
	if (rate <= 0)
		return t;
	int64_t cost = (int64_t)((__int128)units * 1000000000LL / rate);
	int64_t tau = setting(&b->tau_ns);
	int64_t old = __atomic_load_n(&b->tat, __ATOMIC_RELAXED);
	for (;;) {
		int64_t base = old > t ? old : t;
		int64_t start = old - tau > t ? old - tau : t;
		if (__atomic_compare_exchange_n(&b->tat, &old, base + cost, 0,
						__ATOMIC_ACQ_REL, __ATOMIC_RELAXED))
			return start;
	}
}

static int64_t admit_in(struct ctl *c, int64_t bytes, int64_t t)
{
	int64_t s = reserve(&c->buckets[B_IOPS], 1, t);
	int64_t x = reserve(&c->buckets[B_BPS], bytes, t);
	if (x > s)
		s = x;
	x = reserve(&c->buckets[B_BURST_IOPS], 1, t);
	if (x > s)
		s = x;
	x = reserve(&c->buckets[B_BURST_BPS], bytes, t);
	return x > s ? x : s;
}

/* One read or write of `bytes`: waits for the disk's and the instance's
 * buckets; returns the time it was admitted. */
static int64_t admit(int64_t bytes)
{
	int64_t t = now_ns();
	int64_t s = admit_in(disk, bytes, t);
	if (instance) {
		int64_t x = admit_in(instance, bytes, t);
		if (x > s)
			s = x;
	}
	if (s > t) {
		count(C_THROTTLED, 1);
		count(C_THROTTLE_NS, (uint64_t)(s - t));
		wait_until(s);
		return s;
	}
	return t;
}

static const char *rel(const char *path)
{
	return path[1] ? path + 1 : ".";
}

/* Files are made by root (this process) for the caller: give them to it, as a
 * disk's filesystem would have. */
static void own(const char *path, int fd)
{
	struct fuse_context *ctx = fuse_get_context();
	if (geteuid() != 0 || ctx == NULL)
		return;
	if (fd >= 0)
		(void)!fchown(fd, ctx->uid, ctx->gid);
	else if (path != NULL)
		(void)!lchown(path, ctx->uid, ctx->gid);
}

static void *lat_init(struct fuse_conn_info *conn, struct fuse_config *cfg)
{
	(void)conn;
	cfg->use_ino = 1;
	cfg->nullpath_ok = 1;
	/* Nothing but this process changes the backing tree while mounted. */
	cfg->entry_timeout = 10.0;
	cfg->attr_timeout = 10.0;
	cfg->negative_timeout = 1.0;
	cfg->kernel_cache = 1; /* an open keeps the page cache: a hit never reaches us */
	return NULL;
}

static int lat_getattr(const char *path, struct stat *st, struct fuse_file_info *fi)
{
	int res = fi ? fstat((int)fi->fh, st) : lstat(rel(path), st);
	return res == -1 ? -errno : 0;
}

static int lat_access(const char *path, int mask)
{
	return access(rel(path), mask) == -1 ? -errno : 0;
}

static int lat_readlink(const char *path, char *buf, size_t size)
{
	ssize_t res = readlink(rel(path), buf, size - 1);
	if (res == -1)
		return -errno;
	buf[res] = '\0';
	return 0;
}

struct dirp {
	DIR *dp;
	struct dirent *entry;
	off_t offset;
};

static int lat_opendir(const char *path, struct fuse_file_info *fi)
{
	struct dirp *d = malloc(sizeof *d);
	if (d == NULL)
		return -ENOMEM;
	d->dp = opendir(rel(path));
	if (d->dp == NULL) {
		int res = -errno;
		free(d);
		return res;
	}
	d->offset = 0;
	d->entry = NULL;
	fi->fh = (uintptr_t)d;
	return 0;
}

static struct dirp *get_dirp(struct fuse_file_info *fi)
{
	return (struct dirp *)(uintptr_t)fi->fh;
}

static int lat_readdir(const char *path, void *buf, fuse_fill_dir_t filler, off_t offset,
		       struct fuse_file_info *fi, enum fuse_readdir_flags flags)
{
	struct dirp *d = get_dirp(fi);
	(void)path;
	(void)flags;
	if (offset != d->offset) {
		seekdir(d->dp, offset);
		d->entry = NULL;
		d->offset = offset;
	}
	for (;;) {
		struct stat st;
		if (!d->entry) {
			d->entry = readdir(d->dp);
			if (!d->entry)
				break;
		}
		memset(&st, 0, sizeof st);
		st.st_ino = d->entry->d_ino;
		st.st_mode = d->entry->d_type << 12;
		off_t next = telldir(d->dp);
		if (filler(buf, d->entry->d_name, &st, next, 0))
			break;
		d->entry = NULL;
		d->offset = next;
	}
	return 0;
}

static int lat_releasedir(const char *path, struct fuse_file_info *fi)
{
	struct dirp *d = get_dirp(fi);
	(void)path;
	closedir(d->dp);
	free(d);
	return 0;
}

static int lat_mknod(const char *path, mode_t mode, dev_t rdev)
{
	int res = S_ISFIFO(mode) ? mkfifo(rel(path), mode) : mknod(rel(path), mode, rdev);
	if (res == -1)
		return -errno;
	own(rel(path), -1);
	return 0;
}

static int lat_mkdir(const char *path, mode_t mode)
{
	if (mkdir(rel(path), mode) == -1)
		return -errno;
	own(rel(path), -1);
	return 0;
}

static int lat_unlink(const char *path)
{
	return unlink(rel(path)) == -1 ? -errno : 0;
}

static int lat_rmdir(const char *path)
{
	return rmdir(rel(path)) == -1 ? -errno : 0;
}

static int lat_symlink(const char *from, const char *to)
{
	if (symlink(from, rel(to)) == -1)
		return -errno;
	own(rel(to), -1);
	return 0;
}

static int lat_rename(const char *from, const char *to, unsigned int flags)
{
	if (flags)
		return -EINVAL;
	return rename(rel(from), rel(to)) == -1 ? -errno : 0;
}

static int lat_link(const char *from, const char *to)
{
	return link(rel(from), rel(to)) == -1 ? -errno : 0;
}

static int lat_chmod(const char *path, mode_t mode, struct fuse_file_info *fi)
{
	int res = fi ? fchmod((int)fi->fh, mode) : chmod(rel(path), mode);
	return res == -1 ? -errno : 0;
}

static int lat_chown(const char *path, uid_t uid, gid_t gid, struct fuse_file_info *fi)
{
	int res = fi ? fchown((int)fi->fh, uid, gid) : lchown(rel(path), uid, gid);
	return res == -1 ? -errno : 0;
}

static int lat_truncate(const char *path, off_t size, struct fuse_file_info *fi)
{
	int res = fi ? ftruncate((int)fi->fh, size) : truncate(rel(path), size);
	return res == -1 ? -errno : 0;
}

static int lat_utimens(const char *path, const struct timespec ts[2], struct fuse_file_info *fi)
{
	int res = fi ? futimens((int)fi->fh, ts)
		     : utimensat(AT_FDCWD, rel(path), ts, AT_SYMLINK_NOFOLLOW);
	return res == -1 ? -errno : 0;
}

/* O_DIRECT reaches the layer by itself (the kernel sends every such read and
 * write here); the backing file is read through the host's page cache, as the
 * Python layer does, so libfuse's unaligned buffers are fine. */
static int backing_flags(int flags)
{
	return flags & ~O_DIRECT;
}

/* Bytes written through the layer to each file since its last sync, by inode
 * (a checkpointer syncs through its own descriptor what backends wrote through
 * theirs): every write of the backing tree comes through here, so the count
 * is whole. A table of INODES files, open addressing, never shrunk; a file
 * that finds it full counts as unknown (its syncs are small ones). The kernel
 * has a count too (cachestat(2)), but by folio: an 8 kB rewrite in a file
 * written in large chunks counted as up to 1 MiB, and 13,840 of
 * pg_test_fsync's 36,013 syncs were called bulk. */
#define INODES 8192
#define FDS 65536
struct written {
	uint64_t ino;
	int64_t bytes;
};
static struct written written_tab[INODES];
static uint64_t fd_ino[FDS]; /* the inode behind each backing descriptor, 0: none */
static pthread_mutex_t written_lock = PTHREAD_MUTEX_INITIALIZER;

static struct written *written_of(int fd)
{
	if (fd < 0 || fd >= FDS)
		return NULL;
	uint64_t ino = __atomic_load_n(&fd_ino[fd], __ATOMIC_ACQUIRE);
	if (ino == 0)
		return NULL;
	size_t i = (size_t)((ino * 0x9E3779B97F4A7C15ULL) >> 51) & (INODES - 1);
	for (size_t n = 0; n < INODES; n++, i = (i + 1) & (INODES - 1)) {
		uint64_t k = __atomic_load_n(&written_tab[i].ino, __ATOMIC_ACQUIRE);
		if (k == 0) {
			pthread_mutex_lock(&written_lock);
			k = __atomic_load_n(&written_tab[i].ino, __ATOMIC_ACQUIRE);
			if (k == 0) {
				__atomic_store_n(&written_tab[i].ino, ino, __ATOMIC_RELEASE);
				k = ino;
			}
			pthread_mutex_unlock(&written_lock);
		}
		if (k == ino)
			return &written_tab[i];
	}
	return NULL;
}

static void track(int fd)
{
	struct stat st;
	if (fd >= 0 && fd < FDS && fstat(fd, &st) == 0 && S_ISREG(st.st_mode))
		__atomic_store_n(&fd_ino[fd], (uint64_t)st.st_ino + 1, __ATOMIC_RELEASE);
}

static void untrack(int fd)
{
	if (fd >= 0 && fd < FDS)
		__atomic_store_n(&fd_ino[fd], 0, __ATOMIC_RELEASE);
}

static int lat_create(const char *path, mode_t mode, struct fuse_file_info *fi)
{
	int fd = open(rel(path), backing_flags(fi->flags), mode);
	if (fd == -1)
		return -errno;
	own(NULL, fd);
	track(fd);
	fi->fh = (uint64_t)fd;
	return 0;
}

static int lat_open(const char *path, struct fuse_file_info *fi)
{
	int fd = open(rel(path), backing_flags(fi->flags));
	if (fd == -1)
		return -errno;
	track(fd);
	fi->fh = (uint64_t)fd;
	return 0;
}

static int lat_read(const char *path, char *buf, size_t size, off_t offset,
		    struct fuse_file_info *fi)
{
	(void)path;
	int64_t admitted = admit((int64_t)size);
	ssize_t res = pread((int)fi->fh, buf, size, offset);
	if (res == -1)
		return -errno;
	int64_t delay = setting(&disk->read_delay_ns);
	if (delay > 0) {
		wait_until(admitted + delay);
		count(C_READ_DELAY_NS, (uint64_t)(now_ns() - admitted));
	}
	count(C_READS, 1);
	count(C_READ_BYTES, (uint64_t)res);
	return (int)res;
}

static int lat_write(const char *path, const char *buf, size_t size, off_t offset,
		     struct fuse_file_info *fi)
{
	(void)path;
	admit((int64_t)size);
	ssize_t res = pwrite((int)fi->fh, buf, size, offset);
	if (res == -1)
		return -errno;
	count(C_WRITES, 1);
	count(C_WRITE_BYTES, (uint64_t)res);
	struct written *w = written_of((int)fi->fh);
	if (w != NULL)
		__atomic_add_fetch(&w->bytes, (int64_t)res, __ATOMIC_RELAXED);
	return (int)res;
}

static int lat_statfs(const char *path, struct statvfs *st)
{
	return statvfs(rel(path), st) == -1 ? -errno : 0;
}

static int lat_flush(const char *path, struct fuse_file_info *fi)
{
	(void)path;
	return close(dup((int)fi->fh)) == -1 ? -errno : 0;
}

static int lat_release(const char *path, struct fuse_file_info *fi)
{
	(void)path;
	untrack((int)fi->fh);
	close((int)fi->fh);
	return 0;
}

/* A sync that flushes more than this is a bulk flush (a checkpoint's fsync, a
 * file laid out then synced), not one latency: 256 KiB take this VM's disk
 * longer to move than its own small sync (0.1-0.6 ms). */
#define BULK_BYTES (256 * 1024)

/* Bytes written to fd's file since its last sync, or -1 when not known. */
static int64_t unwritten(int fd)
{
	struct written *w = written_of(fd);
	return w != NULL ? __atomic_exchange_n(&w->bytes, 0, __ATOMIC_RELAXED) : -1;
}

/* The disk's own small sync of late (ns): what a bulk flush's extra latency
 * is counted over. 0 until a small sync was timed. */
static int64_t small_sync_ns;

/* A sync: the backing file's, and it returns the class's latency after its
 * arrival - a deadline (the delay from its arrival, or the disk's own time
 * where that is longer), or factor x the backing sync's own (less the layer's
 * cost).
 *
 * A bulk flush is not one latency, nor factor x its time: the class's latency
 * is per sync, and moving the data is the disk's throughput, which the MB/s
 * bucket already charged each write as it came through the layer (a 16 MiB
 * file laid out and fsynced took 24 ms on this disk and 705 ms at gp3's
 * factor 28.6, where a gp3 disk takes one latency plus 16 MiB at 125 MiB/s).
 * So a bulk flush lasts its own time plus the extra latency the class has
 * over this disk's small sync of late: (factor - 1) x it in proportion, the
 * delay less it on a deadline. */
static int synced(int fd, int datasync)
{
	int64_t t = now_ns();
	int64_t factor = setting(&disk->sync_factor_milli);
	int64_t delay = setting(&disk->sync_delay_ns);
	int64_t bytes = unwritten(fd); /* counted apart in either mode: bulk_sync_ns */
	int64_t started = now_ns();
	int res = datasync ? fdatasync(fd) : fsync(fd);
	int err = errno;
	int64_t extra = setting(&disk->backing_extra_ns);
	if (extra > 0)
		wait_until(now_ns() + extra);
	int64_t took = now_ns() - started;
	count(C_BACKING_SYNC_NS, (uint64_t)took);
	int64_t small = __atomic_load_n(&small_sync_ns, __ATOMIC_RELAXED);
	if (bytes > BULK_BYTES) {
		if (small <= 0)
			small = setting(&disk->sync_small_ns);
	} else if (bytes >= 0) { /* a small sync, known to be: the estimate moves 1/8 */
		__atomic_store_n(&small_sync_ns, small > 0 ? small + (took - small) / 8 : took,
				 __ATOMIC_RELAXED);
	}
	int64_t until = t + delay;
	if (factor > 1000) {
		int64_t lasts = bytes > BULK_BYTES ? took + (factor - 1000) * small / 1000
						   : factor * took / 1000;
		lasts -= setting(&disk->sync_overhead_ns);
		if (t + lasts > until)
			until = t + lasts;
	} else if (bytes > BULK_BYTES && delay > small) {
		until = started + took + delay - small;
	}
	if (until > now_ns()) {
		wait_until(until);
	}
	int64_t in_layer = now_ns() - t;
	count(C_SYNC_DELAY_NS, (uint64_t)in_layer);
	if (bytes > BULK_BYTES) {
		count(C_BULK_SYNCS, 1);
		count(C_BULK_SYNC_NS, (uint64_t)in_layer);
	}
	count(C_SYNCS, 1);
	return res == -1 ? -err : 0;
}

static int lat_fsync(const char *path, int datasync, struct fuse_file_info *fi)
{
	(void)path;
	return synced((int)fi->fh, datasync);
}

static int lat_fsyncdir(const char *path, int datasync, struct fuse_file_info *fi)
{
	(void)path;
	return synced(dirfd(get_dirp(fi)->dp), datasync);
}

static int lat_fallocate(const char *path, int mode, off_t offset, off_t length,
			 struct fuse_file_info *fi)
{
	(void)path;
	if (mode)
		return -EOPNOTSUPP;
	return -posix_fallocate((int)fi->fh, offset, length);
}

static int lat_flock(const char *path, struct fuse_file_info *fi, int op)
{
	(void)path;
	return flock((int)fi->fh, op) == -1 ? -errno : 0;
}

static off_t lat_lseek(const char *path, off_t off, int whence, struct fuse_file_info *fi)
{
	(void)path;
	off_t res = lseek((int)fi->fh, off, whence);
	return res == -1 ? -errno : res;
}

static const struct fuse_operations ops = {
	.init = lat_init,
	.getattr = lat_getattr,
	.access = lat_access,
	.readlink = lat_readlink,
	.opendir = lat_opendir,
	.readdir = lat_readdir,
	.releasedir = lat_releasedir,
	.mknod = lat_mknod,
	.mkdir = lat_mkdir,
	.symlink = lat_symlink,
	.unlink = lat_unlink,
	.rmdir = lat_rmdir,
	.rename = lat_rename,
	.link = lat_link,
	.chmod = lat_chmod,
	.chown = lat_chown,
	.truncate = lat_truncate,
	.utimens = lat_utimens,
	.create = lat_create,
	.open = lat_open,
	.read = lat_read,
	.write = lat_write,
	.statfs = lat_statfs,
	.flush = lat_flush,
	.release = lat_release,
	.fsync = lat_fsync,
	.fsyncdir = lat_fsyncdir,
	.fallocate = lat_fallocate,
	.flock = lat_flock,
	.lseek = lat_lseek,
};

static struct ctl *map_ctl(const char *file)
{
	int fd = open(file, O_RDWR | O_CLOEXEC);
	if (fd == -1) {
		fprintf(stderr, "pgrig-latencyfs: cannot open %s: %s\n", file, strerror(errno));
		return NULL;
	}
	void *p = mmap(NULL, CTL_SIZE, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	close(fd);
	if (p == MAP_FAILED) {
		fprintf(stderr, "pgrig-latencyfs: cannot map %s: %s\n", file, strerror(errno));
		return NULL;
	}
	struct ctl *c = p;
	if (c->magic != MAGIC || c->version != VERSION) {
		fprintf(stderr, "pgrig-latencyfs: %s is not a version %d control file\n", file,
			VERSION);
		return NULL;
	}
	return c;
}

static const char *value(const char *arg, const char *name)
{
	size_t n = strlen(name);
	return strncmp(arg, name, n) == 0 ? arg + n : NULL;
}

int main(int argc, char *argv[])
{
	const char *backing = NULL, *control = NULL, *shared = NULL, *fsname = NULL;
	const char *mountpoint = NULL, *v;
	int allow_other = 0, threads = 64;
	for (int i = 1; i < argc; i++) {
		if ((v = value(argv[i], "--backing=")))
			backing = v;
		else if ((v = value(argv[i], "--control=")))
			control = v;
		else if ((v = value(argv[i], "--instance=")))
			shared = v;
		else if ((v = value(argv[i], "--fsname=")))
			fsname = v;
		else if ((v = value(argv[i], "--threads=")))
			threads = atoi(v);
		else if (strcmp(argv[i], "--allow-other") == 0)
			allow_other = 1;
		else if (strcmp(argv[i], "--version") == 0) {
			printf("pgrig-latencyfs %d (libfuse %s)\n", VERSION, fuse_pkgversion());
			return 0;
		} else if (argv[i][0] != '-' && mountpoint == NULL)
			mountpoint = argv[i];
		else {
			fprintf(stderr, "pgrig-latencyfs: unknown argument %s\n", argv[i]);
			return 2;
		}
	}
	if (!backing || !control || !fsname || !mountpoint || threads < 1) {
		fprintf(stderr, "usage: pgrig-latencyfs --backing=DIR --control=FILE "
				"[--instance=FILE] --fsname=NAME [--allow-other] [--threads=N] "
				"MOUNTPOINT\n");
		return 2;
	}
	disk = map_ctl(control);
	if (!disk || (shared && !(instance = map_ctl(shared))))
		return 1;
	if (chdir(backing) == -1) {
		fprintf(stderr, "pgrig-latencyfs: cannot enter %s: %s\n", backing, strerror(errno));
		return 1;
	}
	/* The default timer slack (50 us) would be most of a 100 us delay; the
	 * worker threads inherit it. */
	prctl(PR_SET_TIMERSLACK, 1UL, 0, 0, 0);
	umask(0);

	char opts[512];
	snprintf(opts, sizeof opts, "fsname=%s,subtype=pgrig-latencyfs,default_permissions%s",
		 fsname, allow_other ? ",allow_other" : "");
	char *fargv[] = { argv[0], "-o", opts, NULL };
	struct fuse_args args = FUSE_ARGS_INIT(3, fargv);
	struct fuse *fuse = fuse_new(&args, &ops, sizeof ops, NULL);
	if (fuse == NULL)
		return 1;
	int rc = 1;
	if (fuse_mount(fuse, mountpoint) == 0) {
		struct fuse_session *se = fuse_get_session(fuse);
		if (fuse_set_signal_handlers(se) == 0) {
			struct fuse_loop_config *cfg = fuse_loop_cfg_create();
			fuse_loop_cfg_set_max_threads(cfg, (unsigned)threads);
			fuse_loop_cfg_set_idle_threads(cfg, (unsigned)(threads < 16 ? threads : 16));
			rc = fuse_loop_mt(fuse, cfg) == 0 ? 0 : 1;
			fuse_loop_cfg_destroy(cfg);
			fuse_remove_signal_handlers(se);
		}
		fuse_unmount(fuse);
	}
	fuse_destroy(fuse);
	return rc;
}
