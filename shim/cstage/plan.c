/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The C decoder of a glove-shim plan (see plan.h and shim/plancodec.go for
 * the layout). It refuses everything the Go reference decoder of the tests
 * (shim/plandecode_test.go) refuses: a wrong
 * magic, a truncated, overlong or non-shortest integer, a count larger
 * than the bytes left, a boolean or presence byte other than 0 or 1, a
 * value out of its field's range, a string holding a NUL, budgets not in
 * strictly increasing order of name, and trailing bytes. The bytes come
 * from stage 0's Go part, which is trusted; a decoder is still where a
 * mistake on either side would turn into a wrong sandbox.
 */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "plan.h"

static const char plan_magic[] = "glove-plan-5\n";

struct gp_alloc {
	struct gp_alloc *next;
	/* the allocation follows, aligned as malloc aligns */
	max_align_t data[];
};

struct dec {
	const unsigned char *b;
	size_t n;
	int failed;
	char *err;
	size_t errlen;
	struct glove_plan *p;
};

static void dfail(struct dec *d, const char *fmt, ...)
{
	va_list ap;
	int off;

	if (d->failed)
		return;
	d->failed = 1;
	off = snprintf(d->err, d->errlen, "malformed plan: ");
	if (off < 0 || (size_t)off >= d->errlen)
		return;
	va_start(ap, fmt);
	vsnprintf(d->err + off, d->errlen - (size_t)off, fmt, ap);
	va_end(ap);
}

/* galloc returns zeroed memory owned by the plan, or NULL (and the
 * decoding fails) when the allocation is refused. */
static void *galloc(struct dec *d, size_t count, size_t size)
{
	struct gp_alloc *a;

	if (d->failed)
		return NULL;
	if (size != 0 && count > (SIZE_MAX - sizeof(*a)) / size) {
		dfail(d, "allocation of %zu elements too large", count);
		return NULL;
	}
	a = calloc(1, sizeof(*a) + count * size);
	if (a == NULL) {
		dfail(d, "out of memory");
		return NULL;
	}
	a->next = d->p->allocs;
	d->p->allocs = a;
	return a->data;
}

static uint64_t duint(struct dec *d)
{
	uint64_t x = 0;
	unsigned s = 0;
	size_t i;

	if (d->failed)
		return 0;
	for (i = 0; i < d->n; i++) {
		unsigned char c = d->b[i];
		if (i == 10) {
			dfail(d, "bad or truncated unsigned integer");
			return 0;
		}
		if (c < 0x80) {
			if (i == 9 && c > 1) {
				dfail(d, "bad or truncated unsigned integer");
				return 0;
			}
			/* One value has one encoding: a last byte of 0 after
			 * others is padding the encoder never writes. */
			if (i > 0 && c == 0) {
				dfail(d, "unsigned integer not in its shortest form");
				return 0;
			}
			x |= (uint64_t)c << s;
			d->b += i + 1;
			d->n -= i + 1;
			return x;
		}
		x |= (uint64_t)(c & 0x7f) << s;
		s += 7;
	}
	dfail(d, "bad or truncated unsigned integer");
	return 0;
}

static int64_t dint(struct dec *d)
{
	uint64_t ux = duint(d);
	uint64_t x = ux >> 1;

	if (ux & 1)
		x = ~x;
	return (int64_t)x;
}

static uint32_t duint32(struct dec *d)
{
	uint64_t v = duint(d);

	if (v > UINT32_MAX) {
		dfail(d, "%llu does not fit 32 bits", (unsigned long long)v);
		return 0;
	}
	return (uint32_t)v;
}

static int dbool(struct dec *d)
{
	if (d->failed)
		return 0;
	if (d->n == 0) {
		dfail(d, "truncated boolean");
		return 0;
	}
	if (d->b[0] > 1) {
		dfail(d, "boolean byte %u", d->b[0]);
		return 0;
	}
	d->b++;
	d->n--;
	return d->b[-1];
}

/* dcount reads a list length, which cannot exceed the bytes left: every
 * element takes at least one. */
static size_t dcount(struct dec *d)
{
	uint64_t v = duint(d);

	if (v > d->n) {
		dfail(d, "count %llu larger than the %zu bytes left", (unsigned long long)v, d->n);
		return 0;
	}
	return (size_t)v;
}

/* dbytes returns a copy of a length-prefixed byte string, with a NUL
 * after it; *len is its length. */
static unsigned char *dbytes(struct dec *d, size_t *len)
{
	size_t n = dcount(d);
	unsigned char *v;

	*len = 0;
	if (d->failed)
		return NULL;
	v = galloc(d, n + 1, 1);
	if (v == NULL)
		return NULL;
	memcpy(v, d->b, n);
	d->b += n;
	d->n -= n;
	*len = n;
	return v;
}

/* dstr is a string: no stage can hand a NUL inside one to the kernel,
 * which would read it as the string's end. */
static char *dstr(struct dec *d)
{
	size_t n;
	char *s = (char *)dbytes(d, &n);

	if (s != NULL && memchr(s, 0, n) != NULL) {
		dfail(d, "string contains NUL");
		return NULL;
	}
	return s;
}

static void dstrs(struct dec *d, struct gp_strs *ss)
{
	size_t n = dcount(d), i;

	ss->n = 0;
	ss->v = galloc(d, n + 1, sizeof(char *));
	if (ss->v == NULL)
		return;
	for (i = 0; i < n && !d->failed; i++)
		ss->v[i] = dstr(d);
	ss->n = n;
}

static void dident(struct dec *d, struct gp_ident *id)
{
	id->dev = duint(d);
	id->ino = duint(d);
}

void glove_plan_free(struct glove_plan *p)
{
	struct gp_alloc *a = p->allocs, *next;

	while (a != NULL) {
		next = a->next;
		free(a);
		a = next;
	}
	memset(p, 0, sizeof(*p));
}

int glove_plan_decode(const unsigned char *b, size_t n, struct glove_plan *p, char *err, size_t errlen)
{
	struct dec d = { .b = b, .n = n, .err = err, .errlen = errlen, .p = p };
	struct gp_process *pp = &p->process;
	const size_t ml = sizeof(plan_magic) - 1;
	size_t i, j, k;

	memset(p, 0, sizeof(*p));
	if (errlen > 0)
		err[0] = 0;
	if (n < ml || memcmp(b, plan_magic, ml) != 0) {
		dfail(&d, "not a glove-shim plan");
		return -1;
	}
	d.b += ml;
	d.n -= ml;

	p->preserve_fds = dint(&d);
	p->hostname = dstr(&d);
	p->uid = duint32(&d);
	p->gid = duint32(&d);
	p->host_uid = duint32(&d);
	p->host_gid = duint32(&d);
	p->root_readonly = dbool(&d);
	p->root_tmpfs = dbool(&d);
	k = dcount(&d);
	p->mounts = galloc(&d, k, sizeof(*p->mounts));
	for (i = 0; i < k && !d.failed; i++) {
		struct gp_mount *m = &p->mounts[i];
		size_t c;

		m->destination = dstr(&d);
		m->kind = dstr(&d);
		m->source_path = dstr(&d);
		dident(&d, &m->source_ident);
		m->source_fd = dint(&d);
		m->source_sub = dstr(&d);
		m->recursive = dbool(&d);
		m->attr = duint(&d);
		c = dcount(&d);
		m->config = galloc(&d, c, sizeof(*m->config));
		for (j = 0; j < c && !d.failed; j++) {
			m->config[j][0] = dstr(&d);
			m->config[j][1] = dstr(&d);
		}
		m->nconfig = c;
		m->writable = dbool(&d);
		m->file_target = dbool(&d);
	}
	p->nmounts = k;
	dstrs(&d, &p->masked);
	dstrs(&d, &p->readonly);
	dstrs(&d, &pp->args);
	dstrs(&d, &pp->env);
	pp->cwd = dstr(&d);
	pp->terminal = dbool(&d);
	pp->has_umask = dbool(&d);
	if (pp->has_umask)
		pp->umask = duint32(&d);
	k = dcount(&d);
	pp->rlimits = galloc(&d, k, sizeof(*pp->rlimits));
	for (i = 0; i < k && !d.failed; i++) {
		pp->rlimits[i].resource = dint(&d);
		pp->rlimits[i].soft = duint(&d);
		pp->rlimits[i].hard = duint(&d);
	}
	pp->nrlimits = k;
	pp->has_seccomp = dbool(&d);
	if (pp->has_seccomp)
		pp->seccomp = dbytes(&d, &pp->seccomp_len);
	pp->seccomp_flags = duint(&d);
	pp->seccomp_listener_fd = dint(&d);
	pp->deny_ioctls = dbytes(&d, &pp->deny_ioctls_len);
	k = dcount(&d);
	pp->pass_fds = galloc(&d, k, sizeof(*pp->pass_fds));
	for (i = 0; i < k && !d.failed; i++)
		pp->pass_fds[i] = dint(&d);
	pp->npass_fds = k;
	pp->cap_bounding = duint(&d);
	pp->cap_effective = duint(&d);
	pp->cap_inheritable = duint(&d);
	pp->cap_permitted = duint(&d);
	pp->cap_ambient = duint(&d);
	dstrs(&d, &pp->writable);
	dstrs(&d, &pp->writable_file);
	dstrs(&d, &p->off);
	p->root_path = dstr(&d);
	dident(&d, &p->root_ident);
	k = dcount(&d);
	p->budgets = galloc(&d, k, sizeof(*p->budgets));
	for (i = 0; i < k && !d.failed; i++) {
		p->budgets[i].name = dstr(&d);
		/* Sorted and unique, as the encoder writes them: one plan has
		 * one encoding. */
		if (i > 0 && !d.failed && strcmp(p->budgets[i].name, p->budgets[i - 1].name) <= 0)
			dfail(&d, "budget %s out of order", p->budgets[i].name);
		p->budgets[i].value = dint(&d);
	}
	p->nbudgets = k;
	k = dcount(&d);
	p->root_entries = galloc(&d, k, sizeof(*p->root_entries));
	for (i = 0; i < k && !d.failed; i++) {
		p->root_entries[i].name = dstr(&d);
		p->root_entries[i].link = dstr(&d);
		p->root_entries[i].dir = dbool(&d);
	}
	p->nroot_entries = k;
	p->egress_handoff_fd = dint(&d);
	k = dcount(&d);
	p->egress_ports = galloc(&d, k, sizeof(*p->egress_ports));
	for (i = 0; i < k && !d.failed; i++) {
		uint64_t v = duint(&d);

		if (!d.failed && (v == 0 || v > 65535))
			dfail(&d, "egress port %llu outside 1..65535", (unsigned long long)v);
		p->egress_ports[i] = (uint16_t)v;
	}
	p->negress_ports = k;
	p->userns_fd = dint(&d);
	if (!d.failed && d.n > 0)
		dfail(&d, "%zu bytes after the last field", d.n);
	if (d.failed) {
		glove_plan_free(p);
		return -1;
	}
	return 0;
}
