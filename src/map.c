/*
 * The intrusive hash map of crun/map.h. Nodes live in the caller's structs, so
 * a store entry costs one allocation; the only memory the map owns is its
 * bucket array, which doubles (a full rehash, amortised O(1) per insert) when
 * there are more nodes than buckets, and never shrinks.
 */
#include <stdlib.h>
#include <string.h>
#include <uv.h>

#include "crun/map.h"

#define MAP_MIN_BUCKETS 64

void map_init(struct map *m)
{
	m->buckets = NULL;
	m->mask = 0;
	m->count = 0;
}

void map_release(struct map *m)
{
	free(m->buckets);
	map_init(m);
}

uint64_t map_hash(const void *key, size_t klen)
{
	const unsigned char *p = key;
	uint64_t h = 0xcbf29ce484222325ull;
	size_t i;

	for (i = 0; i < klen; i++) {
		h ^= p[i];
		h *= 0x100000001b3ull;
	}
	/* Mix the high bits down: buckets are picked with the low ones. */
	h ^= h >> 32;
	return h;
}

struct map_node *map_find(const struct map *m, const void *key, size_t klen,
			  uint64_t hash)
{
	struct map_node *n;

	if (m->buckets == NULL)
		return NULL;
	for (n = m->buckets[hash & m->mask]; n != NULL; n = n->next)
		if (n->hash == hash && n->klen == klen &&
		    (klen == 0 || memcmp(n->key, key, klen) == 0))
			return n;
	return NULL;
}

/* Move every node into a bucket array of nb (a power of two) buckets. */
static int map_resize(struct map *m, size_t nb)
{
	struct map_node **b, *n, *next;
	size_t i;

	b = calloc(nb, sizeof(*b));
	if (b == NULL)
		return UV_ENOMEM;
	if (m->buckets != NULL) {
		for (i = 0; i <= m->mask; i++) {
			for (n = m->buckets[i]; n != NULL; n = next) {
				next = n->next;
				n->next = b[n->hash & (nb - 1)];
				b[n->hash & (nb - 1)] = n;
			}
		}
		free(m->buckets);
	}
	m->buckets = b;
	m->mask = nb - 1;
	return 0;
}

int map_insert(struct map *m, struct map_node *n)
{
	struct map_node **slot;
	int rc;

	if (m->buckets == NULL || m->count > m->mask) {
		rc = map_resize(m, m->buckets == NULL ? MAP_MIN_BUCKETS
						      : (m->mask + 1) * 2);
		/* A failed growth is fine while a bucket array exists. */
		if (rc != 0 && m->buckets == NULL)
			return rc;
	}
	slot = &m->buckets[n->hash & m->mask];
	n->next = *slot;
	*slot = n;
	m->count++;
	return 0;
}

void map_remove(struct map *m, struct map_node *n)
{
	struct map_node **pp;

	for (pp = &m->buckets[n->hash & m->mask]; *pp != n; pp = &(*pp)->next)
		;
	*pp = n->next;
	n->next = NULL;
	m->count--;
}

struct map_node *map_next(const struct map *m, struct map_iter *it)
{
	struct map_node *n = it->next;

	while (n == NULL && m->buckets != NULL && it->pos <= m->mask)
		n = m->buckets[it->pos++];
	it->next = n != NULL ? n->next : NULL;
	return n;
}
