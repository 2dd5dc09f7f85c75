/*
 * An intrusive hash map from byte-string keys to nodes embedded in the
 * caller's structs (the store's entries). Chained, power-of-two buckets,
 * doubled when the load passes 1, so insert, find and remove are O(1)
 * amortised. The map never allocates or frees nodes; it owns only its bucket
 * array. Not thread-safe.
 */
#ifndef CRUN_MAP_H
#define CRUN_MAP_H

#include <stddef.h>
#include <stdint.h>

/* Embed in the caller's struct; key and klen must stay valid while linked. */
struct map_node {
	struct map_node *next;
	uint64_t hash;
	const void *key;
	size_t klen;
};

struct map {
	struct map_node **buckets;
	size_t mask; /* number of buckets - 1; buckets is NULL while empty */
	size_t count;
};

/** Initialise an empty map (allocates nothing). */
void map_init(struct map *m);

/** Free the bucket array; the caller frees its nodes first (see map_next). */
void map_release(struct map *m);

/**
 * The hash the map uses for a key: SipHash-2-4 keyed with a random key drawn
 * once per process, so bucket collisions cannot be chosen from outside.
 */
uint64_t map_hash(const void *key, size_t klen);

/** The node with this key, or NULL. hash is map_hash(key, klen). */
struct map_node *map_find(const struct map *m, const void *key, size_t klen,
			  uint64_t hash);

/**
 * Link n, whose key, klen and hash the caller has set and which must not be
 * in the map already. Returns 0 or UV_ENOMEM (n is not linked then).
 */
int map_insert(struct map *m, struct map_node *n);

/** Unlink n, which must be in the map. */
void map_remove(struct map *m, struct map_node *n);

/* Iteration state: zero it to start (struct map_iter it = {0}). */
struct map_iter {
	size_t pos;	       /* next bucket to look at */
	struct map_node *next; /* next node in the current chain */
};

/**
 * The next node, or NULL at the end. The node returned may be removed before
 * the next call; no other node may be inserted or removed during iteration.
 */
struct map_node *map_next(const struct map *m, struct map_iter *it);

#endif
