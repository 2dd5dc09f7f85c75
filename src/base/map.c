/*
 * The intrusive hash map of crun/map.h. Nodes live in the caller's structs, so
 * a store entry costs one allocation; the only memory the map owns is its
 * bucket array, which doubles (a full rehash, amortised O(1) per insert) when
 * there are more nodes than buckets, and never shrinks.
 *
 * Keys come from the network, so the hash is keyed: SipHash-2-4 (libsodium's
 * crypto_shorthash) with a key drawn from randombytes_buf once per process.
 * A client cannot then choose keys that share a bucket (an unkeyed FNV-1a let
 * 30000 chosen keys make every lookup walk one chain).
 */
#include <pthread.h>
#include <sodium.h>
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

static unsigned char map_key[crypto_shorthash_KEYBYTES];
static pthread_once_t map_key_once = PTHREAD_ONCE_INIT;

/* Draw this process's hash key (once, whichever thread gets here first). */
static void map_key_init(void)
{
	if (sodium_init() < 0)
		abort(); /* no entropy source: nothing safe to fall back to */
	randombytes_buf(map_key, sizeof(map_key));
}

uint64_t map_hash(const void *key, size_t klen)
{
	unsigned char out[crypto_shorthash_BYTES];
	uint64_t h;

	pthread_once(&map_key_once, map_key_init);
	crypto_shorthash(out, key, klen, map_key);
	memcpy(&h, out, sizeof(h));
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
